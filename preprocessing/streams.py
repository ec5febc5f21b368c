"""From a dataset's records to the streams `fit` reads: one of four pipelines.

Every real-image builder (folder, digits, fashion_mnist, TFDS) hands its training and
validation records here, as (path or bytes, label) pairs or as decoded `Pixels`, with
the preset and image size it chose. This module picks the pipeline and builds both
streams with it:

- `device`: the dataset decoded once and held where the model trains, shuffled and
  augmented there in one compiled step a batch (device/; on TensorFlow, tf.data with
  the decoded images cached);
- `tf.data`: TensorFlow ops on CPU threads (tfdata/pipeline.py, tfdata/images.py);
- `grain`: no TensorFlow; decoding in CPU worker processes (host/grain_stream.py,
  host/images.py), with a checkpointable iterator (exact mid-epoch resume);
- `gpu`: no TensorFlow; planning processes read bytes and draw crops, the GPU's JPEG
  engines decode and one compiled step crops, resizes, flips and normalizes the batch
  there (gpu/), also checkpointable.

`auto` (`pick`): device when the decoded dataset fits DEVICE_MEMORY_SHARE of the free
memory it would live in; else tf.data on TensorFlow; on JAX, gpu for JPEG files with
the standard preset on GPUs where nvImageCodec and nvJPEG are installed, else grain
(`choose`, with the measurement behind it). Every pipeline implements the same
augmentation (augment.py holds its definition), so a run's figures do not depend on
which one fed it.
"""

from __future__ import annotations

import dataclasses
import importlib.util

from preprocessing.spec import DataError, Datasets, InputSpec, Pixels


def nvimgcodec_installed() -> bool:
    try:
        return importlib.util.find_spec("nvidia.nvimgcodec") is not None
    except (ImportError, ValueError):
        return False


def choose(spec: InputSpec, preset: str, jpeg_files: bool = False) -> str:
    """The pipeline that `spec.input_pipeline` means for a dataset of `preset`.

    `auto` is tf.data on TensorFlow. On JAX it is gpu where the gpu pipeline serves
    best: GPUs, JPEG files (`jpeg_files`: records are paths of .jpg/.jpeg files), the
    standard preset, nvImageCodec installed; else grain. Measured on one H200 with 16
    cores, ResNet-50 at batch 256, in one call (2026-12-01-h200-nvjpeg.json at 35cc76c):
    synthetic data 7,418 img/s, gpu 6,813 (its first epoch 6,404), grain
    6,042 in its second epoch and 394 in its first (the workers starting). (On a
    32-core host grain kept up with one H200: 2026-11-30-h200-real-data.json.)
    """
    if spec.input_pipeline != "auto":
        return spec.input_pipeline
    if (spec.backend == "jax" and spec.accelerator == "gpu" and jpeg_files
            and preset == "standard" and nvimgcodec_installed()):
        return "gpu"
    return host_pipeline(spec.backend)


def host_pipeline(backend: str, wanted: str = "auto") -> str:
    """A pipeline decoding on the host's CPUs: `wanted` if it is one, else auto's where
    the data is not on the device nor JPEGs on a GPU (the ladder's plain start)."""
    return (wanted if wanted in ("tf.data", "grain") else
            "grain" if backend == "jax" else "tf.data")


def jpeg_paths(records) -> bool:
    """True if the records are (path, label) pairs of .jpg/.jpeg files (a sample)."""
    if isinstance(records, Pixels):
        return False
    sample = records[:64]
    return bool(sample) and all(isinstance(path, str) and
                                path.lower().endswith((".jpg", ".jpeg")) for path, _ in sample)


GRAIN_SMALL_WORKERS_FROM = 20_000  # small images: worker processes from this many on
DEVICE_PRESETS = ("small", "standard")
# The share of the free memory of each local device (or, for tf.data's cache, of the
# host) that a dataset decoded for the device pipeline may take; the rest is the
# model's. Said in the run's output when `auto` weighs it.
DEVICE_MEMORY_SHARE = 0.4


def pick(spec: InputSpec, preset: str, train, validation) -> tuple[str, str | None]:
    """The pipeline for these records, and a line to print when `auto` fell back.

    `auto` picks `device` when the decoded dataset (this process's shard, both
    splits) fits in DEVICE_MEMORY_SHARE of the free memory it would live in, and
    otherwise what `choose` says. A dataset whose decoded size cannot be known
    beforehand (TFDS records, bytes) is left to `choose` unless `device` is asked for.

    Raises:
        DataError: --input_pipeline=device for a preset it does not implement, or a
            dataset that does not fit its share of memory.
    """
    wanted = spec.input_pipeline
    fallback = lambda: choose(dataclasses.replace(spec, input_pipeline="auto") if wanted ==  # noqa: E731
                              "device" else spec, preset, jpeg_paths(train))
    if wanted not in ("auto", "device"):
        return wanted, None
    if preset not in DEVICE_PRESETS:
        if wanted == "device":
            raise DataError(f"--input_pipeline=device implements the {' and '.join(DEVICE_PRESETS)} "
                            f"presets; --preprocessing={preset} needs grain or tf.data")
        return fallback(), None
    from preprocessing.device import memory

    needed = sum(memory.decoded_bytes(_shard(split, spec)) for split in (train, validation)
                 if split)
    if needed == 0:  # unknown until decoded
        return ("device", None) if wanted == "device" else (fallback(), None)
    free, where = memory.free_bytes(spec.backend, spec.accelerator)
    if free is None or needed <= DEVICE_MEMORY_SHARE * free:
        return "device", None
    over = (f"the decoded dataset ({needed / 2**30:,.2f} GiB) exceeds "
            f"{DEVICE_MEMORY_SHARE:.0%} of the {free / 2**30:,.1f} GiB free in {where}")
    if wanted == "device":
        raise DataError(f"--input_pipeline=device: {over}; use --input_pipeline=auto (or "
                        "grain, tf.data, gpu) for this dataset")
    choice = fallback()
    return choice, f"note: {over}; input_pipeline={choice}"


def check(spec: InputSpec) -> None:
    """Fails fast if the pipeline asked for cannot be imported here.

    Raises:
        DataError: naming what to install.
    """
    wanted = spec.input_pipeline
    if wanted == "grain" or (wanted == "auto" and spec.backend == "jax"):
        if importlib.util.find_spec("grain") is None:
            raise DataError("the grain input pipeline needs the `grain` package: "
                            "pip install grain (see BUILD.md)")
    if wanted == "gpu" and not nvimgcodec_installed():
        raise DataError("--input_pipeline=gpu needs nvImageCodec: pip install "
                        "nvidia-nvimgcodec-cu13 nvidia-nvjpeg (or the -cu12 wheels); see BUILD.md")
    if wanted == "tf.data" and spec.backend == "jax":  # (the TF backend has imported it)
        try:
            import tensorflow  # noqa: F401  (it will be needed in a moment anyway)
        except ImportError:
            raise DataError("--input_pipeline=tf.data needs TensorFlow, which is not "
                            "installed here; use --input_pipeline=grain (or gpu) with "
                            "--backend=jax") from None


def make(train_records, validation_records, spec: InputSpec, *,
         preset: str, image_size: int, num_classes: int) -> Datasets:
    """The training and validation streams of this process from all records.

    Args:
        train_records: every (path or bytes, label) of the training split, or its
            decoded `Pixels`.
        validation_records: the same for validation, or None (no validation).
        spec: the builders' plain inputs (batch, shard, seed, dtype, pipeline).
        preset: standard, heavy or small (augment.PRESETS).
        image_size: side of the images handed to the model.
        num_classes: labels are 0..num_classes-1.
    """
    validation_records = validation_records if spec.with_validation else None
    validation_records = _validation_sample(validation_records, spec)
    pipeline, note = pick(spec, preset, train_records, validation_records)
    if note:
        print(note, flush=True)
    build = {"tf.data": _tf_data, "grain": _grain, "gpu": _gpu, "device": _device}[pipeline]
    # Every process runs the same number of evaluation batches: size them for the
    # largest shard (the others pad with weight-0 images).
    largest = spec.batch.largest_shard(len(validation_records)) if validation_records else 0
    data = build(_shard(train_records, spec), validation_records and _shard(
        validation_records, spec), spec, preset, image_size, largest)
    data.num_classes, data.image_size = num_classes, image_size
    data.train_examples = len(train_records)
    data.validation_examples = len(validation_records or [])
    data.input_pipeline, data.preset = pipeline, preset
    return data


def _shard(records, spec):
    if isinstance(records, Pixels):
        return records.shard(spec.process_index, spec.num_processes)
    return records[spec.process_index::spec.num_processes]


VALIDATION_SAMPLE_SEED = 0  # the same images for every run and seed, so runs compare


def _validation_sample(records, spec: InputSpec):
    """--validation_steps=N: a fixed, uniform sample of N batches' worth of images
    (every image when the split holds fewer). The split's file order is often sorted
    by class: its first N batches would be a few classes only."""
    if not records or spec.validation_steps <= 0:
        return records
    wanted = spec.validation_steps * spec.batch.global_size
    if wanted >= len(records):
        return records
    import numpy as np

    chosen = np.sort(np.random.default_rng(VALIDATION_SAMPLE_SEED).choice(
        len(records), wanted, replace=False))
    if isinstance(records, Pixels):
        return Pixels(records.images[chosen], records.labels[chosen])
    return [records[i] for i in chosen]


def _batches(examples: int, batch_size: int) -> int:
    return max(1, -(-examples // batch_size))


def _empty() -> Datasets:
    return Datasets(train=None, validation=None, num_classes=0, image_size=0,
                    train_examples=0, validation_examples=0, validation_batches=0)


def _tf_data(train, validation, spec, preset, size, largest, decode_once=False) -> Datasets:
    """tf.data; with `decode_once` (the device pipeline on TensorFlow) every image is
    decoded once into tf.data's cache, and augmented from there every epoch."""
    from preprocessing.tfdata import images as tf_images
    from preprocessing.tfdata import pipeline as tf_pipeline

    counter = tf_pipeline.DecodeCounter()
    pixels = decode_once or isinstance(train, Pixels)

    def records_of(split):
        if isinstance(split, Pixels):
            return tf_pipeline.pixel_records(split.images, split.labels)
        records = tf_pipeline.read_files([p for p, _ in split], [label for _, label in split],
                                         counter)
        return tf_pipeline.decode_once(records, counter) if decode_once else records

    data = _empty()
    data.train = tf_pipeline.train_stream(
        records_of(train), len(train),
        tf_images.train_transform(preset, size, spec.dtype, from_pixels=pixels),
        spec.batch_size, spec.seed, counter, cached=pixels)
    if validation:
        data.validation, data.validation_batches = tf_pipeline.eval_stream(
            records_of(validation), largest,
            tf_images.eval_transform(preset, size, spec.dtype, from_pixels=pixels),
            spec.batch_size, size, spec.dtype, counter, cached=pixels)
    data.skipped_images, data.skipped_names = counter.skipped, counter.skipped_paths
    return data


def _grain(train, validation, spec, preset, size, largest) -> Datasets:
    from preprocessing.feed import Feed
    from preprocessing.host import grain_stream
    from preprocessing.host import images as host_images

    # Worker processes pay off for photos, and for tiny images once there are enough of
    # them to be worth the processes' start (seconds); pixels already in memory are not
    # decoded at all: this process augments them.
    pixels = isinstance(train, Pixels)
    workers = 0 if pixels or (preset == "small" and len(train) < GRAIN_SMALL_WORKERS_FROM) \
        else None
    train_source = grain_stream.FileSource(_pairs(train))
    stream = grain_stream.train_stream(
        train_source, spec.batch_size,
        host_images.train_transform(preset, size, spec.dtype, from_pixels=pixels),
        spec.seed, workers=workers)
    stream.start()  # its worker processes start while the model is built and compiled
    data = _empty()
    data.train = Feed(stream, None)
    sources = [train_source]
    if validation:
        val_source = grain_stream.FileSource(_pairs(validation))
        sources.append(val_source)
        evaluation, _ = grain_stream.eval_stream(
            val_source, spec.batch_size,
            host_images.eval_transform(preset, size, spec.dtype, from_pixels=pixels),
            size, spec.dtype, examples=largest, workers=workers)
        data.validation_batches = _batches(largest, spec.batch_size)
        data.validation = Feed(evaluation, data.validation_batches)
    data.skipped_images = lambda: sum(s.skipped_images() for s in sources)
    data.skipped_names = lambda: [path for source, split in zip(sources, [train, validation])
                                  for path in _skipped_paths(source, split)]
    _feed_facts(data)
    return data


def _skipped_paths(source, split) -> list:
    """The paths of the records a grain FileSource skipped (FileSource.skipped_indices:
    its one byte per record, set by whichever process failed it), where the records
    are paths."""
    if isinstance(split, Pixels) or not split or not isinstance(split[0][0], str):
        return []
    return [split[i][0] for i in source.skipped_indices()]


def _pairs(split):
    """(item, label) records; decoded Pixels as (pixels, label), one view each."""
    if isinstance(split, Pixels):
        return [(image, int(label)) for image, label in zip(split.images, split.labels)]
    return split


def _device(train, validation, spec, preset, size, largest) -> Datasets:
    """The dataset decoded once and held where the model trains (preprocessing/device/);
    on TensorFlow, tf.data with the decoded images cached in host memory."""
    import time

    from preprocessing.device import memory

    started = time.perf_counter()
    if spec.backend != "jax":
        data = _tf_data(train, validation, spec, preset, size, largest, decode_once=True)
        held = sum(memory.decoded_bytes(s) for s in (train, validation) if s)
        data.facts = {"held_in": "host memory (tf.data's cache)", "bytes_held": held,
                      "memory_share": DEVICE_MEMORY_SHARE}
        return data
    from preprocessing.device.decode import DecodedSplit, decode_records
    from preprocessing.device.stream import DeviceStream
    from preprocessing.feed import Feed

    def decoded(split):
        if isinstance(split, Pixels):
            return DecodedSplit.from_array(split.images, split.labels)
        return decode_records(split)

    splits = [decoded(train)] + ([decoded(validation)] if validation else [])
    decode_seconds = time.perf_counter() - started
    sharding = _data_sharding(spec, size)
    data = _empty()
    stream = DeviceStream(splits[0], spec.batch, size, preset, spec.seed, train=True,
                          dtype=spec.dtype, sharding=sharding)
    data.train = Feed(stream, None)
    held = stream.nbytes
    if validation:
        evaluation = DeviceStream(splits[1], spec.batch, size, preset, spec.seed,
                                  train=False, dtype=spec.dtype, sharding=sharding,
                                  min_batches=_batches(largest, spec.batch_size))
        held += evaluation.nbytes
        data.validation_batches = evaluation.num_batches
        data.validation = Feed(evaluation, data.validation_batches)
    data.batch_specs = (stream.batch_spec(), evaluation.batch_spec() if validation else None)
    cache_seconds = time.perf_counter() - started  # decoded and on the devices
    free, where = memory.free_bytes(spec.backend, spec.accelerator)
    data.skipped_images = lambda: sum(s.skipped for s in splits)
    data.skipped_names = lambda: [name for s in splits for name in s.skipped_names]
    data.facts = {"held_in": where, "bytes_held": held, "memory_share": DEVICE_MEMORY_SHARE,
                  "free_bytes_before": free, "cache_seconds": round(cache_seconds, 3),
                  "decode_seconds": round(decode_seconds, 3)}
    print(f"input: {sum(len(s) for s in splits):,} images decoded once in {cache_seconds:.1f} s "
          f"({decode_seconds:.1f} s decoding, the rest onto the devices); "
          f"{held / 2**20:,.1f} MiB held in {where}", flush=True)
    _feed_facts(data)
    return data


def _feed_facts(data) -> None:
    data.input_state, data.restore_input = data.train.state_at, data.train.restore
    data.input_wait_seconds = lambda: data.train.wait_seconds


def _gpu(train, validation, spec, preset, size, largest) -> Datasets:
    from preprocessing.feed import Feed
    from preprocessing.gpu.stream import GpuJpegStream

    if preset not in ("standard",):
        raise DataError(f"--input_pipeline=gpu implements the standard preset (Inception "
                        f"crop, flip); --preprocessing={preset} needs grain or tf.data")
    sharding = _data_sharding(spec, size)
    stream = GpuJpegStream(train, spec.batch, size, spec.seed, train=True,
                           dtype=spec.dtype, sharding=sharding)
    streams = [stream]
    data = _empty()
    data.train = Feed(stream, None)
    if validation:
        evaluation = GpuJpegStream(validation, spec.batch, size, spec.seed, train=False,
                                   dtype=spec.dtype, sharding=sharding)
        streams.append(evaluation)
        data.validation_batches = evaluation.num_batches
        data.validation = Feed(evaluation, data.validation_batches)
    data.skipped_images = lambda: sum(s.skipped_images() for s in streams)
    _feed_facts(data)
    return data


def _data_sharding(spec, size):
    """The layout keras.distribution gives a batch of this process, or None."""
    import keras

    distribution = keras.distribution.distribution()
    if distribution is None:
        return None
    shape = (spec.batch.global_size, size, size, 3)
    return distribution.get_data_layout(shape).backend_layout

