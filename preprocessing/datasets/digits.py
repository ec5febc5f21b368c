"""`--dataset=digits`: the 1,797 real handwritten digits that ship with scikit-learn.

They are written once as 8x8 grayscale PNG files in the folder layout, under
<data_dir>/digits/{train,validation}/<digit>/, and from then on read back like
any folder dataset: the same decode and augmentation path real images take. The
split is fixed (the same 360 images are always held out), so runs compare.
Nothing is downloaded: scikit-learn carries the data in its wheel.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from preprocessing.datasets import fingerprint, folder
from preprocessing.files import writable_ancestor
from preprocessing.spec import DataError, Datasets, InputSpec

FOLDER_NAME = "digits"
TOTAL_IMAGES = 1797  # scikit-learn's load_digits
VALIDATION_IMAGES = 360
SPLIT_SEED = 0
DEFAULT_IMAGE_SIZE = 16


def root(data_dir: str) -> str:
    return os.path.join(data_dir, FOLDER_NAME)


def check(dataset: str, spec: InputSpec) -> int:
    """The files exist, or data_dir can hold them; returns the training images' count."""
    from preprocessing import streams

    streams.check(spec)
    if not os.path.isdir(os.path.join(root(spec.data_dir), "train")) and \
            writable_ancestor(spec.data_dir) is None:
        raise DataError(f"--data_dir={spec.data_dir} cannot be created or written; the "
                        "digits are written there once as PNG files")
    return TOTAL_IMAGES - VALIDATION_IMAGES


def write_pngs(target: str) -> None:
    """Writes the digits as PNG files under `target` (atomically: all or nothing)."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.RandomState(SPLIT_SEED).permutation(len(digits.target))
    held_out = set(order[:VALIDATION_IMAGES].tolist())
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".digits-", dir=parent)
    try:
        for index, (pixels, label) in enumerate(zip(digits.images, digits.target)):
            split = "validation" if index in held_out else "train"
            folder_path = os.path.join(staging, split, str(label))
            os.makedirs(folder_path, exist_ok=True)
            # Pixel values are 0..16; spread them over 0..255.
            image = np.clip(pixels * 16, 0, 255).astype(np.uint8)[:, :, None]
            Image.fromarray(image[:, :, 0], mode="L").save(
                os.path.join(folder_path, f"{index:04d}.png"))
        os.replace(staging, target)  # another process may have won the race: fine
    except OSError:
        if not os.path.isdir(os.path.join(target, "train")):
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def known_shape(dataset: str, spec: InputSpec) -> tuple[int, int]:
    """Ten digits, at --image_size or 16 (the files may not be written yet)."""
    return 10, spec.image_size or DEFAULT_IMAGE_SIZE


def make(dataset: str, spec: InputSpec) -> Datasets:
    target = root(spec.data_dir)
    if not os.path.isdir(os.path.join(target, "train")):
        try:
            write_pngs(target)
        except OSError as error:
            raise DataError(f"cannot write the digits under {target}: {error.strerror}")
    data = folder.make_from_root(target, spec, DEFAULT_IMAGE_SIZE, "small")
    # The digits are made, not gathered: what makes them identifies them (the PNG
    # files' times would change with each data_dir they are written to).
    data.fingerprint = fingerprint.of_parameters(
        dataset="digits", source="sklearn.datasets.load_digits", images=TOTAL_IMAGES,
        validation_images=VALIDATION_IMAGES, split_seed=SPLIT_SEED)
    return data
