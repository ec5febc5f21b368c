"""A TFDS dataset prepared, or preparable: its folder and metadata as its files say
(dataset_info.json, features.json: read straight from the files, since building a
TFDS builder could write and needs TensorFlow), its splits and formats, the checks
that it is an image-classification dataset whose shards are all there, what
preparing it needs (ImageNet's tars, a name TFDS knows), and the command that
prepares it. tfds_data.py, which prepares and reads the dataset, asks here first.
"""

from __future__ import annotations

import glob
import json
import os
import re

from preprocessing.datasets.tfds_records import ARRAY_RECORD
from preprocessing.spec import DataError, InputSpec

IMAGENET = "imagenet2012"
IMAGENET_TARS = ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar")
TFRECORD = "tfrecord"
TFDS_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"  # TFDS's shard file names


def name_version(dataset: str) -> tuple[str, str | None]:
    if dataset == IMAGENET:
        return IMAGENET, None
    name, _, version = dataset[len("tfds:"):].partition(":")
    return name, version or None


def prepared(data_dir: str, name: str, version: str | None) -> tuple[str, dict] | None:
    """(folder, dataset_info.json + features.json) of the prepared version (the newest
    if none asked), or None.

    Read straight from the files: building a TFDS builder here could write, and
    needs no TensorFlow this way.
    """
    pattern = os.path.join(data_dir, *name.split("/"), version or "*", "dataset_info.json")
    found = [p for p in glob.glob(pattern)
             if re.fullmatch(r"\d+\.\d+\.\d+", os.path.basename(os.path.dirname(p)))]
    found.sort(key=lambda p: [int(x) for x in os.path.basename(os.path.dirname(p)).split(".")])
    if not found:
        return None
    features = os.path.join(os.path.dirname(found[-1]), "features.json")
    try:
        with open(found[-1]) as f:
            info = json.load(f)
        if os.path.exists(features):
            with open(features) as f:
                info["features"] = json.load(f)
    except (OSError, ValueError, TypeError) as error:  # torn or hand-edited metadata
        raise DataError(f"{os.path.dirname(found[-1])}: its dataset metadata cannot be read "
                        f"({error}); prepare the dataset again")
    return os.path.dirname(found[-1]), info


def prepared_info(data_dir: str, name: str, version: str | None) -> dict | None:
    found = prepared(data_dir, name, version)
    return found and found[1]


def formats(info: dict) -> set[str]:
    """The file formats the prepared dataset is stored in (TFRecord if unsaid)."""
    return {info.get("fileFormat") or TFRECORD, *info.get("alternativeFileFormats", [])}


def splits(info: dict) -> dict:
    return {s["name"]: sum(int(n) for n in s.get("shardLengths", [])) or int(
        s.get("numExamples", 0)) for s in info.get("splits", [])}


def check_prepared(dataset: str, info: dict, spec: InputSpec) -> None:
    found = splits(info)
    if "train" not in found:
        raise DataError(f"--dataset={dataset} has no 'train' split (it has "
                        f"{', '.join(sorted(found)) or 'none'})")
    if spec.with_validation and not ({"validation", "test"} & set(found)):
        raise DataError(f"--dataset={dataset} has neither a 'validation' nor a 'test' split; "
                        "pass --validation_steps=-1 to train without validation")
    features = json.dumps(info.get("features", {}))  # features.json, next to the info
    if "ClassLabel" not in features or "image_feature.Image" not in features:
        raise DataError(f"--dataset={dataset} is not an image-classification dataset "
                        "(no Image and ClassLabel features)")


def check_shards(dataset: str, folder: str, info: dict, spec: InputSpec) -> None:
    """Every ArrayRecord shard of the splits a run reads is there (a partial copy is
    caught here, not as images skipped one by one)."""
    wanted = {"train"}
    if spec.with_validation:
        wanted.add("validation" if "validation" in splits(info) else "test")
    for split in info.get("splits", []):
        if split["name"] not in wanted:
            continue
        expected = len(split.get("shardLengths", [])) or 1
        names = {"DATASET": info.get("name", "*"), "SPLIT": split["name"],
                 "FILEFORMAT": ARRAY_RECORD}  # anything else (the shard's place): "*"
        pattern = re.sub(r"\{(\w+)\}", lambda m: glob.escape(names.get(m[1], "")) or "*",
                         split.get("filepathTemplate") or TFDS_TEMPLATE)
        found = glob.glob(os.path.join(glob.escape(folder), pattern))
        if len(found) != expected:
            raise DataError(f"--dataset={dataset}: {folder} holds {len(found)} of the "
                            f"{expected} ArrayRecord shards of split {split['name']!r}; "
                            "copy the whole dataset folder again")


def prepare_command(dataset: str, spec: InputSpec) -> str:
    """The command that prepares `dataset` for grain/gpu on a machine with TensorFlow."""
    words = ["python -m preprocessing.datasets.tfds_data", f"--dataset={dataset}",
             f"--data_dir={spec.data_dir}"]
    if dataset == IMAGENET:
        words.append(f"--manual_dir={spec.manual_dir}")
    elif spec.download:
        words.append("--download")
    return " ".join(words)


def check_tars(spec: InputSpec) -> None:
    needed = IMAGENET_TARS if spec.with_validation else IMAGENET_TARS[:1]
    missing = [t for t in needed if not os.path.isfile(os.path.join(spec.manual_dir, t))]
    if missing:
        raise DataError(
            f"ImageNet 2012 is not prepared in {spec.data_dir} and {spec.manual_dir} lacks "
            f"{' and '.join(missing)}; put the manual download there (--manual_dir), "
            "e.g. ILSVRC2012_img_train.tar holding one nXXXXXXXX.tar per class")


def check_known(dataset: str, name: str) -> None:
    import tensorflow_datasets as tfds

    try:
        tfds.builder_cls(name)
    except Exception:
        raise DataError(f"--dataset={dataset}: TFDS has no dataset called {name!r}")
