"""Real JPEGs into the model at accelerator speed: decoded on the GPU, augmented there.

The host only reads each file, reads the JPEG's size from its header, draws the crop
window and the flip from the seed, and routes each image (planning.py, in worker
processes, so the training process's GIL stays free). The GPU's JPEG engines decode
the batch, only each image's crop window, straight into one fixed-shape uint8 canvas
per batch and device (decoders.py); one compiled step per batch then crops, resizes
(bilinear, TF's arithmetic), flips and normalizes every image (canvas.py). Canvas
shapes come from a few buckets, so XLA compiles a handful of programs in all: no
per-batch shape ever reaches it. A background thread collects the plans while others
decode them, `prefetch` batches ahead of training (threads.py). The knobs, and the
figures behind their defaults, are GpuOptions (options.py); README.md beside this
file says what bites here. One device's slice of a batch is made in slices.py.

The augmentation is the `standard` preset of preprocessing/tfdata/images.py
(Inception crop from augment.random_crop_window, bilinear resize, random flip; eval:
center 87.5% crop) with the same distribution, not the same draws (numpy, not Philox).

Images the GPU path does not take (PNG named .JPEG, CMYK, arithmetic-coded, 12-bit,
truncated, a window larger than the biggest canvas) are decoded on the CPU
(preprocessing/host/images.py) and copied into their slot (a batch nvJPEG refuses for
one image is split in halves until only that image is left: decoders.decode_bisecting);
a window too large for any canvas is resized on the host first (then rounded to uint8:
at most half a gray level off).
Images no decoder can read are skipped and counted (`skipped_images()`, distinct
files): in training another image of the same batch and device stands in for them
(image and label together), in evaluation they get weight 0.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import warnings
import weakref

import numpy as np

from preprocessing.gpu.canvas import canvas_step
from preprocessing.gpu.decoders import make_canvases, nvimgcodec_available
from preprocessing.gpu.native.shared_bytes import Blocks, warn_if_short
from preprocessing.gpu.options import GpuOptions
from preprocessing.gpu.planning import PlanSpec, plan_batch, warm_up_jpegs
from preprocessing.gpu.slices import SliceMaker
from preprocessing.gpu.threads import END, Running, Work, process_pool
from preprocessing.spec import BatchShape, batch_layout, device_batch, local_devices

_DTYPES = ("float32", "bfloat16", "float16")


class GpuJpegStream:
    """Batches of decoded, augmented, normalized images as device arrays.

    Args:
        records: this process's (path, label) pairs.
        batch: the batch's shares (its per_process images a batch of this process,
            per_replica on each of its devices_per_process devices).
        image_size: output side in pixels.
        seed: decides the shuffles, crops and flips (None: a fresh random seed).
        train: True: endless, reshuffled every epoch, random crops and flips, the
            last partial batch of an epoch dropped, yields (images, labels).
            False: every image once in order, center crops, the last batch padded
            with weight-0 zeros, yields (images, labels, weights); iterate it again
            for each evaluation.
        dtype: of the images: "float32", "bfloat16" or "float16".
        sharding: a NamedSharding of the global batch (batch.global_size) over
            devices, this process's among them (keras.distribution.DataParallel's
            data layout); each local device decodes its own slice. None: one device.
        options: how to decode (GpuOptions: the decoder, lanes, planning processes...).

    Attributes:
        options: `options` as the stream runs them, every None decided.
        warmed: with the GPU decoder, a Future of the compiles of the step for every
            canvas shape, started when the stream is made (None with decoder "cpu").
        devices: this process's devices, in the order of their slices; without a
            sharding, the default device, and the batches are uncommitted there.
    """

    def __init__(self, records, batch: BatchShape, image_size: int, seed: int | None,
                 train: bool, dtype: str = "float32", sharding=None,
                 options: GpuOptions = GpuOptions()):
        self.records = [(str(path), int(label)) for path, label in records]
        batch_size = batch.per_process
        self._check(batch_size, image_size, train, dtype, options)
        self.batch_size, self.image_size, self.train, self.dtype = (
            batch_size, image_size, train, dtype)
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self.sharding = sharding
        self.devices = local_devices(sharding, batch, image_size)
        self._layout = batch_layout(self.devices, sharding) if sharding is not None else None
        # Without a sharding the batches stay uncommitted (on the default device), as
        # Keras's state is: a committed batch would commit the state the first step
        # returns, and every change of commitment (that step; the metrics reset at
        # each epoch's end) makes JAX compile the training step again (ResNet-50 on
        # an H200: ~10 s each).
        self._commit = sharding is not None
        self.per_device = self._per_device(batch, options)
        self.options = options.resolved(self._pick_decoder(options))
        self.steps_per_epoch = len(self.records) // batch_size if train else 0
        self.num_batches = -(-len(self.records) // batch_size) if not train else 0
        self._step = canvas_step(image_size, dtype)
        hw_only = self.options.backend == "hw"  # as asked: before any fallback
        first = self._first_lane(options)
        self._spec = self._plan_spec(hw_only)
        self._blocks = self._shared_blocks()
        self._warm_jpegs = self._warm_up_jpegs()
        self._lanes = [first] + [self._lane() for _ in range(self.options.decoders - 1)]
        self._fillers = [filler for lane in self._lanes for filler in lane]
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max(len(self.devices) * self.options.decoders, 4), thread_name_prefix="jpeg")
        self._skipped: set[str] = set()  # paths
        self._slices = SliceMaker(self.records, self._step, self.options.canvas_sides, train,
                                  self._skipped, self._spec, self._warm_jpegs)
        self._permutation = (None, None)  # (epoch, order)
        self._position = (0, 0)  # the next batch the consumer gets
        self._running = None
        # Compile the step for every canvas shape now, beside whatever the program does
        # next (fit compiles the model): a shape first met in training would hold
        # that batch, and so training, for the compile (0.2-0.5 s on an H200).
        self.warmed = (self._threads.submit(self._compile_steps)
                       if self.options.decoder == "nvimgcodec" else None)

    # ---- public API -------------------------------------------------------------

    def skipped_images(self) -> int:
        """Distinct files that no decoder could read, so far."""
        return len(self._skipped)

    def get_state(self) -> dict:
        """Where the stream is: the next batch to come (JSON-serializable)."""
        epoch, batch = self._position
        return {"epoch": epoch, "batch": batch, "seed": self.seed}

    def set_state(self, state: dict) -> None:
        """Continues from a `get_state()`: the same batches, in the same order.

        The state's seed is adopted: a run started without --seed draws one, and
        its later attempts must go on with that one.
        """
        self.seed = int(state.get("seed", self.seed))
        self._spec = self._slices.spec = dataclasses.replace(self._spec, seed=self.seed)
        self._permutation = (None, None)
        epoch, batch = int(state["epoch"]), int(state["batch"])
        limit = self.steps_per_epoch if self.train else self.num_batches
        if epoch < 0 or not 0 <= batch < max(limit, 1):
            raise ValueError(f"state {state} is outside this stream ({limit} batches per epoch)")
        self._stop()
        self._position = (epoch, batch)

    def __iter__(self):
        if not self.train:  # each evaluation reads everything again, from the start
            self._stop()
            self._position = (0, 0)
        return self

    def __next__(self):
        if not self.train and self._position[1] >= self.num_batches:
            self._stop()
            raise StopIteration
        if self._running is None:
            self._running = Running(self._positions(self._position), self._work())
        item = self._running.take()
        if item is END:
            self._stop()
            raise StopIteration
        position, batch = item
        self._position = self._after(position)
        return batch

    def close(self) -> None:
        """Stops the background threads (a new iteration starts them again)."""
        self._stop()

    def _stop(self):
        if self._running is not None:
            self._running.stop()
            self._running = None

    # ---- set-up -----------------------------------------------------------------

    def _check(self, batch_size: int, image_size: int, train: bool, dtype: str,
               options: GpuOptions) -> None:
        """The arguments' checks that GpuOptions cannot make alone."""
        if not self.records:
            raise ValueError("records is empty: there is nothing to read")
        if image_size < 1:
            raise ValueError(f"image_size must be >= 1, got {image_size}")
        if train and len(self.records) < batch_size:
            raise ValueError(f"{len(self.records)} training records cannot fill one batch of "
                             f"{batch_size} (the last partial batch is dropped)")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        if image_size > options.canvas_sides[-1]:
            raise ValueError(f"image_size {image_size} exceeds the largest canvas side "
                             f"{options.canvas_sides[-1]}")

    @staticmethod
    def _per_device(batch: BatchShape, options: GpuOptions) -> int:
        """Images per device of a batch (the canvas step indexes them with int32)."""
        per_device = batch.per_replica
        if per_device * options.canvas_sides[-1] ** 2 >= 2**31:
            raise ValueError(f"{per_device} images per device of canvases up to "
                             f"{options.canvas_sides[-1]}^2 overflow int32 indices; lower "
                             "canvas_sides or the batch")
        return per_device

    def _pick_decoder(self, options: GpuOptions) -> str:
        """options.decoder for these devices: "nvimgcodec" or "cpu"."""
        decoder = options.decoder
        on_gpu = all(d.platform == "gpu" for d in self.devices)
        if decoder == "auto":
            return "nvimgcodec" if on_gpu and nvimgcodec_available() else "cpu"
        if decoder == "nvimgcodec":
            # nvImageCodec's C API can use its CPU backend
            if not on_gpu and options.chosen_api() != "c":
                raise ValueError(f"decoder='nvimgcodec' needs GPU devices, got "
                                 f"{self.devices[0].platform}")
            if not nvimgcodec_available():
                raise ValueError("decoder='nvimgcodec' but nvidia.nvimgcodec does not import "
                                 "(pip install nvidia-nvimgcodec-cu13 nvidia-nvjpeg)")
        return decoder

    def _lane(self) -> list:
        """A lane's canvases (and so its decoder), one per device."""
        return [make_canvases(d, self.options, self.per_device, self._commit)
                for d in self.devices]

    def _first_lane(self, asked: GpuOptions) -> list:
        """The first lane, which finds out whether nvJPEG's hardware decoder can be had:
        where it was not asked for by name and cannot (no JPEG engines, no libnvjpeg),
        nvImageCodec's C API decodes instead, with its own choice of backend."""
        try:
            return self._lane()
        except (RuntimeError, ImportError) as e:
            used = self.options
            if not (asked.api is None and used.api == "nvjpeg" and used.decoder == "nvimgcodec"):
                raise
            warnings.warn(f"nvJPEG's hardware decoder is unavailable ({e}); decoding with "
                          "nvImageCodec's C API instead", RuntimeWarning, stacklevel=3)
            self.options = dataclasses.replace(
                asked, api="c", backend="default", decoders=used.decoders).resolved(used.decoder)
            return self._lane()

    def _plan_spec(self, hw_only: bool) -> PlanSpec:
        """What planning needs. hw_only: the backend asked for was "hw", so what the
        engines refuse goes to the CPU, also after a fallback to nvImageCodec."""
        options = self.options
        # read_in "shared" or "workers": planning hands the GPU decoder the bytes it read.
        carry = options.read_in in ("shared", "workers") and options.decoder == "nvimgcodec"
        return PlanSpec(seed=self.seed, train=self.train, roi=options.roi,
                        max_side=options.canvas_sides[-1], image_size=self.image_size,
                        gpu=options.decoder == "nvimgcodec", hw_only=hw_only, keep_bytes=carry)

    def _planning_depth(self) -> int:
        """Batches being planned at once: two a planning process, at least two."""
        return max(2, 2 * self.options.workers)

    def _shared_blocks(self) -> Blocks | None:
        """With read_in "shared", the shared-memory blocks the planning processes write
        each batch's bytes into."""
        if not (self._spec.keep_bytes and self.options.read_in == "shared"):
            return None
        # A block per batch from its planning to its decode: those being planned,
        # waiting, being decoded, and one spare.
        wanted = (self._planning_depth() + self.options.prefetch
                  + 2 * self.options.decoders + 1)
        blocks = Blocks(wanted, _block_bytes(self.batch_size))
        warn_if_short(blocks, wanted)
        weakref.finalize(self, blocks.close)
        return blocks

    def _warm_up_jpegs(self) -> concurrent.futures.Future | None:
        """With api "nvjpeg", a Future of planning.warm_up_jpegs' JPEGs for the files
        options.warm_up draws; else None."""
        options = self.options
        if not (options.api == "nvjpeg" and options.decoder == "nvimgcodec"
                and options.warm_up > 0):
            return None
        rng = np.random.default_rng([self.seed, 3])
        picks = rng.choice(len(self.records), min(options.warm_up, len(self.records)),
                           replace=False)
        paths = [self.records[i][0] for i in sorted(picks)]
        return self._planned(warm_up_jpegs, paths, 2 * options.canvas_sides[-1])

    def _planned(self, fn, *args) -> concurrent.futures.Future:
        """fn(*args) in a planning process, or here and now without them."""
        if self.options.workers:
            return process_pool(self.options.workers).submit(fn, *args)
        done = concurrent.futures.Future()
        done.set_result(fn(*args))
        return done

    def _compile_steps(self) -> int:
        """Compiles the step for every canvas shape and device; returns their count."""
        return self._slices.compile_all(self.devices, self.per_device, self._commit)

    # ---- the order and the plans ----------------------------------------------------

    def _after(self, position):
        epoch, batch = position
        if self.train and batch + 1 >= self.steps_per_epoch:
            return epoch + 1, 0
        return epoch, batch + 1

    def _positions(self, start):
        position = start
        while self.train or position[1] < self.num_batches:
            yield position
            position = self._after(position)

    def _work(self) -> Work:
        """What a pass's threads do (threads.Running): plan, then decode, each batch."""
        return Work(submit=self._submit, finish=self._finish, materialize=self._materialize,
                    release=self._release, lanes=self.options.decoders,
                    prefetch=self.options.prefetch, plan_ahead=self._planning_depth())

    def _records_of(self, position) -> list[int]:
        epoch, batch = position
        start = batch * self.batch_size
        if self.train:
            if self._permutation[0] != epoch:
                rng = np.random.default_rng([self.seed, 1, epoch])
                self._permutation = (epoch, rng.permutation(len(self.records)))
            return self._permutation[1][start:start + self.batch_size].tolist()
        stop = min(start + self.batch_size, len(self.records))
        return list(range(start, stop)) + [-1] * (self.batch_size - (stop - start))

    def _submit(self, position):
        """Starts planning a batch; returns (records, a future of its Slots, the
        shared-memory block it holds or None: `_release` it once decoded)."""
        records = self._records_of(position)
        paths = [self.records[r][0] if r >= 0 else None for r in records]
        block = self._blocks.acquire() if self._blocks is not None else None
        name = None if block is None else self._blocks.name(block)
        return records, self._planned(plan_batch, paths, position, self._spec, name), block

    def _release(self, block) -> None:
        """Frees a batch's shared-memory block (its decode is over, or it never ran)."""
        if block is not None:
            self._blocks.release(block)

    def _finish(self, position, records, slots, block=None):
        """Labels, skips counted, slots split per device, code streams made (bytes in
        `block` seen in place)."""
        for slot, record in zip(slots, records):
            slot.record = record
            if record >= 0:
                slot.label = self.records[record][1]
                if slot.route == "bad":
                    self._skipped.add(self.records[record][0])
        per = self.per_device
        parts = [slots[i * per:(i + 1) * per] for i in range(len(self.devices))]
        for filler, part in zip(self._fillers, parts):
            for index, slot in enumerate(part):
                slot.index = index
                if slot.route == "gpu":
                    data = slot.data
                    if isinstance(data, tuple):  # (offset, size) in the batch's block
                        data = self._blocks.view(block, *data)
                    slot.code_stream = filler.code_stream_or_none(
                        self.records[slot.record][0], slot.region, data)
                    slot.data = None
        return position, parts

    # ---- the device side (each device's slice: slices.py) --------------------------

    def _materialize(self, parts, lane: int = 0):
        """A planned batch as device arrays (decoded by `lane`'s decoders); None if a
        device got no image at all."""
        import jax

        fillers = self._lanes[lane]
        if len(parts) == 1:
            results = [self._slices.make(fillers[0], parts[0])]
        else:  # each GPU decodes its slice at the same time (the decodes release the GIL)
            results = list(self._threads.map(self._slices.make, fillers, parts))
        if any(result is None for result in results):
            return None
        outputs = [r[0] for r in results]
        labels = np.concatenate([r[1] for r in results])
        weights = np.concatenate([r[2] for r in results])
        if self.sharding is None:
            images = outputs[0]
            labels, weights = jax.device_put(labels), jax.device_put(weights)
        else:
            images = device_batch(outputs, self._layout)
            labels, weights = jax.device_put((labels, weights), self._layout)
        return (images, labels) if self.train else (images, labels, weights)


def _block_bytes(batch_size: int) -> int:
    """A batch's shared-memory block: 160 KiB an image (ImageNet's JPEGs: 110 KB on
    average; files beyond a full block take the pipe), whole MiB."""
    return -(-batch_size * 160 * 1024 // 2**20) * 2**20
