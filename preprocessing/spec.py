"""The contract of preprocessing/: what a dataset builder is given and what it returns.

Every `--dataset` builder (preprocessing/datasets/) takes an `InputSpec` (plain
values, never the Config) and returns `Datasets`: the training and validation
streams `fit` reads, with the facts the run records about them. `DataError` is
every data mistake, in one line.
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


def num_batches(examples: int, batch_size: int) -> int:
    """Batches needed to see `examples` once with a padded last batch."""
    return -(-examples // batch_size)
