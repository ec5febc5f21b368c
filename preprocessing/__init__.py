"""Input pipelines: every dataset builder takes an `InputSpec` and returns `Datasets`.

Builders (one module each): `synthetic` (random images made on the device; no
TensorFlow on JAX), `digits` (scikit-learn's 1,797 real handwritten digits written
once as PNG files), `folder` (PATH/train/<label>/*.jpg), `tfds_data` (a prepared TFDS
dataset, and ImageNet 2012 from its manual download). The real-image builders hand
their records to `streams.py`, which picks one of three pipelines with one meaning
of every augmentation (`augment.py`): tf.data (`pipeline.py` + `image_ops.py`),
grain (`grain_pipeline.py` + `host_ops.py`, no TensorFlow) or the GPU
(`gpu_pipeline.py`, JPEGs decoded by nvImageCodec).

This module imports no framework: `make_datasets` imports the builder it needs.
"""

from __future__ import annotations

import dataclasses


class DataError(ValueError):
    """A dataset is missing, misnamed or malformed; the message is one line."""


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What a builder needs to know, as plain values (never the Config)."""

    data_dir: str
    image_size: int  # 0 = the dataset's default
    batch_size: int  # per process (global batch / processes)
    num_processes: int = 1
    process_index: int = 0
    seed: int | None = None
    preset: str = "auto"  # auto, standard, heavy or small (see image_ops.PRESETS)
    with_validation: bool = True
    backend: str = "tensorflow"
    manual_dir: str = ""
    download: bool = False
    dtype: str = "float32"  # dtype of the images handed to the model
    input_pipeline: str = "auto"  # auto, tf.data, grain or gpu (see streams.py)
    accelerator: str = "cpu"


@dataclasses.dataclass
class Datasets:
    """The training and validation streams of one dataset.

    `train` repeats forever and yields (images, labels) batches of `batch_size`.
    `validation` (or None) yields every validation image of this process exactly
    once as (images, labels, weights) batches; the last batch is padded to full
    size with weight-0 images, so the static shapes suit TPUs and top-1 counts
    every image and nothing else.
    """

    train: object
    validation: object | None
    num_classes: int
    image_size: int
    train_examples: int  # over all processes
    validation_examples: int  # over all processes
    validation_batches: int  # per process, padding included
    skipped_images: object = None  # callable -> count of corrupt images skipped
    input_pipeline: str = "none"  # which pipeline feeds it: tf.data, grain, gpu or none
    preset: str = "none"  # the augmentation preset chosen (image_ops.PRESETS)
    input_state: object = None  # fn(batches served) -> JSON state, where resumable
    restore_input: object = None  # fn(state) -> None: continue from a saved state
    input_wait_seconds: object = None  # fn() -> seconds fit waited for training batches


def _module_for(dataset: str):
    if dataset == "synthetic":
        from preprocessing import synthetic as module
    elif dataset == "digits":
        from preprocessing import digits as module
    elif dataset.startswith("folder:"):
        from preprocessing import folder as module
    elif dataset == "imagenet2012" or dataset.startswith("tfds:"):
        from preprocessing import tfds_data as module
    else:
        raise DataError(f"unknown dataset {dataset!r}")
    return module


def check_dataset(dataset: str, spec: InputSpec) -> None:
    """Fails fast, before any file is written, if `dataset` cannot be read.

    Raises:
        DataError: naming the path and the layout expected.
    """
    _module_for(dataset).check(dataset, spec)


def make_datasets(dataset: str, spec: InputSpec) -> Datasets:
    """Builds the training and validation streams of `dataset` (a --dataset value)."""
    return _module_for(dataset).make(dataset, spec)


def num_batches(examples: int, batch_size: int) -> int:
    """Batches needed to see `examples` once with a padded last batch."""
    return -(-examples // batch_size)
