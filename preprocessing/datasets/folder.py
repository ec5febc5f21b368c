"""`--dataset=folder:PATH`: images in PATH/train/<label>/ and PATH/validation/<label>/.

Labels are the sorted folder names under train/. Files ending in .jpg, .jpeg, .png
(any case) are read; the format is detected from the bytes, not the name. With
--preprocessing=auto the images' sizes choose the preset (see `make`).
"""

from __future__ import annotations

import os
import sys

from preprocessing.spec import DataError, Datasets, InputSpec
from preprocessing.streams import first_decodable

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
LAYOUT = "PATH/train/<label>/*.jpg|png and PATH/validation/<label>/*.jpg|png"
DEFAULT_IMAGE_SIZE = 224
SIZE_SAMPLE = 64  # training files whose headers --preprocessing=auto reads


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


def check_root(root: str, with_validation: bool) -> int:
    """The layout holds decodable images; returns the training split's file count."""
    if not os.path.isdir(root):
        raise DataError(f"{root} is not a folder; expected {LAYOUT}")
    train, labels = list_split(root, "train")
    if with_validation:
        list_split(root, "validation", labels)
    if first_decodable(path for path, _ in train) is None:
        raise DataError(f"{os.path.join(root, 'train')}: none of its {len(train)} image "
                        "files can be read and decoded; nothing to train on")
    return len(train)


def check(dataset: str, spec: InputSpec) -> int:
    from preprocessing import streams

    count = check_root(dataset[len("folder:"):], spec.with_validation)
    streams.check(spec)
    return count


def median_side(root: str) -> int | None:
    """The median shorter side in pixels of up to SIZE_SAMPLE training images spread
    over the sorted list (only their headers are read), or None if none is readable."""
    from PIL import Image

    paths = [path for path, _ in list_split(root, "train")[0]]
    sides = []
    for path in paths[::max(1, len(paths) // SIZE_SAMPLE)][:SIZE_SAMPLE]:
        if not os.path.isfile(path):  # a FIFO or a device would block the open
            continue
        try:
            with Image.open(path) as image:  # lazy: the pixels are not decoded
                sides.append(min(image.size))
        except OSError:  # a corrupt file: the pipeline skips and counts it later
            continue
    return sorted(sides)[len(sides) // 2] if sides else None


def make(dataset: str, spec: InputSpec) -> Datasets:
    """As a TFDS dataset of small images does: a folder whose images are small
    (augment.SMALL_IMAGE_SIDE) defaults to the `small` preset at their own size,
    others to `standard` at 224."""
    from preprocessing.augment import SMALL_IMAGE_SIDE

    root = dataset[len("folder:"):]
    side = median_side(root) if spec.preset == "auto" or not spec.image_size else None
    small = side is not None and side <= SMALL_IMAGE_SIDE
    default_preset = ("small" if small else "standard") if spec.preset == "auto" \
        else spec.preset
    default_size = max(side, 8) if small else DEFAULT_IMAGE_SIZE  # 8: --image_size's least
    return make_from_root(root, spec, default_size, default_preset)


def make_from_root(root: str, spec: InputSpec, default_size: int,
                   default_preset: str) -> Datasets:
    """Builds the streams of a folder dataset (also used by `digits`)."""
    from preprocessing import streams

    train, labels = list_split(root, "train")
    validation = list_split(root, "validation", labels)[0] if spec.with_validation else None
    unusable = 0  # validation images set aside whole, as none decodes
    if validation and first_decodable(path for path, _ in validation) is None:
        sys.stderr.write(f"warning: {os.path.join(root, 'validation')}: none of its "
                         f"{len(validation)} image files decodes; top-1 is not measured\n")
        validation, unusable = None, len(validation)
    data = streams.make(train, validation, spec,
                        preset=default_preset if spec.preset == "auto" else spec.preset,
                        image_size=spec.image_size or default_size, num_classes=len(labels))
    if unusable:
        counted = data.skipped_images
        data.skipped_images = lambda: (counted() if counted else 0) + unusable
    return data
