"""`--dataset=fashion_mnist`: Zalando's Fashion-MNIST, from its four IDX files.

60,000 training and 10,000 test images (the test set is the validation split), 28x28
grayscale, 10 classes of clothing. The files are those of Debian's package
`dataset-fashion-mnist` (`apt-get install dataset-fashion-mnist` puts them under
/usr/share/datasets/fashion-mnist/), or the same four files, gzipped or not, in
--data_dir or --data_dir/fashion_mnist/. Nothing is downloaded. (TFDS's own builder
rejects Debian's files on their checksum: their gzip headers lack the file name; the
pixels are the same.)

The pixels are read once into memory and handed to the input pipelines as they are
(no encode, no decode): the `device` pipeline holds them in accelerator memory
(47 MB for the training set), tf.data and grain augment them on the CPU. The
default preset is `small` at 28 pixels, as for any dataset of small images.
"""

from __future__ import annotations

import gzip
import os
import threading

import numpy as np

from preprocessing.spec import DataError, Datasets, InputSpec, Pixels

DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "validation": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
IMAGE_SIZE = 28
NUM_CLASSES = 10
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot")
_IDX_TYPES = {0x08: np.uint8}


def _folders(spec: InputSpec) -> list[str]:
    folders = [spec.data_dir, os.path.join(spec.data_dir, "fashion_mnist")] if spec.data_dir else []
    return folders + [DEBIAN_DIR]


def _find(name: str, spec: InputSpec) -> str | None:
    for folder in _folders(spec):
        for candidate in (name + ".gz", name):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
    return None


def _paths(spec: InputSpec) -> dict[str, tuple[str, str]]:
    """The image and label file of each split.

    Raises:
        DataError: naming the files looked for, the folders, and the package.
    """
    found, missing = {}, []
    for split, names in FILES.items():
        paths = tuple(_find(name, spec) for name in names)
        missing += [name for name, path in zip(names, paths) if path is None]
        found[split] = paths
    if missing:
        raise DataError(f"Fashion-MNIST's {', '.join(missing)}(.gz) not found in "
                        f"{' or '.join(_folders(spec))}; install Debian's package "
                        "(apt-get install dataset-fashion-mnist) or put the four IDX files "
                        "in --data_dir")
    return found


def read_idx(path: str) -> np.ndarray:
    """The array in an IDX file (gzipped or not): big-endian dims, then uint8 data.

    Raises:
        DataError: for a file that is not a whole IDX file of uint8.
    """
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as error:  # gzip raises BadGzipFile (OSError), EOFError
        raise DataError(f"{path} cannot be read: {error}") from None
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] not in _IDX_TYPES:
        raise DataError(f"{path} is not an IDX file of unsigned bytes")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    start = 4 + 4 * dims
    if len(data) - start != int(np.prod(shape)):
        raise DataError(f"{path} holds {len(data) - start:,} bytes of data where its header "
                        f"promises {int(np.prod(shape)):,} ({'x'.join(map(str, shape))})")
    return np.frombuffer(data, _IDX_TYPES[data[2]], offset=start).reshape(shape)


# Files being read ahead (`read_ahead`): path -> [thread, its array or DataError].
_AHEAD: dict[str, list] = {}


def read_ahead(dataset: str, spec: InputSpec) -> None:
    """Starts reading the four files in a thread, for `load` to find: gunzipping them
    (0.7 s on a 2-core host) releases Python's lock, so it runs while the frameworks
    import (app/run/context.py, cut data_read_beside_imports). Files that are not
    there are left to `load` to name."""
    try:
        paths = [path for pair in _paths(spec).values() for path in pair]
    except DataError:
        return

    def read(path, entry):
        try:
            entry.append(read_idx(path))
        except DataError as error:
            entry.append(error)

    for path in paths:
        if path not in _AHEAD:
            entry = []
            thread = threading.Thread(target=read, args=(path, entry), daemon=True,
                                      name="read-fashion-mnist")
            _AHEAD[path] = [thread, entry]
            thread.start()


def _read(path: str) -> np.ndarray:
    """read_idx(path), or what `read_ahead` read of it (taken once: a later run of the
    process reads the file again, as it may have changed)."""
    ahead = _AHEAD.pop(path, None)
    if ahead is None:
        return read_idx(path)
    thread, entry = ahead
    thread.join()
    if isinstance(entry[0], DataError):
        raise entry[0]
    return entry[0]


def load(spec: InputSpec, split: str) -> Pixels:
    images_path, labels_path = _paths(spec)[split]
    images, labels = _read(images_path), _read(labels_path)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(f"{images_path} and {labels_path} do not pair up: images "
                        f"{images.shape}, labels {labels.shape}")
    if labels.max(initial=0) >= NUM_CLASSES:
        raise DataError(f"{labels_path} has label {int(labels.max())}; Fashion-MNIST has "
                        f"{NUM_CLASSES} classes")
    return Pixels(images, labels.astype(np.int32))


def check(dataset: str, spec: InputSpec) -> int | None:
    """The four files are there; returns the training images' count (their header's),
    or None where the header cannot be read (make() then says what is wrong)."""
    from preprocessing import streams

    images_path = _paths(spec)["train"][0]
    streams.check(spec)
    return _count(images_path)


def _count(path: str) -> int | None:
    """The first dimension of an IDX file, from its first 8 bytes."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.read(8)
    except (OSError, EOFError):
        return None
    return int.from_bytes(head[4:8], "big") if len(head) == 8 and head[3] >= 1 else None


def known_shape(dataset: str, spec: InputSpec) -> tuple[int, int]:
    return NUM_CLASSES, spec.image_size or IMAGE_SIZE


def make(dataset: str, spec: InputSpec) -> Datasets:
    from preprocessing import streams

    from preprocessing.datasets import fingerprint

    paths = _paths(spec)
    train = load(spec, "train")
    validation = load(spec, "validation") if spec.with_validation else None
    preset = "small" if spec.preset == "auto" else spec.preset
    # The IDX files as read, identified by their content (they are small).
    arrays = {name: array for split, pixels in (("train", train), ("validation", validation))
              if pixels is not None
              for name, array in zip(FILES[split], (pixels.images, pixels.labels))}
    data = streams.make(train, validation, spec, preset=preset,
                        image_size=spec.image_size or IMAGE_SIZE, num_classes=NUM_CLASSES)
    data.fingerprint = fingerprint.of_arrays(arrays)
    read = [path for split, pair in paths.items() for path in pair
            if split == "train" or validation is not None]
    folders = sorted({os.path.dirname(path) for path in read})
    data.source = folders[0] if len(folders) == 1 else ", ".join(read)
    if os.path.realpath(folders[0]) == os.path.realpath(DEBIAN_DIR):
        data.source += " (Debian's dataset-fashion-mnist)"
    return data
