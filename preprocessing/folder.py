"""`--dataset=folder:PATH`: images in PATH/train/<label>/ and PATH/validation/<label>/.

Labels are the sorted folder names under train/. Files ending in .jpg, .jpeg, .png
(any case) are read; the format is detected from the bytes, not the name.
"""

from __future__ import annotations

import os

from preprocessing import DataError, Datasets, InputSpec

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
LAYOUT = "PATH/train/<label>/*.jpg|png and PATH/validation/<label>/*.jpg|png"
DEFAULT_IMAGE_SIZE = 224


def _images_in(folder: str) -> list[str]:
    return sorted(os.path.join(folder, name) for name in os.listdir(folder)
                  if name.lower().endswith(IMAGE_EXTENSIONS))


def list_split(root: str, split: str, labels: list[str] | None = None):
    """[(path, label index)] of root/split, and the label names.

    Raises:
        DataError: if the split folder is missing, has no label folders, names a
            label that train/ lacks, or holds no images.
    """
    folder = os.path.join(root, split)
    if not os.path.isdir(folder):
        raise DataError(f"{folder} is missing; expected {LAYOUT}")
    found = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    if not found:
        raise DataError(f"{folder} has no label folders; expected {LAYOUT}")
    labels = labels or found
    unknown = sorted(set(found) - set(labels))
    if unknown:
        raise DataError(f"{folder} has label folder(s) {', '.join(unknown[:3])} that "
                        f"{os.path.join(root, 'train')} lacks; expected {LAYOUT}")
    records = [(path, labels.index(label)) for label in found
               for path in _images_in(os.path.join(folder, label))]
    if not records:
        raise DataError(f"{folder} holds no .jpg/.jpeg/.png files; expected {LAYOUT}")
    return records, labels


def check_root(root: str, with_validation: bool) -> None:
    if not os.path.isdir(root):
        raise DataError(f"{root} is not a folder; expected {LAYOUT}")
    _, labels = list_split(root, "train")
    if with_validation:
        list_split(root, "validation", labels)


def check(dataset: str, spec: InputSpec) -> None:
    check_root(dataset[len("folder:"):], spec.with_validation)


def make(dataset: str, spec: InputSpec) -> Datasets:
    root = dataset[len("folder:"):]
    return make_from_root(root, spec, os.path.basename(os.path.normpath(root)),
                          DEFAULT_IMAGE_SIZE, "standard")


def make_from_root(root: str, spec: InputSpec, name: str, default_size: int,
                   default_preset: str) -> Datasets:
    """Builds the streams of a folder dataset (also used by `digits`)."""
    import tensorflow as tf

    from preprocessing import image_ops, pipeline

    size = spec.image_size or default_size
    preset = default_preset if spec.preset == "auto" else spec.preset
    train, labels = list_split(root, "train")
    counter = pipeline.DecodeCounter()

    def records_of(pairs):
        mine = pairs[spec.process_index::spec.num_processes]
        paths = tf.constant([p for p, _ in mine])
        ids = tf.constant([label for _, label in mine], tf.int64)
        return pipeline.read_files(tf.data.Dataset.from_tensor_slices((paths, ids))), len(mine)

    train_records, train_mine = records_of(train)
    train_ds = pipeline.train_stream(
        train_records, train_mine, image_ops.train_transform(preset, size, spec.dtype),
        spec.batch_size, spec.seed, counter)
    val_ds, val_batches, val_count = None, 0, 0
    if spec.with_validation:
        validation, _ = list_split(root, "validation", labels)
        val_count = len(validation)
        # Every process runs the same number of batches: size them for the largest shard.
        largest = -(-val_count // spec.num_processes)
        val_records, _ = records_of(validation)
        val_ds, val_batches = pipeline.eval_stream(
            val_records, largest, image_ops.eval_transform(preset, size, spec.dtype),
            spec.batch_size, size, spec.dtype, counter)
    return Datasets(name=name, train=train_ds, validation=val_ds, num_classes=len(labels),
                    image_size=size, train_examples=len(train),
                    validation_examples=val_count, validation_batches=val_batches,
                    skipped_images=counter.skipped)
