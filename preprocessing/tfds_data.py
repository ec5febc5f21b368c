"""TFDS datasets: `--dataset=imagenet2012` and `--dataset=tfds:NAME[:VERSION]`.

ImageNet 2012 is prepared offline by TFDS's own `imagenet2012` builder from the two
tars of the manual download (ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar) in
--manual_dir, into --data_dir, once; later runs reuse it. Other TFDS datasets must be
prepared in --data_dir already, unless --download lets TFDS fetch them.

Images are read encoded (SkipDecoding) and decoded by the app's own pipeline, so
every dataset takes the same decode and augmentation path.
"""

from __future__ import annotations

import glob
import json
import os

from preprocessing import DataError, Datasets, InputSpec

IMAGENET = "imagenet2012"
IMAGENET_TARS = ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar")
SMALL_IMAGES = 64  # datasets with images up to this size default to the "small" preset


def _name_version(dataset: str) -> tuple[str, str | None]:
    if dataset == IMAGENET:
        return IMAGENET, None
    name, _, version = dataset[len("tfds:"):].partition(":")
    return name, version or None


def _prepared_info(data_dir: str, name: str, version: str | None) -> dict | None:
    """dataset_info.json of the prepared version (the newest if none asked), or None.

    Read straight from the files: building a TFDS builder here could write.
    """
    pattern = os.path.join(data_dir, *name.split("/"), version or "*", "dataset_info.json")
    found = sorted(glob.glob(pattern), key=lambda p: [int(x) for x in
                                                       p.split(os.sep)[-2].split(".")
                                                       if x.isdigit()])
    if not found:
        return None
    with open(found[-1]) as f:
        info = json.load(f)
    features = os.path.join(os.path.dirname(found[-1]), "features.json")
    if os.path.exists(features):
        with open(features) as f:
            info["features"] = json.load(f)
    return info


def _splits(info: dict) -> dict:
    return {s["name"]: sum(int(n) for n in s.get("shardLengths", [])) or int(
        s.get("numExamples", 0)) for s in info.get("splits", [])}


def _check_prepared(dataset: str, info: dict, spec: InputSpec) -> None:
    splits = _splits(info)
    if "train" not in splits:
        raise DataError(f"--dataset={dataset} has no 'train' split (it has "
                        f"{', '.join(sorted(splits)) or 'none'})")
    if spec.with_validation and not ({"validation", "test"} & set(splits)):
        raise DataError(f"--dataset={dataset} has neither a 'validation' nor a 'test' split; "
                        "pass --validation_steps=-1 to train without validation")
    features = json.dumps(info.get("features", {}))  # features.json, next to the info
    if "ClassLabel" not in features or "image_feature.Image" not in features:
        raise DataError(f"--dataset={dataset} is not an image-classification dataset "
                        "(no Image and ClassLabel features)")


def check(dataset: str, spec: InputSpec) -> None:
    """Prepared already, or preparable offline: else one line naming what is missing."""
    name, version = _name_version(dataset)
    info = _prepared_info(spec.data_dir, name, version)
    if info is not None:
        _check_prepared(dataset, info, spec)
        return
    if dataset == IMAGENET:
        needed = IMAGENET_TARS if spec.with_validation else IMAGENET_TARS[:1]
        missing = [t for t in needed if not os.path.isfile(os.path.join(spec.manual_dir, t))]
        if missing:
            raise DataError(
                f"ImageNet 2012 is not prepared in {spec.data_dir} and {spec.manual_dir} lacks "
                f"{' and '.join(missing)}; put the manual download there (--manual_dir), "
                "e.g. ILSVRC2012_img_train.tar holding one nXXXXXXXX.tar per class")
        return
    if not spec.download:
        where = os.path.join(spec.data_dir, name, version or "<version>")
        raise DataError(f"--dataset={dataset} is not prepared in {spec.data_dir} (no "
                        f"{where}/dataset_info.json); prepare it with `tfds build {name} "
                        f"--data_dir={spec.data_dir}`, or pass --download")
    import tensorflow_datasets as tfds

    try:
        tfds.builder_cls(name)
    except Exception:
        raise DataError(f"--dataset={dataset}: TFDS has no dataset called {name!r}")


def _prepare(dataset: str, builder, spec: InputSpec) -> None:
    import tensorflow_datasets as tfds

    if dataset == IMAGENET:
        print(f"preparing ImageNet 2012 from {spec.manual_dir} into {spec.data_dir} "
              "(once; later runs reuse it)", flush=True)
        config = tfds.download.DownloadConfig(manual_dir=spec.manual_dir)
    else:
        print(f"downloading and preparing {dataset} into {spec.data_dir}", flush=True)
        config = None
    try:
        builder.download_and_prepare(download_config=config)
    except Exception as error:  # TFDS raises many kinds; the user needs the first line
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise DataError(f"--dataset={dataset}: preparing it failed: "
                        f"{type(error).__name__}: {text}")


def make(dataset: str, spec: InputSpec) -> Datasets:
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from preprocessing import image_ops, pipeline

    name, version = _name_version(dataset)
    builder = tfds.builder(f"{name}:{version}" if version else name, data_dir=spec.data_dir)
    if _prepared_info(spec.data_dir, name, version) is None:
        _prepare(dataset, builder, spec)
        builder = tfds.builder(f"{name}:{version}" if version else name,
                               data_dir=spec.data_dir)
    info = builder.info
    image_key, label_key = info.supervised_keys or ("image", "label")
    num_classes = info.features[label_key].num_classes
    shape = info.features[image_key].shape
    fixed = shape[0] if shape and shape[0] else None
    size = spec.image_size or (fixed if fixed and fixed <= SMALL_IMAGES else 224)
    preset = spec.preset if spec.preset != "auto" else (
        "small" if fixed and fixed <= SMALL_IMAGES else "standard")
    counter = pipeline.DecodeCounter()
    read_config = tfds.ReadConfig(shuffle_seed=spec.seed, interleave_cycle_length=16,
                                  num_parallel_calls_for_interleave_files=tf.data.AUTOTUNE,
                                  try_autocache=False)

    def records(split, shuffle):
        mine = tfds.even_splits(split, n=spec.num_processes)[spec.process_index]
        ds = builder.as_dataset(split=mine, shuffle_files=shuffle, read_config=read_config,
                                decoders={image_key: tfds.decode.SkipDecoding()})
        return ds.map(lambda e: (e[image_key], e[label_key])), info.splits[mine].num_examples

    train, train_mine = records("train", True)
    train_ds = pipeline.train_stream(train, train_mine,
                                     image_ops.train_transform(preset, size, spec.dtype),
                                     spec.batch_size, spec.seed, counter)
    val_ds, val_batches, val_count = None, 0, 0
    if spec.with_validation:
        split = "validation" if "validation" in info.splits else "test"
        val_count = info.splits[split].num_examples
        largest = -(-val_count // spec.num_processes)
        val_records, _ = records(split, False)
        val_ds, val_batches = pipeline.eval_stream(
            val_records, largest, image_ops.eval_transform(preset, size, spec.dtype),
            spec.batch_size, size, spec.dtype, counter)
    return Datasets(name=name, train=train_ds, validation=val_ds, num_classes=num_classes,
                    image_size=size, train_examples=info.splits["train"].num_examples,
                    validation_examples=val_count, validation_batches=val_batches,
                    skipped_images=counter.skipped)
