"""TFDS datasets: `--dataset=imagenet2012` and `--dataset=tfds:NAME[:VERSION]`.

ImageNet 2012 is prepared offline by TFDS's own `imagenet2012` builder from the two
tars of the manual download (ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar) in
--manual_dir, into --data_dir, once; later runs reuse it. Other TFDS datasets must be
prepared in --data_dir already, unless --download lets TFDS fetch them.

Two ways to read a prepared dataset, by the input pipeline (streams.choose):
- tf.data (the TensorFlow backend): TFDS's `as_dataset` over its TFRecord files.
- grain or gpu (JAX; no TensorFlow needed): TFDS's random-access `as_data_source`
  over its ArrayRecord files. Each record becomes a (getter, label) pair for
  streams.make: the getter is a small picklable object (the split's reader and an
  index) that returns the encoded image bytes when called, so no image is read
  until a pipeline asks for it, and only this process's shard is ever touched.
  The labels of a split are read once and kept beside the dataset
  (`app-labels-<split>.npz`), since reading them means reading every record.
  (grain only, for now: see GPU_READS_CALLABLES.)

Preparing needs TensorFlow (TFDS encodes the images with it); reading ArrayRecord
does not. So a grain/gpu run prepares as ArrayRecord where TensorFlow is installed,
adds ArrayRecord files beside a TFRecord-only dataset there, and elsewhere (e.g. a GPU
host) says, in one line, which command to run on a machine with TensorFlow:
`python -m preprocessing.datasets.tfds_data --dataset=... --data_dir=...` (see main()).

Images are always read encoded (SkipDecoding, or the raw bytes of the image feature)
and decoded by the app's own pipeline, so every dataset takes the same decode and
augmentation path. What a prepared dataset's files say (its metadata, splits, formats
and shards) and the command that prepares one: tfds_prepared.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from preprocessing.augment import SMALL_IMAGE_SIDE
from preprocessing.datasets import tfds_prepared
from preprocessing.datasets.tfds_prepared import IMAGENET, TFRECORD
from preprocessing.datasets.tfds_records import (
    ARRAY_RECORD,
    Records,
    SplitReader,
    labels_of,
)
from preprocessing.spec import BatchShape, DataError, Datasets, InputSpec

# gpu.stream.GpuJpegStream reads its records by path (str(path), then open), and a
# TFDS record is a callable. Until it calls callables, grain feeds TFDS datasets:
# --input_pipeline=auto picks grain for them, and --input_pipeline=gpu is refused in
# one line. Set True once GpuJpegStream reads `path() if callable(path)`.
GPU_READS_CALLABLES = False




def _reads_tfrecord(spec: InputSpec) -> bool:
    """True when tf.data feeds the run (it reads TFRecord files through TensorFlow).

    The preset only decides between grain and gpu, so any preset tells this apart.
    """
    from preprocessing import streams

    return streams.choose(spec, "standard") == "tf.data"


_TENSORFLOW: list[bool] = []


def _tensorflow_importable() -> bool:
    """Whether `import tensorflow` works here (tried once; asked only where the next
    step needs TensorFlow anyway, so the import is not wasted)."""
    if not _TENSORFLOW:
        try:
            import tensorflow  # noqa: F401
            _TENSORFLOW.append(True)
        except Exception:  # ImportError, or a broken install
            _TENSORFLOW.append(False)
    return _TENSORFLOW[0]


def check(dataset: str, spec: InputSpec) -> None:
    """Prepared already, or preparable here: else one line naming what is missing.

    Writes nothing, and imports TensorFlow only where the run would need it (to
    prepare or convert the dataset), to learn whether it can.
    """
    from preprocessing import streams

    streams.check(spec)
    if _reads_tfrecord(spec):
        _check_for_tf_data(dataset, spec)
    else:
        _check_for_random_access(dataset, spec)


def _check_for_tf_data(dataset: str, spec: InputSpec) -> None:
    name, version = tfds_prepared.name_version(dataset)
    found = tfds_prepared.prepared(spec.data_dir, name, version)
    if found is not None:
        tfds_prepared.check_prepared(dataset, found[1], spec)
        if TFRECORD not in tfds_prepared.formats(found[1]):
            raise DataError(
                f"--dataset={dataset} is prepared in {found[0]} as ArrayRecord only, which "
                "the tf.data input pipeline cannot read; use --backend=jax "
                "--input_pipeline=grain, or prepare it as TFRecord into another --data_dir")
        return
    if dataset == IMAGENET:
        tfds_prepared.check_tars(spec)
        return
    if not spec.download:
        where = os.path.join(spec.data_dir, name, version or "<version>")
        raise DataError(f"--dataset={dataset} is not prepared in {spec.data_dir} (no "
                        f"{where}/dataset_info.json); prepare it with `tfds build {name} "
                        f"--data_dir={spec.data_dir}`, or pass --download")
    tfds_prepared.check_known(dataset, name)


def _check_for_random_access(dataset: str, spec: InputSpec) -> None:
    """A grain/gpu run: ArrayRecord files to read, or TensorFlow here to make them."""
    import importlib.util

    if spec.input_pipeline == "gpu" and not GPU_READS_CALLABLES:
        raise DataError(f"--dataset={dataset}: the gpu input pipeline reads image files by "
                        "path, not records of TFDS's ArrayRecord files yet; use "
                        "--input_pipeline=grain (or auto)")
    for module, package in (("tensorflow_datasets", "tensorflow-datasets"),
                            ("array_record", "array-record")):
        if importlib.util.find_spec(module) is None:
            raise DataError(f"--dataset={dataset} on the grain/gpu input pipelines reads "
                            f"TFDS's ArrayRecord files through `{package}`: pip install "
                            f"{package} (see BUILD.md)")
    name, version = tfds_prepared.name_version(dataset)
    found = tfds_prepared.prepared(spec.data_dir, name, version)
    command = tfds_prepared.prepare_command(dataset, spec)
    elsewhere = (f"on a machine with TensorFlow run `{command}`, then copy {spec.data_dir} "
                 "here")
    if found is not None:
        folder, info = found
        tfds_prepared.check_prepared(dataset, info, spec)
        if ARRAY_RECORD in tfds_prepared.formats(info):
            tfds_prepared.check_shards(dataset, folder, info, spec)
        elif not _tensorflow_importable():
            raise DataError(
                f"--dataset={dataset} is prepared in {folder} as TFRecord only, which the "
                "grain/gpu input pipelines cannot read (they read ArrayRecord, without "
                f"TensorFlow; TensorFlow is not installed here): {elsewhere} (it adds "
                "ArrayRecord files beside the TFRecord ones)")
        elif not os.access(folder, os.W_OK | os.X_OK):
            raise DataError(
                f"--dataset={dataset} is prepared in {folder} as TFRecord only, and the "
                "grain/gpu input pipelines read ArrayRecord files, which cannot be added "
                f"there (not writable); run `{command}` as a user who may write there")
        return
    if dataset == IMAGENET:
        if not _tensorflow_importable():
            raise DataError(f"ImageNet 2012 is not prepared in {spec.data_dir}, and preparing "
                            f"it needs TensorFlow, which is not installed here: {elsewhere}")
        tfds_prepared.check_tars(spec)
        return
    if not spec.download:
        where = os.path.join(spec.data_dir, name, version or "<version>")
        raise DataError(f"--dataset={dataset} is not prepared in {spec.data_dir} (no "
                        f"{where}/dataset_info.json); prepare it as ArrayRecord: "
                        f"`{command} --download` on a machine with TensorFlow, or pass "
                        "--download here if TensorFlow is installed")
    if not _tensorflow_importable():
        raise DataError(f"--dataset={dataset} is not prepared in {spec.data_dir}, and "
                        f"preparing it needs TensorFlow, which is not installed here: "
                        f"{elsewhere}")
    tfds_prepared.check_known(dataset, name)


def _prepare(dataset: str, builder, spec: InputSpec, file_format: str | None = None) -> None:
    import tensorflow_datasets as tfds

    as_what = f" as {file_format}" if file_format else ""
    if dataset == IMAGENET:
        print(f"preparing ImageNet 2012 from {spec.manual_dir} into {spec.data_dir}{as_what} "
              "(once; later runs reuse it)", flush=True)
        config = tfds.download.DownloadConfig(manual_dir=spec.manual_dir)
    else:
        print(f"downloading and preparing {dataset} into {spec.data_dir}{as_what}", flush=True)
        config = None
    try:
        builder.download_and_prepare(download_config=config, file_format=file_format)
    except Exception as error:  # TFDS raises many kinds; the user needs the first line
        raise DataError(f"--dataset={dataset}: preparing it failed: {_first_line(error)}")


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}"


def make(dataset: str, spec: InputSpec) -> Datasets:
    tf_data = _reads_tfrecord(spec)
    data = _make_tf_data(dataset, spec) if tf_data else _make_random_access(dataset, spec)
    data.fingerprint = _fingerprint(dataset, spec, TFRECORD if tf_data else ARRAY_RECORD)
    name, version = tfds_prepared.name_version(dataset)
    data.source = (tfds_prepared.prepared(spec.data_dir, name, version) or (spec.data_dir,))[0]
    return data


def _fingerprint(dataset: str, spec: InputSpec, file_format: str) -> dict:
    """The prepared dataset's identity (fingerprint.of_tfds), from its folder's files:
    the record files of the format read, so that adding ArrayRecord files beside the
    TFRecord ones changes nothing a tf.data run read."""
    from preprocessing.datasets import fingerprint

    name, version = tfds_prepared.name_version(dataset)
    folder, info = tfds_prepared.prepared(spec.data_dir, name, version)
    return fingerprint.of_tfds(name, str(info.get("version")), tfds_prepared.splits(info), folder,
                               file_format)


def _make_tf_data(dataset: str, spec: InputSpec) -> Datasets:
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from preprocessing.tfdata import images as tf_images
    from preprocessing.tfdata import pipeline as tf_pipeline

    name, version = tfds_prepared.name_version(dataset)
    builder = tfds.builder(f"{name}:{version}" if version else name, data_dir=spec.data_dir)
    if tfds_prepared.prepared_info(spec.data_dir, name, version) is None:
        _prepare(dataset, builder, spec)
        builder = tfds.builder(f"{name}:{version}" if version else name,
                               data_dir=spec.data_dir)
    info = builder.info
    image_key, label_key = info.supervised_keys or ("image", "label")
    num_classes = info.features[label_key].num_classes
    size, preset = _size_and_preset(info.features[image_key].shape, spec)
    counter = tf_pipeline.DecodeCounter()
    read_config = tfds.ReadConfig(shuffle_seed=spec.seed, interleave_cycle_length=16,
                                  num_parallel_calls_for_interleave_files=tf.data.AUTOTUNE,
                                  try_autocache=False)

    def records(split, shuffle):
        mine = tfds.even_splits(split, n=spec.num_processes)[spec.process_index]
        ds = builder.as_dataset(split=mine, shuffle_files=shuffle, read_config=read_config,
                                decoders={image_key: tfds.decode.SkipDecoding()})
        return ds.map(lambda e: (e[image_key], e[label_key])), info.splits[mine].num_examples

    train, train_mine = records("train", True)
    train_ds = tf_pipeline.train_stream(train, train_mine,
                                     tf_images.train_transform(preset, size, spec.dtype),
                                     spec.batch_size, spec.seed, counter)
    val_ds, val_batches, val_count = None, 0, 0
    if spec.with_validation:
        split = "validation" if "validation" in info.splits else "test"
        val_count = info.splits[split].num_examples
        largest = spec.batch.largest_shard(val_count)
        val_records, _ = records(split, False)
        val_ds, val_batches = tf_pipeline.eval_stream(
            val_records, largest, tf_images.eval_transform(preset, size, spec.dtype),
            spec.batch_size, size, spec.dtype, counter)
    return Datasets(train=train_ds, validation=val_ds, num_classes=num_classes,
                    image_size=size, train_examples=info.splits["train"].num_examples,
                    validation_examples=val_count, validation_batches=val_batches,
                    skipped_images=counter.skipped, input_pipeline="tf.data", preset=preset)


def _size_and_preset(shape, spec: InputSpec) -> tuple[int, str]:
    fixed = shape[0] if shape and shape[0] else None
    size = spec.image_size or (fixed if fixed and fixed <= SMALL_IMAGE_SIDE else 224)
    preset = spec.preset if spec.preset != "auto" else (
        "small" if fixed and fixed <= SMALL_IMAGE_SIDE else "standard")
    return size, preset


# ---- grain / gpu: random access to ArrayRecord files, without TensorFlow -------------

def prepare_array_record(dataset: str, spec: InputSpec):
    """The TFDS builder of `dataset` with ArrayRecord files to read.

    Prepares the dataset as ArrayRecord if it is not prepared, or adds ArrayRecord
    files beside its TFRecord files; both need TensorFlow (check() has made sure).
    """
    import tensorflow_datasets as tfds

    name, version = tfds_prepared.name_version(dataset)
    found = tfds_prepared.prepared(spec.data_dir, name, version)
    if found is None:
        _prepare(dataset, tfds.builder(f"{name}:{version}" if version else name,
                                       data_dir=spec.data_dir), spec, ARRAY_RECORD)
        found = tfds_prepared.prepared(spec.data_dir, name, version)
    elif ARRAY_RECORD not in tfds_prepared.formats(found[1]):
        try:
            _add_array_record(dataset, found[0])
        except DataError:
            raise
        except Exception as error:  # a full disk, a truncated TFRecord file, ...
            raise DataError(f"--dataset={dataset}: adding ArrayRecord files to {found[0]} "
                            f"failed: {_first_line(error)}")
    return tfds.builder(f"{name}:{found[1]['version']}", data_dir=spec.data_dir)


def _add_array_record(dataset: str, folder: str) -> None:
    """Writes an ArrayRecord copy of every TFRecord shard beside it, then lists the
    format in dataset_info.json (what `tfds convert_format` does; that command needs
    apache_beam in TFDS 4.9.10, even when told not to use it)."""
    import tensorflow as tf
    from tensorflow_datasets.core import dataset_info as info_lib
    from tensorflow_datasets.core import file_adapters
    from tensorflow_datasets.core.utils import py_utils

    print(f"adding ArrayRecord files beside the TFRecord files of {dataset} in {folder} "
          "(once; as much disk again), for the grain/gpu input pipelines", flush=True)
    proto = info_lib.read_proto_from_builder_dir(folder)
    splits = info_lib.get_split_dict_from_proto(
        dataset_info_proto=proto, data_dir=folder, file_format=TFRECORD)
    writer = file_adapters.ADAPTER_FOR_FORMAT[file_adapters.FileFormat.ARRAY_RECORD]
    for split in splits.values():
        count = len(split.shard_lengths)
        source = split.filename_template
        target = source.replace(filetype_suffix=ARRAY_RECORD)
        for shard in range(count):
            out = target.sharded_filepath(shard_index=shard, num_shards=count)
            if out.exists():
                continue  # converted by an earlier, interrupted run
            path = source.sharded_filepath(shard_index=shard, num_shards=count)
            # One shard at a time in memory (TFDS keeps shards small: ImageNet's ~140 MB).
            records = [r.numpy() for r in tf.data.TFRecordDataset(os.fspath(path))]
            if len(records) != int(split.shard_lengths[shard]):
                raise DataError(f"--dataset={dataset}: {path.name} holds {len(records)} "
                                f"records, but the dataset lists {split.shard_lengths[shard]}")
            with py_utils.incomplete_file(out) as partial:
                writer.write_examples(partial, enumerate(records))
    if ARRAY_RECORD not in proto.alternative_file_formats:
        proto.alternative_file_formats.append(ARRAY_RECORD)
        info_lib.write_dataset_info_proto(proto, dataset_info_dir=folder)


def _make_random_access(dataset: str, spec: InputSpec) -> Datasets:
    from preprocessing import streams

    if not GPU_READS_CALLABLES and streams.choose(spec, "standard") == "gpu":
        spec = dataclasses.replace(spec, input_pipeline="grain")  # see GPU_READS_CALLABLES
    builder = prepare_array_record(dataset, spec)
    info = builder.info
    image_key, label_key = info.supervised_keys or ("image", "label")
    size, preset = _size_and_preset(info.features[image_key].shape, spec)

    def records(split):
        reader = SplitReader(builder, split, image_key, label_key)
        return Records(reader, labels_of(dataset, reader))

    validation = None
    if spec.with_validation:
        validation = records("validation" if "validation" in info.splits else "test")
    return streams.make(records("train"), validation, spec, preset=preset, image_size=size,
                        num_classes=info.features[label_key].num_classes)


def main(argv: list[str] | None = None) -> int:
    """`python -m preprocessing.datasets.tfds_data --dataset=... --data_dir=...`: prepares a TFDS
    dataset for the grain/gpu input pipelines, on a machine with TensorFlow: as
    ArrayRecord (or ArrayRecord files added beside TFRecord ones), with the labels
    index. Copy --data_dir to the hosts that train; they need no TensorFlow."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m preprocessing.datasets.tfds_data",
                                     description=main.__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="imagenet2012 or tfds:NAME[:VERSION]")
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--manual_dir", default="", help="where ImageNet's tars are")
    parser.add_argument("--download", action="store_true", help="let TFDS download it")
    args = parser.parse_args(argv)
    spec = InputSpec(data_dir=args.data_dir, image_size=0, batch=BatchShape(1), backend="jax",
                     input_pipeline="grain", manual_dir=args.manual_dir,
                     download=args.download)
    try:
        if args.dataset != IMAGENET and not args.dataset.startswith("tfds:"):
            raise DataError(f"--dataset={args.dataset}: expected imagenet2012 or "
                            "tfds:NAME[:VERSION]")
        _check_for_random_access(args.dataset, spec)
        builder = prepare_array_record(args.dataset, spec)
        image_key, label_key = builder.info.supervised_keys or ("image", "label")
        for split in builder.info.splits:
            labels_of(args.dataset, SplitReader(builder, split, image_key, label_key))
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.dataset} is ready in {args.data_dir} for --input_pipeline=grain/gpu; "
          "copy that folder to the hosts that train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
