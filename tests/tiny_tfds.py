"""The tiny TFDS dataset of tests/tfds_builders/tiny_shapes: its name and its builder
(tests/preprocessing/datasets/test_tfds_data.py, test_fingerprint.py)."""

import os
import sys

from conftest import ROOT

TINY = "tfds:tiny_shapes:1.0.0"


def tiny_builder(data_dir, **kwargs):
    sys.path.insert(0, os.path.join(ROOT, "tests", "tfds_builders"))
    try:
        from tiny_shapes import tiny_shapes_dataset_builder
    finally:
        sys.path.pop(0)
    return tiny_shapes_dataset_builder.Builder(data_dir=str(data_dir), **kwargs)
