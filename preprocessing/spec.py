"""The contract of preprocessing/: what a dataset builder is given and what it returns.

Every `--dataset` builder (preprocessing/datasets/) takes an `InputSpec` (plain
values, never the Config) and returns `Datasets`: the training and validation
streams `fit` reads, with the facts the run records about them. `DataError` is
every data mistake, in one line. `BatchShape` is the global batch and its shares per
process and per device, divided and checked in one place.
"""

from __future__ import annotations

import dataclasses

import numpy as np


class DataError(ValueError):
    """A dataset is missing, misnamed or malformed; the message is one line."""


class BatchError(ValueError):
    """The global batch cannot be shared evenly; the message is one line."""


@dataclasses.dataclass(frozen=True)
class BatchShape:
    """The global batch and its parts: the one place that divides it, and checks it.

    A step trains `global_size` images: each of `num_processes` processes feeds
    `per_process` of them, and each of its `devices_per_process` devices (replicas)
    trains `per_replica`. Made by the topology (app/engine/distribute.py,
    `Topology.batch_shape`); the pipelines read its fields by name and never multiply
    or divide a batch by a process or device count themselves (tests/test_layout.py).

    Raises:
        BatchError: the replicas cannot share the batch evenly.
    """

    global_size: int
    num_processes: int = 1
    devices_per_process: int = 1
    # Derived once, here (not arguments):
    num_replicas: int = dataclasses.field(init=False)  # devices over all processes
    per_process: int = dataclasses.field(init=False)  # images a process feeds a step
    per_replica: int = dataclasses.field(init=False)  # images a device trains a step

    def __post_init__(self):
        for name in ("global_size", "num_processes", "devices_per_process"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BatchError(f"{name}={value!r} must be a positive integer")
        replicas = self.num_processes * self.devices_per_process
        if self.global_size % replicas:
            raise BatchError(
                f"--global_batch_size={self.global_size} is not divisible by the "
                f"{replicas} replicas ({self.num_processes} process(es) x "
                f"{self.devices_per_process} device(s)); use a multiple of {replicas}")
        object.__setattr__(self, "num_replicas", replicas)
        object.__setattr__(self, "per_process", self.global_size // self.num_processes)
        object.__setattr__(self, "per_replica", self.global_size // replicas)

    def largest_shard(self, examples: int) -> int:
        """The most of `examples` records one process holds when they are dealt out
        round robin (process i takes records i, i + n, ...): every process runs as
        many evaluation batches as this shard needs."""
        return -(-examples // self.num_processes)


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What a builder needs to know, as plain values (never the Config)."""

    data_dir: str
    image_size: int  # 0 = the dataset's default
    batch: BatchShape | None = None  # None only while the dataset is checked (no batch yet)
    process_index: int = 0
    seed: int | None = None
    preset: str = "auto"  # auto, standard, heavy or small (see augment.PRESETS)
    with_validation: bool = True
    backend: str = "tensorflow"
    manual_dir: str = ""
    download: bool = False
    dtype: str = "float32"  # dtype of the images handed to the model
    input_pipeline: str = "auto"  # auto, tf.data, grain, gpu or device (see streams.py)
    accelerator: str = "cpu"
    validation_steps: int = 0  # > 0: evaluate that many batches, a fixed uniform sample

    @property
    def batch_size(self) -> int:
        """Images per batch of this process."""
        return self.batch.per_process

    @property
    def num_processes(self) -> int:
        return self.batch.num_processes if self.batch is not None else 1


@dataclasses.dataclass(frozen=True)
class Pixels:
    """A split already decoded, as a builder that owns raw pixels hands it over
    (Fashion-MNIST's IDX files): uint8 images [N, H, W] (gray) or [N, H, W, C], and
    their int labels [N]. The other builders hand (path or bytes, label) records."""

    images: object  # numpy uint8 array
    labels: object  # numpy int array

    def __len__(self) -> int:
        return len(self.labels)

    def shard(self, index: int, count: int) -> "Pixels":
        return Pixels(self.images[index::count], self.labels[index::count])


@dataclasses.dataclass
class Datasets:
    """The training and validation streams of one dataset.

    `train` repeats forever and yields (images, labels) batches of `batch_size`.
    `validation` (or None) yields every validation image of this process exactly
    once as (images, labels, weights) batches; the last batch is padded to full
    size with weight-0 images, so the static shapes suit TPUs and top-1 counts
    every image and nothing else.
    """

    train: object
    validation: object | None
    num_classes: int
    image_size: int
    train_examples: int  # over all processes
    validation_examples: int  # over all processes
    validation_batches: int  # per process, padding included
    skipped_images: object = None  # callable -> count of corrupt images skipped
    # callable -> the first SKIPPED_NAMES_KEPT of them by name (a folder dataset's paths,
    # relative to its root; a file refused at the door with its reason in parentheses),
    # or None where the records have no names (TFDS). `skipped_line` says them.
    skipped_names: object = None
    input_pipeline: str = "none"  # which pipeline feeds it: tf.data, grain, gpu, device or none
    preset: str = "none"  # the augmentation preset chosen (augment.PRESETS)
    input_state: object = None  # fn(batches served) -> JSON state, where resumable
    restore_input: object = None  # fn(state) -> None: continue from a saved state
    input_wait_seconds: object = None  # fn() -> seconds fit waited for training batches
    # On JAX, what `fit` will be handed, where the pipeline knows it before its first
    # batch: (training batch, validation batch or None), each a tuple of
    # jax.ShapeDtypeStruct (shape, dtype, sharding). The training and evaluation steps
    # then compile while the rest of the run starts (app/engine/precompile.py).
    batch_specs: tuple | None = None
    # Data with no size of its own (synthetic: one batch served forever): the steps of
    # its nominal epoch, when --steps_per_epoch does not set one. None: an epoch is one
    # pass over the train_examples.
    epoch_steps: int | None = None
    # What the pipeline says of itself, as JSON values for summary.json's "input" (e.g.
    # the bytes it holds in device memory, the seconds it took to decode the dataset).
    facts: dict = dataclasses.field(default_factory=dict)
    # What identifies the data's content (preprocessing/datasets/fingerprint.py), saved
    # with each checkpoint and checked on resume; None where a builder gives none.
    fingerprint: dict | None = None
    # Where the data was read from, for the banner: a folder, or files (a --data_dir
    # that does not hold a dataset must never pass unseen for another copy of it).
    source: str | None = None


SKIPPED_NAMES_KEPT = 10  # names a Datasets keeps of its skipped images
SKIPPED_NAMES_SHOWN = 3  # names a line shows


def first_names(names: list, shown: int = SKIPPED_NAMES_SHOWN) -> str:
    """'a, b, c and 4 more': the first `shown` of `names`, for one line."""
    more = f" and {len(names) - shown:,} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def skipped_line(count: int, names: list | None) -> str | None:
    """The closing line for the images a run skipped, or None when it skipped none:
    'skipped 2 images that could not be read or decoded: train/cat/bad.jpg, ...'.

    Args:
        count: the images skipped (summary.json's corrupt_images_skipped).
        names: the first of them by name (Datasets.skipped_names), or None/empty.
    """
    if not count:
        return None
    line = (f"skipped {count:,} image{'s' if count != 1 else ''} that could not be read or "
            "decoded")
    if names:
        shown = min(SKIPPED_NAMES_SHOWN, count)
        more = f" and {count - shown:,} more" if count > shown else ""
        line += ": " + ", ".join(names[:shown]) + more
    return line


def num_batches(examples: int, batch_size: int) -> int:
    """Batches needed to see `examples` once with a padded last batch."""
    return -(-examples // batch_size)


def batch_layout(devices: list, sharding):
    """The layout of the batches a stream hands Keras's JAX trainer, from the slices
    held on this process's `devices` (in the order of their rows) under `sharding`,
    the keras.distribution data layout. The trainer hands every batch to
    jax.make_array_from_process_local_data, which takes it as this process's part: with
    one process that part is the global batch, laid out as `sharding` says (Keras then
    moves nothing); with several, it is laid over this process's own devices (handed a
    global array, Keras would index other hosts' rows)."""
    import jax

    if jax.process_count() == 1:
        return jax.sharding.NamedSharding(sharding.mesh,
                                          jax.sharding.PartitionSpec(sharding.spec[0]))
    return jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("batch",)),
                                      jax.sharding.PartitionSpec("batch"))


def check_devices(batch: BatchShape, devices: list) -> None:
    """A stream's `devices` (this process's, where its slices of a batch go) must be the
    ones `batch` was shared out over, or its slices would not add up to the batch.

    Raises:
        ValueError: naming both counts.
    """
    if len(devices) != batch.devices_per_process:
        raise ValueError(f"the batch is shared over {batch.devices_per_process} device(s) "
                         f"a process, but the sharding lays it over {len(devices)} of this "
                         "process's devices")


def local_devices(sharding, batch: BatchShape, image_size: int) -> list:
    """This process's devices in the order of their slices of the batch: a stream's
    devices. Without a sharding, the default device (where Keras keeps the model's state).

    Raises:
        ValueError: the sharding does not split the batch axis, or lays the batch over
            other devices than `batch` was shared out over (check_devices).
    """
    import jax

    if sharding is None:
        devices = list(jax.device_put(np.zeros((), np.int32)).devices())
        check_devices(batch, devices)
        return devices
    global_batch = batch.global_size
    shape = (global_batch, image_size, image_size, 3)
    starts = {}
    for device, index in sharding.addressable_devices_indices_map(shape).items():
        rows = index[0]
        start, stop = rows.start or 0, global_batch if rows.stop is None else rows.stop
        if stop - start == global_batch and len(sharding.device_set) > 1:
            raise ValueError(f"sharding {sharding} does not split the batch axis")
        starts[device] = start
    devices = sorted(starts, key=starts.get)
    check_devices(batch, devices)
    return devices


def device_batch(parts: list, layout):
    """One batch from the slices `parts`, one per device of `layout` (batch_layout), in
    the order of their rows."""
    import jax

    shape = (sum(p.shape[0] for p in parts), *parts[0].shape[1:])
    return jax.make_array_from_single_device_arrays(shape, layout, parts)
