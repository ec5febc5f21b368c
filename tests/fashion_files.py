"""A small Fashion-MNIST in the real IDX format, and where Debian's dataset-fashion-mnist
puts the real one (tests/preprocessing/datasets/test_fashion_mnist.py,
tests/app/engine/test_autotune.py)."""

import gzip
import os

import numpy as np

DEBIAN = "/usr/share/datasets/fashion-mnist"


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape)
    return header + np.ascontiguousarray(array, np.uint8).tobytes()


def write_fashion(folder, train=96, test=32, gzipped=True):
    """A small Fashion-MNIST of the real format: two classes told apart by brightness."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, count in (("train", train), ("t10k", test)):
        labels = np.arange(count) % 10
        images = (rng.integers(0, 60, (count, 28, 28)) + 19 * labels[:, None, None]).astype(np.uint8)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            name = os.path.join(folder, f"{prefix}-{kind}-ubyte")
            data = _idx(array)
            if gzipped:
                with gzip.open(name + ".gz", "wb") as f:
                    f.write(data)
            else:
                with open(name, "wb") as f:
                    f.write(data)
