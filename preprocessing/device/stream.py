"""A split held in accelerator memory, shuffled and augmented there: `DeviceStream`.

Each local device holds its own shard of the split (images i, i + n, ... of this
process's records, for n devices) as uint8, and makes its slice of every batch
itself: the epoch's order is a permutation drawn on the device from (seed, epoch),
the batch's randomness from (seed, epoch, batch), and one compiled function
(preprocessing/device/ops.py) gathers, crops, resizes, flips and normalizes. Nothing
crosses from the host per step but a few scalars, so a step is fed as fast as the
device computes (Fashion-MNIST's whole training set is 47 MB).

Training streams are endless and yield (images, labels); the position is (epoch,
batch), and `get_state`/`set_state` resume it exactly (a mid-epoch checkpoint goes on
with the same images in the same order). Evaluation streams yield every image once,
in order, as (images, labels, weights), the last batch padded with weight-0 zeros.

Without a sharding the arrays stay uncommitted on the default device, as Keras's
state is (a committed batch would commit the state, and JAX would compile the step
again: preprocessing/gpu/README.md); with keras.distribution's data layout, the
devices' slices make one batch as Keras's JAX trainer takes it (spec.batch_layout).
"""

from __future__ import annotations

import threading

import numpy as np

from preprocessing.device.decode import MAX_PIXELS, DecodedSplit
from preprocessing.device.ops import make_augment, make_permute
from preprocessing.spec import BatchShape, batch_layout, device_batch, local_devices


class DeviceStream:
    """Batches of one split, made on the devices that hold it.

    Args:
        split: this process's images.
        batch: the batch's shares (its per_process images a batch of this process,
            per_replica on each of its devices_per_process devices).
        image_size: output side in pixels.
        preset: "small" or "standard" (augment.PRESETS; heavy is not implemented here).
        seed: decides the orders and the augmentation (None: a fresh seed).
        train: endless and augmented (True), or each image once, in order (False).
        dtype: of the images, "float32" or "bfloat16".
        sharding: keras.distribution's NamedSharding of the global image batch, or
            None (one device, arrays uncommitted).
        min_batches: evaluation: at least this many batches (every process runs as
            many as the one with the largest shard; the rest is weight-0 padding).
    """

    def __init__(self, split: DecodedSplit, batch: BatchShape, image_size: int, preset: str,
                 seed: int | None, train: bool, dtype: str = "float32", sharding=None,
                 min_batches: int = 1):
        import jax

        if len(split.flat) > MAX_PIXELS:
            raise ValueError(f"{len(split.flat):,} pixels exceed the device pipeline's int32 "
                             f"indices ({MAX_PIXELS:,})")
        self.batch_size, self.image_size, self.train = batch.per_process, image_size, train
        self.dtype = dtype
        self.seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else int(seed)
        self.sharding = sharding
        self.devices = local_devices(sharding, batch, image_size)
        self._layout = batch_layout(self.devices, sharding) if sharding is not None else None
        self.per_device = batch.per_replica
        count = len(self.devices)
        shards = [split.shard(i, count) if count > 1 else split for i in range(count)]
        smallest = min(len(s) for s in shards)
        if train and smallest < self.per_device:
            raise ValueError(f"{smallest} images per device cannot fill a batch of "
                             f"{self.per_device} (the last partial batch is dropped)")
        self.steps_per_epoch = smallest // self.per_device if train else 0
        self.num_batches = 0 if train else max(min_batches, -(-max(len(s) for s in shards)
                                                              // self.per_device))
        self._augment = make_augment(preset, image_size, train, dtype, split.channels,
                                     split.same_size, self.per_device)
        self._permute = make_permute()
        self._held = [self._put(jax, s, d if sharding is not None else None)
                      for s, d in zip(shards, self.devices)]
        self.nbytes = sum(s.nbytes for s in shards)
        self._position = (0, 0)
        self._orders = [None] * count  # per device: (epoch, its permutation)
        # The batch functions compile (seconds, cold) while the model is built; the
        # first batch waits for them rather than compile them a second time.
        self._compiling = threading.Thread(target=self._compile, name="device-stream-compile",
                                           daemon=True)
        self._compiling.start()

    @staticmethod
    def _put(jax, split: DecodedSplit, device):
        return tuple(jax.device_put(a, device) for a in (
            split.flat, split.offsets.astype(np.int32), split.heights, split.widths,
            split.labels))

    # ---- the stream -------------------------------------------------------------------

    def get_state(self) -> dict:
        """The next batch to come (JSON)."""
        epoch, batch = self._position
        return {"epoch": epoch, "batch": batch, "seed": self.seed}

    def set_state(self, state: dict) -> None:
        """Continues from a get_state(): the same batches in the same order (the saved
        seed is adopted, so a run started without --seed goes on with its own)."""
        epoch, batch = int(state["epoch"]), int(state["batch"])
        limit = self.steps_per_epoch if self.train else self.num_batches
        if epoch < 0 or not 0 <= batch < max(limit, 1):
            raise ValueError(f"state {state} is outside this stream ({limit} batches per epoch)")
        self.seed = int(state.get("seed", self.seed))
        self._orders = [None] * len(self._held)
        self._position = (epoch, batch)

    def __iter__(self):
        if not self.train:  # each evaluation reads everything again, from the start
            self._position = (0, 0)
        return self

    def __next__(self):
        epoch, batch = self._position
        if not self.train and batch >= self.num_batches:
            raise StopIteration
        made = self._make(epoch, batch)
        if self.train and batch + 1 >= self.steps_per_epoch:
            self._position = (epoch + 1, 0)
        else:
            self._position = (epoch, batch + 1)
        return made

    def batch_spec(self) -> tuple:
        """Shape and dtype of every batch this stream yields (this process's part): a
        tuple of jax.ShapeDtypeStruct, (images, labels) and weights when evaluating."""
        import jax

        images = (self.batch_size, self.image_size, self.image_size, 3)
        shapes = [(images, self.dtype), ((self.batch_size,), "int32"),  # ops.make_augment's
                  ((self.batch_size,), "float32")][:2 if self.train else 3]
        return tuple(jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in shapes)

    def skipped_images(self) -> int:
        return 0  # undecodable images were left out, and counted, when decoding

    def _compile(self):
        """Makes batch (0, 0) on every device through `_device_batch`, as `_make` will
        (so the compiled programs are the ones it finds); the outputs are dropped and
        nothing of the stream's position or its cached orders changes."""
        try:
            for device, held in enumerate(self._held):
                order = self._order(device, held, 0) if self.train else held[4]
                for output in self._device_batch(device, held, order, 0, 0):
                    output.block_until_ready()
        except Exception:  # noqa: BLE001 - the first batch meets it again, and raises it
            pass

    def _order(self, device: int, held, epoch: int):
        """The permutation of `epoch` of the images `device` holds."""
        return self._permute(np.uint32(self.seed), epoch, device, held[4])

    def _device_batch(self, device: int, held, order, epoch: int, batch: int):
        """(images, labels, weights) of `batch` of `epoch`, made on `device`."""
        return self._augment(*held, order, np.int32(batch * self.per_device),
                             np.uint32(self.seed), np.int32(epoch),
                             np.int32(batch * len(self._held) + device))

    def _make(self, epoch: int, batch: int):
        if self._compiling is not None:
            self._compiling.join()
            self._compiling = None
        outputs = []
        for device, held in enumerate(self._held):
            order = held[4]  # evaluation: any int32 array (unused)
            if self.train:
                if self._orders[device] is None or self._orders[device][0] != epoch:
                    self._orders[device] = (epoch, self._order(device, held, epoch))
                order = self._orders[device][1]
            outputs.append(self._device_batch(device, held, order, epoch, batch))
        if self.sharding is None:
            images, labels, weights = outputs[0]
        else:
            images, labels, weights = (device_batch([o[i] for o in outputs], self._layout)
                                       for i in range(3))
        return (images, labels) if self.train else (images, labels, weights)
