"""`--dataset=folder:PATH`: images in PATH/train/<label>/ and PATH/validation/<label>/.

Labels are the sorted names of the class folders under train/. Files ending in .jpg,
.jpeg, .png (any case) are read; the format is detected from the bytes, not the name.
With --preprocessing=auto the images' sizes choose the preset (see `make`).

The door (what the listing lets in, `scan_split`):
- a class folder is a visible directory holding at least one usable image: hidden
  ones (`.ipynb_checkpoints`) and empty ones are skipped and named, in one `note:` line
  when the dataset is checked; a label folder that links back to its split folder or
  above it (`train/c3 -> .`) is refused; training needs at least 2 classes;
- a file is used only if it is a regular file of bounded size (files.unreadable_why: a
  FIFO, a link to /dev/zero, a 50 GB file are never opened) with a UTF-8 name;
- what is skipped is counted with the images that do not decode (summary.json's
  corrupt_images_skipped) and its first names are given (`Datasets.skipped_names`).
"""

from __future__ import annotations

import dataclasses
import os
import sys

from preprocessing.datasets import fingerprint
from preprocessing.files import is_utf8, shown, stat_or_why
from preprocessing.spec import SKIPPED_NAMES_KEPT, DataError, Datasets, InputSpec, first_names

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
LAYOUT = "PATH/train/<label>/*.jpg|png and PATH/validation/<label>/*.jpg|png"
DEFAULT_IMAGE_SIZE = 224
SIZE_SAMPLE = 64  # training files whose headers --preprocessing=auto reads
MIN_CLASSES = 2


@dataclasses.dataclass
class Split:
    """One split as the door lets it in."""

    records: list  # (path, label index), sorted by label then name
    labels: list  # the class names (train's, for validation)
    skipped_folders: list  # "train/<name> (why)": folders that are not classes
    skipped_files: list  # "train/<label>/<name> (why)": files never opened
    # {"train/<label>": digest of its files' names, sizes and times}: the fingerprint's
    # parts (fingerprint.py), from the stats the listing makes anyway
    digests: dict = dataclasses.field(default_factory=dict)


def _entries(folder: str) -> list:
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda entry: entry.name)


def _images_in(folder: str, shown_as: str, skipped: list) -> tuple[list[str], str]:
    """The usable image files of one class folder, and their fingerprint part
    (fingerprint.folder_part); the others are added to `skipped`.

    Raises:
        OSError: the folder cannot be listed.
    """
    kept, facts = [], []
    for entry in _entries(folder):
        if not entry.name.lower().endswith(IMAGE_EXTENSIONS):
            continue
        info, why = (None, "name not UTF-8") if not is_utf8(entry.name) else \
            stat_or_why(entry.path)
        if why:
            skipped.append(f"{shown_as}/{shown(entry.name)} ({why})")
        else:
            kept.append(entry.path)
            facts.append((entry.name, info.st_size, info.st_mtime_ns))
    return kept, fingerprint.folder_part(facts)


def _links_back(path: str, folder: str) -> bool:
    """Whether directory `path` resolves to `folder` or to a folder above it."""
    target, real = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([target, real]) == target


def scan_split(root: str, split: str, labels: list[str] | None = None) -> Split:
    """What root/split holds, as the door lets it in (see the module's docstring).

    Args:
        labels: train's class names when listing validation; None for train.

    Raises:
        DataError: the split folder is missing or its path not UTF-8, a label folder
            links back to it, it
            holds no usable images, train has fewer than MIN_CLASSES classes, or
            validation has a class that train lacks.
    """
    folder = os.path.join(root, split)
    if not is_utf8(folder):
        raise DataError(f"{shown(folder)}: the path is not UTF-8 text, which the input "
                        "pipelines need; rename it (or link to it from a UTF-8 path)")
    if not os.path.isdir(folder):
        raise DataError(f"{folder} is missing; expected {LAYOUT}")
    skipped_folders, skipped_files, found, digests = [], [], {}, {}
    try:
        entries = _entries(folder)
    except OSError as error:
        raise DataError(f"{folder} cannot be listed ({error.strerror}); expected {LAYOUT}") \
            from None
    for entry in entries:
        if not entry.is_dir():  # follows links; files beside the classes are not read
            continue
        name = f"{split}/{shown(entry.name)}"
        if entry.name.startswith("."):
            skipped_folders.append(f"{name} (hidden)")
        elif not is_utf8(entry.name):
            skipped_folders.append(f"{name} (name not UTF-8)")
        elif _links_back(entry.path, folder):
            raise DataError(f"{entry.path} links back to {os.path.realpath(entry.path)}, a loop; "
                            f"a label folder must hold images; expected {LAYOUT}")
        else:
            try:
                images, digest = _images_in(entry.path, name, skipped_files)
            except OSError as error:  # no permission to list it
                skipped_folders.append(f"{name} (cannot be listed: {error.strerror})")
                continue
            if images:
                found[entry.name] = images
                digests[name] = digest
            else:
                skipped_folders.append(f"{name} (no usable .jpg/.jpeg/.png files)")
    if not found:
        what = "has no label folders" if not skipped_folders else \
            "holds no .jpg/.jpeg/.png files that can be read in a label folder"
        raise DataError(f"{folder} {what}{_aside(skipped_folders)}; expected {LAYOUT}")
    if labels is None:
        labels = sorted(found)
        if len(labels) < MIN_CLASSES:
            raise DataError(f"{folder} has one class folder ({shown(labels[0])}); a classifier "
                            f"needs at least {MIN_CLASSES}{_aside(skipped_folders)}; "
                            f"expected {LAYOUT}")
    unknown = sorted(set(found) - set(labels))
    if unknown:
        raise DataError(f"{folder} has label folder(s) {', '.join(unknown[:3])} that "
                        f"{os.path.join(root, 'train')} lacks; expected {LAYOUT}")
    index = {label: i for i, label in enumerate(labels)}
    records = [(path, index[label]) for label in sorted(found) for path in found[label]]
    return Split(records, labels, skipped_folders, skipped_files, digests)


def _aside(skipped_folders: list) -> str:
    return f" (not classes: {first_names(skipped_folders)})" if skipped_folders else ""


def list_split(root: str, split: str, labels: list[str] | None = None):
    """[(path, label index)] of root/split, and the label names (see `scan_split`)."""
    listed = scan_split(root, split, labels)
    return listed.records, listed.labels


# The last listing, kept from the check for the build that follows it in the same
# process: listing costs an os.stat a file (ImageNet: 1.28 million). Reused only while
# no listed folder has changed (their modification times).
_last_listing: dict = {}


def _folders_state(root: str, splits: list[Split]) -> tuple:
    folders = {os.path.join(root, name) for name in ("train", "validation")[:len(splits)]}
    folders |= {os.path.dirname(path) for split in splits for path, _ in split.records}
    try:
        return tuple(sorted((f, os.stat(f).st_mtime_ns) for f in folders))
    except OSError:
        return ()


def _splits(root: str, with_validation: bool) -> list[Split]:
    """train's listing, and validation's where asked, as the door lets them in."""
    key = (os.path.abspath(root), with_validation)
    kept = _last_listing.get(key)
    if kept and _folders_state(root, kept[1]) == kept[0]:
        return kept[1]
    train = scan_split(root, "train")
    splits = [train] + ([scan_split(root, "validation", train.labels)] if with_validation
                        else [])
    _last_listing.clear()
    _last_listing[key] = (_folders_state(root, splits), splits)
    return splits


def check_root(root: str, with_validation: bool) -> int:
    """The layout holds decodable images; returns the training split's file count. What
    the door skipped is said in one `note:` line on stderr."""
    if not os.path.isdir(root):
        raise DataError(f"{root} is not a folder; expected {LAYOUT}")
    splits = _splits(root, with_validation)
    train = splits[0].records
    if first_decodable(path for path, _ in train) is None:
        raise DataError(f"{os.path.join(root, 'train')}: none of its {len(train)} image "
                        "files can be read and decoded; nothing to train on")
    folders = [name for s in splits for name in s.skipped_folders]
    files = [name for s in splits for name in s.skipped_files]
    if folders or files:
        parts = ([f"{len(folders)} folder(s) that are not classes: {first_names(folders)}"]
                 if folders else []) + ([f"{len(files)} file(s) never opened: "
                                         f"{first_names(files)}"] if files else [])
        print(f"note: {root}: skipped {'; '.join(parts)}", file=sys.stderr, flush=True)
    return len(train)


def check(dataset: str, spec: InputSpec) -> int:
    from preprocessing import streams

    count = check_root(dataset[len("folder:"):], spec.with_validation)
    streams.check(spec)
    return count


def median_side(root: str, train: list | None = None) -> int | None:
    """The median shorter side in pixels of up to SIZE_SAMPLE training images spread
    over the sorted list (only their headers are read), or None if none is readable.

    Args:
        train: root/train's records, where the caller has listed them already.
    """
    from preprocessing.host.images import pillow

    Image = pillow()  # (told not to warn of large images: the decoders refuse them)
    paths = [path for path, _ in (train or list_split(root, "train")[0])]
    sides = []
    for path in paths[::max(1, len(paths) // SIZE_SAMPLE)][:SIZE_SAMPLE]:
        try:
            with Image.open(path) as image:  # lazy: the pixels are not decoded
                sides.append(min(image.size))
        except Exception:  # noqa: BLE001 - corrupt or a bomb (Pillow raises many types):
            continue  # the pipeline skips and counts it later
    return sorted(sides)[len(sides) // 2] if sides else None


def _defaults(root: str, spec: InputSpec, splits: list[Split]) -> tuple[int, str]:
    """(image side, preset) where the flags leave them to the data: as a TFDS dataset
    of small images does, a folder whose images are small (augment.SMALL_IMAGE_SIDE)
    takes the `small` preset at their own size, others `standard` at 224."""
    from preprocessing.augment import SMALL_IMAGE_SIDE

    side = median_side(root, splits[0].records) if spec.preset == "auto" or \
        not spec.image_size else None
    small = side is not None and side <= SMALL_IMAGE_SIDE
    default_preset = ("small" if small else "standard") if spec.preset == "auto" \
        else spec.preset
    default_size = max(side, 8) if small else DEFAULT_IMAGE_SIZE  # 8: --image_size's least
    return default_size, default_preset


def known_shape(dataset: str, spec: InputSpec) -> tuple[int, int]:
    """(classes, image side) as make() will find them (the listing is the check's)."""
    root = dataset[len("folder:"):]
    splits = _splits(root, spec.with_validation)
    return len(splits[0].labels), spec.image_size or _defaults(root, spec, splits)[0]


def make(dataset: str, spec: InputSpec) -> Datasets:
    """The folder's streams, at the size and preset of `_defaults` where unset."""
    root = dataset[len("folder:"):]
    splits = _splits(root, spec.with_validation)  # listed once (a stat a file)
    default_size, default_preset = _defaults(root, spec, splits)
    return make_from_root(root, spec, default_size, default_preset, splits)


def make_from_root(root: str, spec: InputSpec, default_size: int,
                   default_preset: str, splits: list | None = None) -> Datasets:
    """Builds the streams of a folder dataset (also used by `digits`); `splits`: the
    splits as `_splits` listed them, where the caller has."""
    from preprocessing import streams

    splits = splits or _splits(root, spec.with_validation)
    train, labels = splits[0].records, splits[0].labels
    validation = splits[1].records if spec.with_validation else None
    refused = [name for s in splits for name in s.skipped_files]  # never opened
    unusable = []  # validation images set aside whole, as none decodes
    if validation and first_decodable(path for path, _ in validation) is None:
        sys.stderr.write(f"warning: {os.path.join(root, 'validation')}: none of its "
                         f"{len(validation)} image files decodes; top-1 is not measured\n")
        unusable = [path for path, _ in validation]
        validation = None
    data = streams.make(train, validation, spec,
                        preset=default_preset if spec.preset == "auto" else spec.preset,
                        image_size=spec.image_size or default_size, num_classes=len(labels))
    data.fingerprint = fingerprint.of_parts(
        "files", {name: digest for split in splits for name, digest in split.digests.items()})
    data.source = root
    counted, named = data.skipped_images, data.skipped_names
    data.skipped_images = lambda: (counted() if counted else 0) + len(refused) + len(unusable)
    data.skipped_names = lambda: (refused + [
        shown(os.path.relpath(path, root)) for path in ((named() if named else []) + unusable)[
            :SKIPPED_NAMES_KEPT]])[:SKIPPED_NAMES_KEPT]
    return data


# ---- does a split hold an image that decodes? (asked before training, in one line)
# The input streams skip corrupt images, so over a split where none decodes the first
# batch would never come. Decoding is the tf.data pipeline's own where TensorFlow is
# loaded already, otherwise the host decoder grain uses, so that the JAX path never
# imports TensorFlow. The split's files are decoded in order until one works.

def decodes(path: str) -> bool:
    """Whether the file at `path` can be read and decoded as the pipeline decodes it."""
    if "tensorflow" in sys.modules:
        from preprocessing.tfdata.images import decodes_file
    else:
        from preprocessing.host.images import decodes_file
    return decodes_file(path)


def first_decodable(paths) -> str | None:
    """The first of `paths` that decodes, or None."""
    return next((path for path in paths if decodes(path)), None)
