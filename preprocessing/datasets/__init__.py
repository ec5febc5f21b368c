"""The `--dataset` builders and their registry: one module per kind of dataset.

- `synthetic.py`: random images made on the device;
- `digits.py`: scikit-learn's 1,797 real handwritten digits, written once as PNG files;
- `fashion_mnist.py`: Zalando's 70,000 clothes, from their IDX files;
- `folder.py`: PATH/train/<label>/*.jpg;
- `tfds_data.py`: a prepared TFDS dataset, and ImageNet 2012 from its manual download;
  `tfds_prepared.py`: what a prepared one's files say; `tfds_records.py`: random access
  to a prepared split without TensorFlow (for grain);
- `fingerprint.py`: what identifies a dataset's content, so that a run resumes only on
  the data it began on.

Each has `check(dataset, spec)` (fails fast, writes nothing) and `make(dataset, spec)
-> Datasets`. The real-image builders hand their records to preprocessing/streams.py,
which picks the input pipeline. This module imports no framework: each function
imports the builder it needs.
"""

from __future__ import annotations

from preprocessing.spec import DataError, Datasets, InputSpec


def _module_for(dataset: str):
    if dataset == "synthetic":
        from preprocessing.datasets import synthetic as module
    elif dataset == "digits":
        from preprocessing.datasets import digits as module
    elif dataset == "fashion_mnist":
        from preprocessing.datasets import fashion_mnist as module
    elif dataset.startswith("folder:"):
        from preprocessing.datasets import folder as module
    elif dataset == "imagenet2012" or dataset.startswith("tfds:"):
        from preprocessing.datasets import tfds_data as module
    else:
        raise DataError(f"unknown dataset {dataset!r}")
    return module


def check_dataset(dataset: str, spec: InputSpec) -> int | None:
    """Fails fast, before any file is written, if `dataset` cannot be read; returns
    the number of training images where the check learned it (None elsewhere).

    Raises:
        DataError: naming the path and the layout expected.
    """
    return _module_for(dataset).check(dataset, spec)


def known_shape(dataset: str, spec: InputSpec) -> tuple[int, int] | None:
    """(classes, image side) the data will have, as far as its check knows before it
    is built (what a user's model is built for at the door); None where it does not
    (a TFDS dataset: its builder gives them)."""
    known = getattr(_module_for(dataset), "known_shape", None)
    return known(dataset, spec) if known else None


def make_datasets(dataset: str, spec: InputSpec) -> Datasets:
    """Builds the training and validation streams of `dataset` (a --dataset value)."""
    return _module_for(dataset).make(dataset, spec)


def read_ahead(dataset: str, spec: InputSpec) -> None:
    """Starts reading `dataset`'s files in a thread where its builder can (Fashion-MNIST's
    IDX files), for `make_datasets` to find: call it once `check_dataset` has passed."""
    ahead = getattr(_module_for(dataset), "read_ahead", None)
    if ahead is not None:
        ahead(dataset, spec)
