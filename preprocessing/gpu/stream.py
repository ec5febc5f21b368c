"""Real JPEGs into the model at accelerator speed: decoded on the GPU, augmented there.

The host only reads each file, reads the JPEG's size from its header, draws the crop
window and the flip from the seed, and shards (jpeg_plan.py, in worker processes, so
the training process's GIL stays free). The GPU's JPEG engines decode the batch
(nvJPEG's hardware decoder, nvjpeg_c.py; or nvImageCodec: api), only each image's
crop window, straight into one fixed-shape uint8 canvas per batch and device
(gpu/decoders.py); one compiled step per batch then crops, resizes
(bilinear, TF's arithmetic), flips and normalizes every image (canvas_ops.py).
Canvas shapes come from a few buckets, so XLA compiles a handful of programs in all:
no per-batch shape ever reaches it. A background thread collects the plans while
another decodes them, `prefetch` batches ahead of training.

The augmentation is the `standard` preset of image_ops.py (Inception crop from
augment.random_crop_window, bilinear resize, random flip; eval: center 87.5% crop)
with the same distribution, not the same draws (numpy, not Philox).

Images the GPU path does not take (PNG named .JPEG, CMYK, arithmetic-coded, 12-bit,
truncated, a window larger than the biggest canvas) are decoded on the CPU
(host_ops.decode) and copied into their slot (a batch nvJPEG refuses for one image is
split in halves until only that image is left: decoders.decode_bisecting); a window
too large for any canvas is resized on the host first (then rounded to uint8: at most
half a gray level off).
Images no decoder can read are skipped and counted (`skipped_images()`, distinct
files): in training another image of the same batch and device stands in for them
(image and label together), in evaluation they get weight 0.

`decoder="cpu"` runs the same pipeline with every image decoded on the host: that is
the fallback without nvImageCodec, and what the CPU tests exercise.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import warnings
import weakref

import numpy as np

from preprocessing.gpu.threads import END, Running, process_pool
from preprocessing.gpu.canvas import canvas_step
from preprocessing.gpu.decoders import APIS, BACKENDS
from preprocessing.gpu.planning import (PlanSpec, host_decode, host_window, plan_batch, read_file,
                                     warm_up_jpegs)
from preprocessing.gpu.native.shared_bytes import Blocks, warn_if_short

CANVAS_SIDES = (256, 384, 512, 768, 1024)  # canvas sides (square), in buckets
DECODERS = ("auto", "nvimgcodec", "cpu")
_DTYPES = ("float32", "bfloat16", "float16")


class GpuJpegStream:
    """Batches of decoded, augmented, normalized images as device arrays.

    Args:
        records: this process's (path, label) pairs.
        batch_size: images per batch of this process (all its devices together).
        image_size: output side in pixels.
        seed: decides the shuffles, crops and flips (None: a fresh random seed).
        train: True: endless, reshuffled every epoch, random crops and flips, the
            last partial batch of an epoch dropped, yields (images, labels).
            False: every image once in order, center crops, the last batch padded
            with weight-0 zeros, yields (images, labels, weights); iterate it again
            for each evaluation.
        dtype: of the images: "float32", "bfloat16" or "float16".
        sharding: a NamedSharding of the global batch (batch_size x processes) over
            devices, this process's among them (keras.distribution.DataParallel's
            data layout); each local device decodes its own slice. None: one device.
        decoder: "nvimgcodec" (on GPUs; with api="c" also on the CPU, through
            nvImageCodec's CPU backend, as the tests run it), "cpu" (host_ops.decode),
            or "auto" (nvimgcodec when it imports and the devices are GPUs, else cpu).
        prefetch: batches made ahead of the consumer. 3: on an H200 whose step ran at
            8,100 img/s (batch 256), with 2 fit waited 0.4 s for batches in the last of
            3 epochs (0.951 of synthetic data), with 3 it did not (0.974; one call,
            benchmarks/h200_feed.sh, results/2026-12-01-h200-step.json "feed").
        roi: decode only each crop window on the GPU (False: the whole image).
        backend: nvImageCodec backend, see decoders.BACKENDS. "hw" (the default, the
            fastest measured under load): the hardware JPEG engines, and JPEGs they do
            not take (progressive, unusual chroma subsampling) go to the CPU.
        canvas_sides: allowed canvas sides; the largest caps the canvas.
        workers: processes that plan batches (read, headers, windows, CPU decodes);
            0 plans in this process (slower: its Python competes with training for
            the GIL). None: for the GPU decoder half the cores, at most 8 (with 4 on
            an H200's 16 cores the last epochs waited for plans: 7,156 img/s against
            7,188 with 8 and no wait, benchmarks/h200_workers.sh), all cores but two
            for the CPU one.
            The processes are spawned, so the program's main module must be safe to
            import (its work under `if __name__ == "__main__":`).
        write: "direct" (nvImageCodec decodes into the canvas) or "copy".
        decoder_options: nvImageCodec decoder options (None: decoders.decoder_options,
            buffers preallocated for the batch and the largest canvas).
        high_priority: the decoders are handed a CUDA stream of the highest priority
            (they run their kernels on streams of their own: no difference measured).
        decoders: batches decoded at the same time (lanes), each with its own decoder,
            stream and canvases per device. None: 6 with api "nvjpeg" (measured on an
            H200 under training: 7,010 img/s with 6 lanes), 3 with nvImageCodec, 1
            for the CPU.
        hw_share: with backend "hw+cuda", the hardware engines' first share of each
            batch (nvImageCodec then adapts it; the CUDA decoder takes the rest).
        api: how the GPU decoder is called, decoders.APIS: "nvjpeg" (nvJPEG's
            hardware decoder called directly, preprocessing/gpu/native/nvjpeg_c.py; backend "hw"
            only), "c" (nvImageCodec's C API, preprocessing/gpu/native/nvimgcodec_c.py: no GIL
            take per image, no cudaFree waiting for the GPU), or "python" (its Python
            binding). None: "nvjpeg" with backend "hw" (the fastest measured, 0.93 of
            synthetic data against 0.84 for "c" in the same call), falling back to "c"
            with nvImageCodec's own choice of backend on a GPU without JPEG engines;
            "c" with the other backends.
        read_in: where the GPU decoder's input bytes are read: "shared" (the
            planning processes, which read each file for its header anyway, write
            them into shared memory, preprocessing/gpu/native/shared_bytes.py), "workers" (they
            send them with the plan, through the process pool's pipe: on an H200 host
            29 ms of this process's CPU a batch of 256, at most 33 batches a second,
            against 0.5 ms through shared memory) or "stream" (a thread of this
            process reads each file again). None: "shared" with api "nvjpeg" ("workers"
            without planning processes: the bytes are here already); the nvImageCodec
            APIs read their files themselves ("stream").
        warm_up: with api "nvjpeg", files drawn (from the seed) to warm nvJPEG's
            hardware decoders up before their first batch: each decodes batches of
            made-up JPEGs as large as the largest of these (sides up to twice the
            largest canvas side), per chroma layout, so it grows its buffers then and
            not in training (jpeg_plan.warm_up_jpegs; on an H200 without it nvJPEG
            freed and allocated memory in 65 of the first epoch's 80 batches, and the
            training step waited for those frees). A failed warm-up warns; training
            goes on. 0: none.

    Attributes:
        warmed: with the GPU decoder, a Future of the compiles of the step for every
            canvas shape, started when the stream is made (None with decoder "cpu").
        devices: this process's devices, in the order of their slices; without a
            sharding, the default device, and the batches are uncommitted there.
    """

    def __init__(self, records, batch_size: int, image_size: int, seed: int | None,
                 train: bool, dtype: str = "float32", sharding=None, decoder: str = "auto",
                 prefetch: int = 3, roi: bool = True, backend: str = "hw",
                 canvas_sides=CANVAS_SIDES, workers: int | None = None,
                 write: str = "direct", decoder_options: str | None = None,
                 high_priority: bool = True, decoders: int | None = None,
                 hw_share: float = 0.75, api: str | None = None,
                 read_in: str | None = None, warm_up: int = 1024):
        import jax

        self.records = [(str(path), int(label)) for path, label in records]
        if not self.records:
            raise ValueError("records is empty: there is nothing to read")
        if batch_size < 1 or image_size < 1 or prefetch < 1:
            raise ValueError(f"batch_size, image_size and prefetch must be >= 1, got "
                             f"{batch_size}, {image_size}, {prefetch}")
        if train and len(self.records) < batch_size:
            raise ValueError(f"{len(self.records)} training records cannot fill one batch of "
                             f"{batch_size} (the last partial batch is dropped)")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if not 0.0 < hw_share <= 1.0:
            raise ValueError(f"hw_share must be in (0, 1], got {hw_share}")
        if api is not None and api not in APIS:
            raise ValueError(f"api must be one of {APIS}, got {api!r}")
        if api == "nvjpeg" and backend != "hw":
            raise ValueError(f"api='nvjpeg' drives the hardware JPEG engines only: backend "
                             f"must be 'hw', got {backend!r}")
        self.canvas_sides = tuple(sorted(int(s) for s in canvas_sides))
        if image_size > self.canvas_sides[-1]:
            raise ValueError(f"image_size {image_size} exceeds the largest canvas side "
                             f"{self.canvas_sides[-1]}")
        self.batch_size, self.image_size, self.train = batch_size, image_size, train
        self.dtype, self.prefetch = dtype, prefetch
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self.sharding = sharding
        self.devices, self._global_batch = self._local_devices(jax, sharding)
        # Without a sharding the batches stay uncommitted (on the default device), as
        # Keras's state is: a committed batch would commit the state the first step
        # returns, and every change of commitment (that step; the metrics reset at
        # each epoch's end) makes JAX compile the training step again (ResNet-50 on
        # an H200: ~10 s each, measured).
        self._commit = sharding is not None
        self.per_device = batch_size // len(self.devices)
        if self.per_device * self.canvas_sides[-1] ** 2 >= 2**31:
            raise ValueError(f"{self.per_device} images per device of canvases up to "
                             f"{self.canvas_sides[-1]}^2 overflow int32 indices; lower "
                             "canvas_sides or the batch")
        api_chosen = api is None
        if api is None:
            api = "nvjpeg" if backend == "hw" else "c"
        self.decoder = self._pick_decoder(decoder, api)
        self.steps_per_epoch = len(self.records) // batch_size if train else 0
        self.num_batches = -(-len(self.records) // batch_size) if not train else 0
        self._spec = PlanSpec(seed=self.seed, train=train, roi=roi,
                              max_side=self.canvas_sides[-1], image_size=image_size,
                              gpu=self.decoder == "nvimgcodec", hw_only=backend == "hw")
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)  # the cores this process may use
        if workers is None:
            workers = (min(8, max(1, cores // 2)) if self.decoder == "nvimgcodec"
                       else max(1, cores - 2))
        self.workers = workers
        if decoders is None:
            decoders = 1 if self.decoder == "cpu" else 6 if api == "nvjpeg" else 3
        if decoders < 1:
            raise ValueError(f"decoders must be >= 1, got {decoders}")
        self.decoders = decoders
        self._step = canvas_step(image_size, dtype)
        try:
            first = self._make_fillers(backend, write, decoder_options, high_priority,
                                       hw_share, api)
        except (RuntimeError, ImportError) as e:
            if not (api_chosen and api == "nvjpeg" and self.decoder == "nvimgcodec"):
                raise
            # No JPEG engines (or no nvJPEG library): nvImageCodec decodes, with CUDA.
            warnings.warn(f"nvJPEG's hardware decoder is unavailable ({e}); decoding with "
                          "nvImageCodec's C API instead", RuntimeWarning, stacklevel=2)
            api, backend = "c", "default"
            first = self._make_fillers(backend, write, decoder_options, high_priority,
                                       hw_share, api)
        self.api = api
        if read_in not in (None, "shared", "workers", "stream"):
            raise ValueError(f"read_in must be 'shared', 'workers' or 'stream', got {read_in!r}")
        if read_in in ("shared", "workers") and api != "nvjpeg":
            raise ValueError(f"read_in={read_in!r} needs api='nvjpeg' (nvImageCodec's {api!r} "
                             "API reads its files itself)")
        if read_in == "shared" and not workers:
            raise ValueError("read_in='shared' needs planning processes (workers >= 1)")
        if read_in is None:
            read_in = ("shared" if workers else "workers") if api == "nvjpeg" else "stream"
        self.read_in = read_in
        carry = self.read_in in ("shared", "workers") and self.decoder == "nvimgcodec"
        self._spec = dataclasses.replace(self._spec, keep_bytes=carry)
        self._blocks = None  # shared_bytes.Blocks with read_in "shared"
        if carry and self.read_in == "shared":
            # A block per batch from its planning to its decode: those being planned
            # (background.Running._planning), waiting, being decoded, and one spare.
            wanted = max(2, 2 * workers) + prefetch + 2 * decoders + 1
            self._blocks = Blocks(wanted, _block_bytes(batch_size))
            warn_if_short(self._blocks, wanted)
            weakref.finalize(self, self._blocks.close)
        self._warm_jpegs = None  # a Future of warm_up_jpegs' JPEGs, api "nvjpeg" only
        if self.api == "nvjpeg" and self.decoder == "nvimgcodec" and warm_up > 0:
            rng = np.random.default_rng([self.seed, 3])
            picks = rng.choice(len(self.records), min(warm_up, len(self.records)), replace=False)
            paths = [self.records[i][0] for i in sorted(picks)]
            cap = 2 * self.canvas_sides[-1]
            if workers:
                self._warm_jpegs = process_pool(workers).submit(warm_up_jpegs, paths, cap)
            else:
                self._warm_jpegs = concurrent.futures.Future()
                self._warm_jpegs.set_result(warm_up_jpegs(paths, cap))
        self._lanes = [first] + [self._make_fillers(backend, write, decoder_options,
                                                    high_priority, hw_share, api)
                                 for _ in range(decoders - 1)]
        self._fillers = [filler for lane in self._lanes for filler in lane]
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max(len(self.devices) * decoders, 4), thread_name_prefix="jpeg")
        self._cpu_threads = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="jpeg_cpu")
        self._skipped: set[str] = set()  # paths
        self._permutation = (None, None)  # (epoch, order)
        self._position = (0, 0)  # the next batch the consumer gets
        self._running = None
        # Compile the step for every canvas shape now, beside whatever the program does
        # next (fit compiles the model): a shape first met in training would hold
        # that batch, and so training, for the compile (0.2-0.5 s on an H200).
        self.warmed = (self._threads.submit(self._compile_steps)
                       if self.decoder == "nvimgcodec" else None)

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
        self._spec = dataclasses.replace(self._spec, seed=self.seed)
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
            self._running = Running(self, self._position)
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

    def _local_devices(self, jax, sharding):
        """This process's devices in the order of their slices of the batch."""
        if sharding is None:  # the default device: where Keras keeps the model's state
            return list(jax.device_put(np.zeros((), np.int32)).devices()), self.batch_size
        global_batch = self.batch_size * jax.process_count()
        shape = (global_batch, self.image_size, self.image_size, 3)
        starts = {}
        for device, index in sharding.addressable_devices_indices_map(shape).items():
            rows = index[0]
            start, stop = rows.start or 0, global_batch if rows.stop is None else rows.stop
            if stop - start == global_batch and len(sharding.device_set) > 1:
                raise ValueError(f"sharding {sharding} does not split the batch axis")
            starts[device] = start
        devices = sorted(starts, key=starts.get)
        if self.batch_size % len(devices):
            raise ValueError(f"batch_size {self.batch_size} is not divisible by this "
                             f"process's {len(devices)} devices")
        return devices, global_batch

    def _pick_decoder(self, decoder: str, api: str) -> str:
        from preprocessing.gpu import decoders

        on_gpu = all(d.platform == "gpu" for d in self.devices)
        if decoder == "auto":
            return "nvimgcodec" if on_gpu and decoders.nvimgcodec_available() else "cpu"
        if decoder == "nvimgcodec":
            if not on_gpu and api != "c":  # nvImageCodec's C API can use its CPU backend
                raise ValueError(f"decoder='nvimgcodec' needs GPU devices, got "
                                 f"{self.devices[0].platform}")
            if not decoders.nvimgcodec_available():
                raise ValueError("decoder='nvimgcodec' but nvidia.nvimgcodec does not import "
                                 "(pip install nvidia-nvimgcodec-cu13 nvidia-nvjpeg)")
        return decoder

    def _make_fillers(self, backend: str, write: str, options, high_priority: bool,
                      hw_share: float, api: str):
        if self.decoder == "cpu":
            return [_HostCanvases(d, self._commit) for d in self.devices]
        from preprocessing.gpu.decoders import NvImageCodecCanvases, decoder_options

        # Canvases kept per shape and lane: the batches a lane can have in flight (made
        # ahead of the consumer, shared by the lanes), plus the one it is making.
        keep = math.ceil((self.prefetch + self.decoders) / self.decoders) + 1
        if options is None:
            options = decoder_options(self.per_device, self.canvas_sides[-1])
        return [NvImageCodecCanvases(d, backend=backend, write=write, keep=keep,
                                     options=options, high_priority=high_priority,
                                     hw_share=hw_share, api=api,
                                     preallocate=(self.per_device, self.canvas_sides[-1]),
                                     commit=self._commit)
                for d in self.devices]

    def _compile_steps(self) -> int:
        """Runs the step once on a zero canvas of each shape and device (freed after);
        returns the number of shapes run."""
        import jax.numpy as jnp

        count = self.per_device
        for device in self.devices:
            for side in self.canvas_sides:
                canvas = jnp.zeros((count, side, side, 3), jnp.uint8,
                                   device=device if self._commit else None)
                boxes = np.tile(np.array([0, 0, side, side], np.int32), (count, 1))
                images, _ = self._step(canvas, np.arange(count, dtype=np.int32), boxes,
                                       np.zeros(count, bool), np.ones(count, bool))
                images.block_until_ready()
                del canvas, images
        return len(self.devices) * len(self.canvas_sides)

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
        if self.workers:
            block = self._blocks.acquire() if self._blocks is not None else None
            name = None if block is None else self._blocks.name(block)
            return records, process_pool(self.workers).submit(
                plan_batch, paths, position, self._spec, name), block
        done = concurrent.futures.Future()
        done.set_result(plan_batch(paths, position, self._spec))
        return records, done, None

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

    # ---- the device side -------------------------------------------------------------

    def _bucket(self, extent: int) -> int:
        for side in self.canvas_sides:
            if extent <= side:
                return side
        raise AssertionError(f"content of {extent} px beyond the canvas cap")  # planned away

    def _materialize(self, parts, lane: int = 0):
        """A planned batch as device arrays (decoded by `lane`'s decoders); None if a
        device got no image at all."""
        import jax

        fillers = self._lanes[lane]
        if len(parts) == 1:
            results = [self._device_batch(fillers[0], parts[0])]
        else:  # each GPU decodes its slice at the same time (the decodes release the GIL)
            results = list(self._threads.map(self._device_batch, fillers, parts))
        if any(result is None for result in results):
            return None
        outputs = [r[0] for r in results]
        labels = np.concatenate([r[1] for r in results])
        weights = np.concatenate([r[2] for r in results])
        if self.sharding is None:
            images = outputs[0]
            labels, weights = jax.device_put(labels), jax.device_put(weights)
        else:
            shape = (self._global_batch, self.image_size, self.image_size, 3)
            images = jax.make_array_from_single_device_arrays(shape, self.sharding, outputs)
            rows = jax.sharding.NamedSharding(self.sharding.mesh,
                                              jax.sharding.PartitionSpec(self.sharding.spec[0]))
            labels = jax.make_array_from_process_local_data(rows, labels)
            weights = jax.make_array_from_process_local_data(rows, weights)
        return (images, labels) if self.train else (images, labels, weights)

    def _cpu_fallback(self, slot):
        pixels = host_window(host_decode(read_file(self.records[slot.record][0])),
                             slot.window, self._spec)
        return slot, pixels

    def _warm(self, filler) -> None:
        """Warms `filler`'s decoder up (from its lane's thread, before its first batch)."""
        try:
            jpegs = self._warm_jpegs.result()
        except Exception as e:  # noqa: BLE001 - the warm-up only saves time
            warnings.warn(f"nvJPEG's warm-up images could not be made ({e!r}); its buffers "
                          "will grow while training instead", RuntimeWarning, stacklevel=2)
            filler.warmed_up = True
            return
        filler.warm(list(jpegs.values()))

    def _device_batch(self, filler, slots):
        """One device's slice: fill its canvas, then the compiled crop/resize step."""
        if self._warm_jpegs is not None and not filler.warmed_up:
            self._warm(filler)
        # Square canvases: fewer shapes, so fewer compiles and more canvases reused.
        side = self._bucket(max(max(s.content) for s in slots))
        canvas, targets, failed = filler.fill((len(slots), side, side, 3), slots)
        if failed:  # what the GPU could not decode, the CPU decodes into the same slot
            # Their own threads: every thread of _threads may be in here, waiting.
            for slot, pixels in self._cpu_threads.map(self._cpu_fallback, failed):
                if pixels is None or max(pixels.shape[:2]) > side:
                    slot.route = "bad"
                    self._skipped.add(self.records[slot.record][0])
                else:
                    slot.route, slot.pixels = "host", pixels
                    slot.box = (0, 0, pixels.shape[0], pixels.shape[1])
            filler.fill_host(canvas, [s for s in failed if s.route == "host"])
        good = [s.index for s in slots if s.route != "bad"]
        if self.train and not good:
            filler.release(canvas, None, targets)
            return None
        sources = np.arange(len(slots), dtype=np.int32)
        labels = np.array([s.label for s in slots], np.int32)
        boxes = np.array([s.box for s in slots], np.int32)
        flips = np.array([s.flip for s in slots], bool)
        valid = np.array([s.route != "bad" for s in slots], bool)
        for i, slot in enumerate(slots):
            if slot.route == "bad" and self.train:
                # The next good image of this device stands in: its pixels and label.
                j = min(good, key=lambda g: (g - i) % len(slots))
                sources[i], labels[i], boxes[i], flips[i], valid[i] = (
                    j, labels[j], boxes[j], flips[j], True)
            elif slot.route == "bad":
                labels[i] = 0
        weights = valid.astype(np.float32)
        images, done = self._step(canvas, sources, boxes, flips, valid)
        filler.release(canvas, done, targets)
        return images, labels, weights


def _block_bytes(batch_size: int) -> int:
    """A batch's shared-memory block: 160 KiB an image (ImageNet's JPEGs: 110 KB on
    average; files beyond a full block take the pipe), whole MiB."""
    return -(-batch_size * 160 * 1024 // 2**20) * 2**20


class _HostCanvases:
    """Canvases built in host memory from CPU-decoded images, then sent to the device."""

    def __init__(self, device, commit: bool = True):
        self.device, self.commit = device, commit

    def code_stream_or_none(self, path, region, data=None):
        return None

    def fill(self, shape, slots):
        import jax

        canvas = np.zeros(shape, np.uint8)
        for slot in slots:
            if slot.route == "host":
                h, w = slot.pixels.shape[:2]
                canvas[slot.index, :h, :w] = slot.pixels
        return jax.device_put(canvas, self.device if self.commit else None), None, []

    def fill_host(self, canvas, slots):
        raise AssertionError("the host canvases never leave an image undecoded")

    def release(self, canvas, done, targets):
        pass
