"""tiny_shapes: 3 classes of 12x12 RGB images (a color per class), train and test."""

import numpy as np
import tensorflow_datasets as tfds


class Builder(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(12, 12, 3)),
                "label": tfds.features.ClassLabel(names=["red", "green", "blue"]),
            }),
            supervised_keys=("image", "label"))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(60, 0), "test": self._generate_examples(15, 1)}

    def _generate_examples(self, count, seed):
        rng = np.random.default_rng(seed)
        for i in range(count):
            image = rng.integers(0, 40, (12, 12, 3)).astype(np.uint8)
            image[:, :, i % 3] += 180
            yield i, {"image": image, "label": i % 3}
