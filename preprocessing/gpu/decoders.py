"""The canvases a batch is decoded into, one class per decoder; `make_canvases` picks.

A batch's canvas is one uint8 jax.Array [B, side, side, 3] on one device: image i
in slot i from its top-left corner, rows of side * 3 bytes. The decoders write the
slots in place, nothing is copied:
- NvjpegCanvases (api "nvjpeg", the default): nvJPEG's hardware batched decoder
  (native/nvjpeg_c.py) writes each image's window at the canvas's row pitch; a batch
  it refuses for one image is split in halves (`decode_bisecting`).
- NvImageCodecCanvases (api "c"): nvImageCodec's C API (native/nvimgcodec_c.py)
  decodes into images made per batch over each slot; on a CPU device its CPU
  backend decodes into the host canvas (how the CPU tests run this path).
- HostCanvases (decoder "cpu"): the canvas is made in host memory from the CPU's
  decodes and put on the device.
Images the GPU does not decode are decoded on the CPU by the stream and copied into
their slots (cuMemcpy2DAsync from host memory).

Synchronization: a canvas is allocated by XLA once and waited for (block_until_ready)
before anything writes to it, then reused batch after batch: it is written again only
after the compiled step that read it last has finished (its `done` output is ready).
Decodes and copies run on this decoder's own non-blocking CUDA stream, synchronized
before the canvas is handed to the step, so the step sees every byte. JAX does not
know the canvas was written behind its back; that is safe because only this module
holds the buffer, and no computation that reads it is in flight while it is written.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from preprocessing.gpu.native.cuda_driver import CudaDriver
from preprocessing.gpu.native.host_memory import host_array
from preprocessing.gpu.options import BACKENDS, GpuOptions


def nvimgcodec_available() -> bool:
    try:
        import nvidia.nvimgcodec  # noqa: F401
    except Exception:  # ImportError, or its shared libraries failing to load
        return False
    return True


def backend_plan(backend: str) -> list[tuple[str, float]]:
    """The nvImageCodec backends a BACKENDS name allows, each with its share of a
    batch; [] lets nvImageCodec pick."""
    return {"default": [], "hw": [("hw", 1.0)]}[backend]
# Fancy (smooth) chroma upsampling, as libjpeg-turbo and so TensorFlow do it.
DECODER_OPTIONS = ":fancy_upsampling=1"


def decoder_options(batch_size: int, max_side: int) -> str:
    """DECODER_OPTIONS plus buffers allocated once for the largest batch and image.

    Without them nvJPEG sizes its buffers per batch (its hardware decoder defaults
    to a batch of 1); a cudaFree synchronizes the whole device, so decoding would
    wait for the training steps queued on the GPU instead of overlapping them.
    (DALI passes the same options to nvImageCodec for this reason.)
    """
    return (f"{DECODER_OPTIONS} nvjpeg_cuda_decoder:preallocate_buffers=1 "
            f"nvjpeg_hw_decoder:preallocate_batch_size={batch_size} "
            f"nvjpeg_hw_decoder:preallocate_width_hint={max_side} "
            f"nvjpeg_hw_decoder:preallocate_height_hint={max_side}")


def decode_bisecting(decode, items: list) -> tuple[list, int]:
    """Runs decode(part) -> bool (False: the whole part refused, as nvJPEG's batched
    decoder refuses a batch for one bad image) on `items`, then on each half of a
    refused part, down to single items. Returns (the items refused alone, calls made):
    one bad image among n costs about 2 log2(n) calls, not n images on the CPU."""
    refused, calls, parts = [], 0, [list(items)]
    while parts:
        part = parts.pop()
        calls += 1
        if decode(part):
            continue
        if len(part) == 1:
            refused += part
        else:
            parts += [part[len(part) // 2:], part[:len(part) // 2]]
    return refused, calls


def make_canvases(device, options: GpuOptions, per_device: int, commit: bool):
    """One lane's canvases of `device` for the stream's resolved `options` (images of
    up to `per_device` a batch): the one place a decoder is chosen."""
    if options.decoder == "cpu":
        return HostCanvases(device, commit)
    # Canvases kept per shape and lane: the batches a lane can have in flight (made
    # ahead of the consumer, shared by the lanes), plus the one it is making.
    keep = math.ceil((options.prefetch + options.decoders) / options.decoders) + 1
    side = options.canvas_sides[-1]
    if options.api == "nvjpeg":
        return NvjpegCanvases(device, keep=keep, preallocate=(per_device, side), commit=commit)
    return NvImageCodecCanvases(device, backend=options.backend, keep=keep,
                                options=decoder_options(per_device, side), commit=commit)


def _write_pixels(canvas: np.ndarray, slots) -> None:
    """Each host-decoded slot's pixels into its slot of a canvas in host memory."""
    for slot in slots:
        h, w = slot.pixels.shape[:2]
        canvas[slot.index, :h, :w] = slot.pixels


def _geometry(canvas) -> tuple[int, int, int]:
    """(the address of slot 0, bytes a slot, bytes a row) of a canvas."""
    _, height, width, _ = canvas.shape
    return canvas.unsafe_buffer_pointer(), height * width * 3, width * 3


class HostCanvases:
    """decoder "cpu": each batch's canvas made in host memory from the CPU's decodes,
    then put on the device."""

    def __init__(self, device, commit: bool = True):
        self.device, self.commit = device, commit

    def code_stream_or_none(self, path, region=None, data=None):
        return None

    def fill(self, shape, slots):
        import jax

        canvas = np.zeros(shape, np.uint8)
        _write_pixels(canvas, [s for s in slots if s.route == "host"])
        return jax.device_put(canvas, self.device if self.commit else None), []

    def fill_host(self, canvas, slots):
        raise AssertionError("the host canvases never leave an image undecoded")

    def release(self, canvas, done):
        pass


class DeviceCanvases:
    """The canvases of one device, filled by a decoder (a subclass's `code_stream`
    and `_decode`) and by copies of CPU decodes.

    Canvases are reused: one goes back to the pool with the `done` marker of the
    step that reads it, and is written again only once that step has run. (A fresh
    canvas per batch would wait for its zero fill, which XLA queues behind every
    training step already dispatched.)

    Args:
        device: the jax Device.
        keep: canvases kept per shape for reuse (the batches in flight).
        commit: the canvases are committed to `device`; False (only for the default
            device): uncommitted, and so are the images the step makes of them.
    """

    def __init__(self, device, keep: int = 4, commit: bool = True):
        self.device, self.keep, self.commit = device, keep, commit
        self.on_gpu = device.platform == "gpu"
        self.cuda = self.ordinal = self.stream = None
        if self.on_gpu:
            hardware_id = getattr(device, "local_hardware_id", None)  # the CUDA ordinal
            self.ordinal = int(device.id if hardware_id is None else hardware_id)
            self.cuda = CudaDriver.get()
            self.cuda.use(self.ordinal)
            # The highest priority: the decoders run their kernels on streams of their
            # own, so it made no difference measured (2026-12-01-h200-nvjpeg.json at 35cc76c call3).
            self.stream, _ = self.cuda.new_stream(high_priority=True)
        self.free = {}  # canvas shape -> [(canvas, done)], oldest first
        self.allocations = 0  # canvases made (each waits for XLA's queue once)
        self.decoded = 0  # images the decoder decoded (the others: the CPU, or skipped)

    def code_stream(self, path: str, region=None, data=None):
        """What the decoder is handed for the file's `region` (y, x, h, w); raises
        where it refuses the file."""
        raise NotImplementedError

    def _decode(self, canvas, slots) -> list:
        """Decodes the gpu slots into `canvas`, synchronized; returns those it refused."""
        raise NotImplementedError

    def code_stream_or_none(self, path: str, region=None, data=None):
        """code_stream(), or None where the decoder refuses the file (CPU decodes it)."""
        try:
            return self.code_stream(path, region, data)
        except Exception:  # noqa: BLE001 - any refusal sends the image to the CPU
            return None

    def _acquire(self, shape):
        import jax.numpy as jnp

        pool = self.free.get(tuple(shape))
        if pool:
            canvas, done = pool.pop(0)
            if done is not None:
                done.block_until_ready()
            return canvas
        canvas = jnp.zeros(shape, jnp.uint8, device=self.device if self.commit else None)
        # XLA's zero fill must land before our writes. It is queued behind every step
        # already dispatched, so this waits for the GPU to drain: it happens once per
        # canvas, never per batch (the pools below keep each shape's canvases).
        canvas.block_until_ready()
        self.allocations += 1
        return canvas

    def release(self, canvas, done) -> None:
        """Gives a canvas back once the step reading it is dispatched (done: its marker)."""
        # One pool per shape: batches alternate between canvas buckets, and a pool
        # shared by all shapes would drop one bucket's canvases for another's, so
        # each return to that bucket allocated again and waited for the GPU to drain.
        pool = self.free.setdefault(tuple(canvas.shape), [])
        pool.append((canvas, done))
        del pool[:-self.keep]  # dropping a canvas is safe: JAX frees it once unused

    def fill(self, shape, slots):
        """A canvas of `shape` with every gpu- and host-route slot written into it.

        Returns:
            (canvas, the gpu slots that did not decode: the caller decodes them on the
            CPU and hands them to `fill_host`).
        """
        self._use()
        canvas = self._acquire(shape)
        gpu = [s for s in slots if s.route == "gpu" and s.code_stream is not None]
        failed = [s for s in slots if s.route == "gpu" and s.code_stream is None]
        if gpu:
            failed += self._decode(canvas, gpu)
        self._copy_host(canvas, [s for s in slots if s.route == "host"])
        return canvas, failed

    def fill_host(self, canvas, slots) -> None:
        self._use()
        self._copy_host(canvas, slots)

    def _use(self) -> None:
        if self.on_gpu:
            self.cuda.use(self.ordinal)

    def _synchronize(self) -> None:
        if self.on_gpu:
            self.cuda.synchronize(self.stream)

    def _copy_host(self, canvas, slots) -> None:
        if not slots:
            return
        if not self.on_gpu:  # the canvas is host memory: write it in place
            _write_pixels(host_array(canvas.unsafe_buffer_pointer(), canvas.shape), slots)
            return
        base, slot_bytes, pitch = _geometry(canvas)
        for slot in slots:
            h, w = slot.pixels.shape[:2]
            self.cuda.copy_2d(base + slot.index * slot_bytes, pitch, slot.pixels, w * 3,
                              w * 3, h, self.stream)
        self.cuda.synchronize(self.stream)


class NvjpegCanvases(DeviceCanvases):
    """api "nvjpeg": nvJPEG's hardware decoder called directly (native/nvjpeg_c.py; the
    fastest measured), the GPU's JPEG engines only.

    Args: as DeviceCanvases', and
        preallocate: (images, side) nvJPEG's buffers are made for up front.
    """

    def __init__(self, device, keep: int = 4, preallocate=(256, 1024), commit: bool = True):
        if device.platform != "gpu":
            raise ValueError(f"api='nvjpeg' decodes on GPUs only, got a {device.platform} "
                             "device (api='c' can decode on the CPU)")
        super().__init__(device, keep, commit)
        self.refused_batches = 0  # batches nvJPEG refused (then bisected)
        self.warmed_up = False  # warm() ran
        from preprocessing.gpu.native.nvjpeg_c import HardwareDecoder

        self.decoder = HardwareDecoder(*preallocate)

    def code_stream(self, path: str, region=None, data=None):
        """The file's bytes (`data`, or read now) and the region."""
        if data is None:
            with open(path, "rb") as f:
                data = f.read()
        return data, region

    def _decode(self, canvas, slots) -> list:
        base, slot_bytes, pitch = _geometry(canvas)

        def decode(part):
            datas, regions = zip(*[s.code_stream for s in part])
            pointers = [base + s.index * slot_bytes for s in part]
            return self.decoder.decode(datas, regions, pointers, [pitch] * len(part),
                                       self.stream)

        refused, calls = decode_bisecting(decode, slots)
        self.decoded += len(slots) - len(refused)
        self.refused_batches += calls > 1
        self._synchronize()
        return refused  # the images nvJPEG refuses alone: the CPU decodes them

    def warm(self, jpegs) -> bool:
        """Has nvJPEG's hardware decoder grow its buffers now for batches of `jpegs`
        (planning.warm_up_jpegs), once. Call it from the thread that decodes. Returns
        whether nvJPEG took them all."""
        if self.warmed_up:
            return True
        self.warmed_up = True  # once, whatever happens: it only saves time later
        self._use()
        try:
            scratch = self.cuda.alloc(self.decoder.warm_scratch_bytes())
            try:
                ok = self.decoder.warm(jpegs, scratch, self.stream)
            finally:
                self.cuda.free(scratch)
            if not ok:  # e.g. no device memory for its buffers
                warnings.warn("nvJPEG refused a warm-up batch; its buffers will grow while "
                              "training instead", RuntimeWarning, stacklevel=2)
            return ok
        except RuntimeError as e:  # e.g. out of device memory: train without it
            warnings.warn(f"nvJPEG's warm-up failed ({e}); its buffers will grow while "
                          "training instead", RuntimeWarning, stacklevel=2)
            return False


class NvImageCodecCanvases(DeviceCanvases):
    """api "c": nvImageCodec's C API (native/nvimgcodec_c.py): one GIL release per
    batch, and the decoder's memory from pools that never free, so no cudaFree waits
    for the GPU. On a CPU device nvImageCodec's CPU backend (libjpeg-turbo) decodes
    into the host canvas.

    Args: as DeviceCanvases', and
        backend: "default" (nvImageCodec picks: the hardware JPEG engines, then
            CUDA), "hw" (the hardware engines only, no SMs; what they refuse is
            decoded on the CPU).
        options: nvImageCodec decoder options (space-separated, see its docs: e.g.
            "nvjpeg_hw_decoder:preallocate_width_hint=768 ...").
    """

    def __init__(self, device, backend: str = "default", options: str = DECODER_OPTIONS,
                 keep: int = 4, commit: bool = True):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        super().__init__(device, keep, commit)
        from preprocessing.gpu.native import nvimgcodec_c

        if not self.on_gpu:
            self.decoder = nvimgcodec_c.Decoder(nvimgcodec_c.CPU_ONLY_DEVICE, [("cpu", 1.0)],
                                                options)
            return
        self.device_pool, self.pinned_pool = self._pool(False), self._pool(True)
        self.decoder = nvimgcodec_c.Decoder(self.ordinal, backend_plan(backend),
                                            options, self.device_pool, self.pinned_pool)

    def _pool(self, pinned: bool):
        """A memory pool of this GPU (pinned host memory, or device memory) for a
        decoder's allocator: blocks never freed while it lives, reused in stream order."""
        from preprocessing.gpu.native.memory_pool import Pool

        def allocate(size):
            self.cuda.use(self.ordinal)  # called from the decoder's threads
            return self.cuda.alloc(size, pinned)

        def fence(stream):  # called from the decoder's threads, like the wait
            self.cuda.use(self.ordinal)
            wait = self.cuda.fence(stream)

            def waited():
                self.cuda.use(self.ordinal)
                wait()
            return waited

        return Pool(allocate, lambda pointer: self.cuda.free(pointer, pinned), fence)

    def code_stream(self, path: str, region=None, data=None):
        """A code stream of the file (read by nvImageCodec), limited to `region`."""
        stream = self.decoder.code_stream(path, region)
        if stream is None:
            raise ValueError(f"nvImageCodec cannot parse {path} as a JPEG")
        return stream

    def _decode(self, canvas, slots) -> list:
        base, slot_bytes, pitch = _geometry(canvas)
        images = [self.decoder.image(base + s.index * slot_bytes, *s.content, pitch,
                                     self.stream) for s in slots]
        decoded = self.decoder.decode([s.code_stream for s in slots], images)
        self.decoded += sum(decoded)
        self._synchronize()
        del images  # only once the stream has run: the decode wrote through them
        return [s for s, ok in zip(slots, decoded) if not ok]
