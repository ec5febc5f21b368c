"""Does a split hold an image that decodes? Asked before training, answered in one line.

The input streams skip corrupt images, so over a split where none decodes, the
first batch would never come. The folder builder asks here first: the split's
files are decoded in order until one works (one file for a healthy split; each
file once only for a broken one).

Decoding is the pipeline's own where TensorFlow is already loaded (the tf.data
pipeline decodes with it); otherwise the host decoder grain uses (host_ops.py),
so that the JAX path never imports TensorFlow.
"""

from __future__ import annotations

import os
import sys


def decodes(path: str) -> bool:
    """Whether the file at `path` can be read and decoded as the pipeline decodes it."""
    if not os.path.isfile(path):  # a FIFO or a device: reading it could block forever
        return False
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        from preprocessing.image_ops import decode

        try:
            decode(tf.io.read_file(path))
        except tf.errors.OpError:
            return False
        return True
    from preprocessing import host_ops

    try:
        with open(path, "rb") as f:
            host_ops.decode(f.read())
    except (OSError, ValueError):  # host_ops.UndecodableImage is a ValueError
        return False
    return True


def first_decodable(paths) -> str | None:
    """The first of `paths` that decodes, or None."""
    return next((path for path in paths if decodes(path)), None)
