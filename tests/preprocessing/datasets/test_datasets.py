"""Dataset builders with one signature: digits (real PNG files), synthetic, folder."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import PATIENCE_SECONDS, ROOT

from preprocessing.datasets import check_dataset, digits, make_datasets
from preprocessing.spec import BatchShape, DataError, InputSpec


def test_digits_are_written_once_as_png_files_with_a_fixed_split(digits_dir):
    root = digits.root(digits_dir)
    files = {split: [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(root, split))
                     for f in fs] for split in ("train", "validation")}
    assert len(files["train"]) == 1437 and len(files["validation"]) == 360
    assert sorted(os.listdir(os.path.join(root, "train"))) == [str(i) for i in range(10)]
    with open(files["train"][0], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    stamp = os.path.getmtime(files["train"][0])
    make_datasets("digits", InputSpec(data_dir=digits_dir, image_size=8, batch=BatchShape(16)))
    assert os.path.getmtime(files["train"][0]) == stamp  # not rewritten


def test_digits_stream_real_images_through_the_image_path(digits_dir):
    data = make_datasets("digits", InputSpec(data_dir=digits_dir, image_size=16,
                                             batch=BatchShape(32), seed=3))
    assert (data.num_classes, data.image_size) == (10, 16)
    assert (data.train_examples, data.validation_examples) == (1437, 360)
    images, labels = next(iter(data.train))
    assert images.shape == (32, 16, 16, 3) and labels.shape == (32,)
    assert -3 < float(np.min(images)) < 0 < float(np.max(images)) < 3  # normalized
    assert len(set(labels.numpy().tolist())) > 3
    # Validation: every image once, the last batch padded with weight 0.
    assert data.validation_batches == 12  # ceil(360 / 32)
    weights = np.concatenate([w.numpy() for _, _, w in data.validation])
    assert weights.shape == (384,) and weights.sum() == 360


def test_seeded_streams_repeat_and_unseeded_ones_differ(digits_dir):
    def first(seed):
        data = make_datasets("digits", InputSpec(data_dir=digits_dir, image_size=8,
                                                 batch=BatchShape(8), seed=seed))
        return next(iter(data.train))[0].numpy()

    np.testing.assert_array_equal(first(7), first(7))
    assert not np.array_equal(first(7), first(8))


def test_processes_read_disjoint_shards(digits_dir):
    labels = []
    for index in range(2):
        spec = InputSpec(data_dir=digits_dir, image_size=8, batch=BatchShape(16, 2),
                         process_index=index)
        data = make_datasets("digits", spec)
        assert data.validation_batches == 23  # ceil(180 / 8), the same for both
        labels.append(sum(int(w.numpy().sum()) for _, _, w in data.validation))
    assert labels == [180, 180]


def test_digits_refuse_a_data_dir_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")  # even root cannot make a folder under a file
    with pytest.raises(DataError, match="cannot be created or written"):
        check_dataset("digits", InputSpec(data_dir=str(blocker / "d"), image_size=8,
                                          batch=BatchShape(8)))


def test_synthetic_on_tensorflow_serves_one_batch_forever():
    data = make_datasets("synthetic", InputSpec(data_dir="", image_size=32, batch=BatchShape(4),
                                                seed=1))
    assert data.num_classes == 1000 and data.train_examples == 1_281_167
    first, second = list(data.train.take(2))
    np.testing.assert_array_equal(first[0].numpy(), second[0].numpy())
    assert first[0].shape == (4, 32, 32, 3)


def test_synthetic_on_jax_imports_no_tensorflow():
    code = (
        "import os, sys, json; os.environ['KERAS_BACKEND'] = 'jax'\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from preprocessing.spec import BatchShape, InputSpec\n"
        "from preprocessing.datasets import make_datasets\n"
        "d = make_datasets('synthetic', InputSpec(data_dir='', image_size=16, batch=BatchShape(4),"
        " backend='jax', dtype='bfloat16'))\n"
        "x, y = d.train[0]\n"
        "print(json.dumps({'tf': 'tensorflow' in sys.modules, 'shape': list(x.shape),"
        " 'dtype': str(x.dtype), 'type': type(x).__module__, 'val': d.validation_batches}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"tf": False, "shape": [4, 16, 16, 3], "dtype": "bfloat16",
                      "type": result["type"], "val": 12500}
    assert result["type"].startswith("jax")


@pytest.mark.parametrize("layout, message", [
    ({}, "is not a folder"),
    ({"train/": None}, "has no label folders"),
    ({"train/cat/": None}, "holds no .jpg/.jpeg/.png files"),
    ({"train/cat/a.jpg": b"x", "train/dog/a.jpg": b"x"}, "validation is missing"),
    ({"train/cat/a.jpg": b"x", "train/dog/a.jpg": b"x", "validation/bird/b.jpg": b"x"},
     "label folder(s) bird"),
])
def test_folder_layout_mistakes_name_the_path_and_the_layout(tmp_path, layout, message):
    root = tmp_path / "set"
    for name, content in layout.items():
        path = root / name
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    with pytest.raises(DataError) as error:
        check_dataset(f"folder:{root}", InputSpec(data_dir="", image_size=8, batch=BatchShape(8)))
    assert message in str(error.value)
    assert "PATH/train/<label>/" in str(error.value)
