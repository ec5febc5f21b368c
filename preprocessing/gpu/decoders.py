"""Decode JPEGs with nvImageCodec straight into a slot of a device canvas.

A batch's canvas is one uint8 jax.Array [B, Hc, Wc, 3] on one GPU. Each slot i is
wrapped as an external nvImageCodec Image (its pointer, Hc rows, a row pitch of
Wc * 3 bytes) and handed to `Decoder.decode(..., images=slots)`: nvImageCodec 0.9
reuses an external buffer when the decoded image fits inside it, keeping the
buffer's row pitch (python/image.cpp, Image::reuse), so the image lands at (0, 0)
of its slot with no copy and nothing compiled. If a decoder ever returns an image
somewhere else, it is copied into the slot with cuMemcpy2DAsync (device to device);
images decoded on the CPU are copied in the same way from host memory.

Synchronization: a canvas is allocated by XLA once and waited for (block_until_ready)
before anything writes to it, then reused batch after batch: it is written again only
after the compiled step that read it last has finished (its `done` output is ready).
Decodes and copies run on this decoder's own non-blocking CUDA stream, synchronized
before the canvas is handed to the step, so the step sees every byte. JAX does not
know the canvas was written behind its back; that is safe because only this module
holds the buffer, and no computation that reads it is in flight while it is written.

With api="c" (preprocessing/gpu/native/nvimgcodec_c.py) the slots are images of nvImageCodec's
C API, made per batch for each image's window, and nothing is ever copied.
"""

from __future__ import annotations

import ctypes
import warnings

import numpy as np

from preprocessing.gpu.native.cuda_driver import CudaDriver


class _Slot:
    """A slot of the canvas as a __cuda_array_interface__ (no stream: we sync ourselves)."""

    def __init__(self, pointer: int, height: int, width: int):
        self.__cuda_array_interface__ = {
            "shape": (height, width, 3), "typestr": "|u1", "data": (pointer, False),
            "strides": None, "version": 2}


def nvimgcodec_available() -> bool:
    try:
        import nvidia.nvimgcodec  # noqa: F401
    except Exception:  # ImportError, or its shared libraries failing to load
        return False
    return True


BACKENDS = ("default", "hw", "hybrid", "hw+cuda")
APIS = ("python", "c", "nvjpeg")


def backend_plan(backend: str, hw_share: float) -> list[tuple[str, float]]:
    """The nvImageCodec backends a BACKENDS name allows, in order, each with its
    share of a batch (below 1: adapted batch by batch); [] lets nvImageCodec pick."""
    return {"default": [], "hw": [("hw", 1.0)], "hybrid": [("hybrid", 1.0)],
            "hw+cuda": [("hw", hw_share), ("hybrid", 1.0)]}[backend]
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


class NvImageCodecCanvases:
    """The canvases of one GPU, filled by nvImageCodec (and by copies of CPU decodes).

    Canvases are reused: one goes back to the pool with the `done` marker of the
    step that reads it, and is written again only once that step has run. (A fresh
    canvas per batch would wait for its zero fill, which XLA queues behind every
    training step already dispatched.) Each canvas keeps its slots wrapped as
    nvImageCodec Images, made once.

    Args:
        device: the jax Device.
        backend: "default" (nvImageCodec picks: the hardware JPEG engines, then
            CUDA), "hw" (the hardware engines only, no SMs; what they refuse is
            decoded on the CPU), "hybrid" (HYBRID_CPU_GPU: nvJPEG's CUDA decoder),
            "hw+cuda" (each batch split: `hw_share` of it to the hardware engines,
            the rest to the CUDA decoder, the split adapted batch by batch so
            neither waits for the other). (GPU_ONLY alone could not create a
            decoder on the H200, "Code: 7".)
        write: "direct" (decode into the slot) or "copy" (decode into nvImageCodec's
            own buffers, then a device-to-device copy into the slot).
        options: nvImageCodec decoder options (space-separated, see its docs: e.g.
            "nvjpeg_hw_decoder:preallocate_width_hint=768 ...").
        keep: canvases kept for reuse (the batches in flight).
        high_priority: hand the decoder a stream of the highest priority (see
            CudaDriver.new_stream: no difference measured).
        hw_share: with backend "hw+cuda", the hardware engines' first share of a batch.
        api: "python" (nvImageCodec's Python binding) or "c" (its C API through
            preprocessing/gpu/native/nvimgcodec_c.py: one GIL release per batch instead of a GIL
            take per image, and the decoder's memory from pools that never free, so no
            cudaFree waits for the GPU to drain; `write` does not apply). With "c" the
            device may be a CPU: nvImageCodec's CPU backend (libjpeg-turbo) then
            decodes into the host canvas (how the CPU tests run this path).
            "nvjpeg": no nvImageCodec, nvJPEG's hardware decoder called directly
            (preprocessing/gpu/native/nvjpeg_c.py; the fastest measured); backend must be "hw".
        preallocate: (images, side) nvJPEG's buffers are made for up front (api
            "nvjpeg"; the other APIs take the same from `options`).
        commit: the canvases are committed to `device`; False (only for the default
            device): uncommitted, and so are the images the step makes of them.
    """

    def __init__(self, device, backend: str = "default", write: str = "direct",
                 options: str = DECODER_OPTIONS, keep: int = 4, high_priority: bool = True,
                 hw_share: float = 0.75, api: str = "python", preallocate=(256, 1024),
                 commit: bool = True):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if write not in ("direct", "copy"):
            raise ValueError(f"write must be 'direct' or 'copy', got {write!r}")
        if api not in APIS:
            raise ValueError(f"api must be one of {APIS}, got {api!r}")
        self.device, self.write, self.keep, self.api = device, write, keep, api
        self.commit = commit
        self.on_gpu = device.platform == "gpu"
        if not self.on_gpu and api != "c":
            raise ValueError(f"api={api!r} decodes on GPUs only, got a {device.platform} "
                             "device (api='c' can decode on the CPU)")
        if api == "nvjpeg" and backend != "hw":
            raise ValueError(f"api='nvjpeg' drives the hardware JPEG engines only: backend "
                             f"must be 'hw', got {backend!r}")
        self.cuda = self.ordinal = self.stream = self.stream_priority = None
        if self.on_gpu:
            hardware_id = getattr(device, "local_hardware_id", None)  # the CUDA ordinal
            self.ordinal = int(device.id if hardware_id is None else hardware_id)
            self.cuda = CudaDriver.get()
            self.cuda.use(self.ordinal)
            self.stream, self.stream_priority = self.cuda.new_stream(high_priority)
        self.free = {}  # canvas shape -> [(canvas, done, slot images)], oldest first
        self.allocations = 0  # canvases made (each waits for XLA's queue once)
        self.copies = 0  # images that needed a device-to-device copy
        self.decoded = 0  # images nvImageCodec decoded (the others: the CPU, or skipped)
        self.direct_error = None  # why decoding straight into the canvas was given up
        self.refused_batches = 0  # api "nvjpeg": batches nvJPEG refused (then bisected)
        self.warmed_up = False  # api "nvjpeg": warm() ran
        if api == "c":
            self._make_c_decoder(backend, options, hw_share)
            return
        if api == "nvjpeg":
            from preprocessing.gpu.native.nvjpeg_c import HardwareDecoder

            self.decoder = HardwareDecoder(*preallocate)
            return
        from nvidia import nvimgcodec

        self.nv = nvimgcodec
        kinds = {"hw": nvimgcodec.BackendKind.HW_GPU_ONLY,
                 "hybrid": nvimgcodec.BackendKind.HYBRID_CPU_GPU}
        policy = nvimgcodec.LoadHintPolicy
        backends = [nvimgcodec.Backend(kinds[kind], load_hint=share, load_hint_policy=(
            policy.ADAPTIVE_MINIMIZE_IDLE_TIME if share < 1 else policy.FIXED))
            for kind, share in backend_plan(backend, hw_share)]
        self.decoder = nvimgcodec.Decoder(device_id=self.ordinal, backends=backends or None,
                                          options=options)
        self.params = nvimgcodec.DecodeParams(
            apply_exif_orientation=False,  # TensorFlow's decoders ignore EXIF too
            color_spec=nvimgcodec.ColorSpec.SRGB, allow_any_depth=False,
            sample_format=nvimgcodec.SampleFormat.I_RGB)

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

    def _make_c_decoder(self, backend: str, options: str, hw_share: float) -> None:
        from preprocessing.gpu.native import nvimgcodec_c

        if not self.on_gpu:
            self.decoder = nvimgcodec_c.Decoder(nvimgcodec_c.CPU_ONLY_DEVICE, [("cpu", 1.0)],
                                                options)
            return
        self.device_pool, self.pinned_pool = self._pool(False), self._pool(True)
        self.decoder = nvimgcodec_c.Decoder(self.ordinal, backend_plan(backend, hw_share),
                                            options, self.device_pool, self.pinned_pool)

    def code_stream(self, path: str, region=None, data: bytes | None = None):
        """A CodeStream of the file (read by nvImageCodec), limited to region (y, x, h, w);
        with api "nvjpeg" the file's bytes (`data`, or read now) and the region."""
        if self.api == "nvjpeg":
            if data is None:
                with open(path, "rb") as f:
                    data = f.read()
            return data, region
        if self.api == "c":
            stream = self.decoder.code_stream(path, region)
            if stream is None:
                raise ValueError(f"nvImageCodec cannot parse {path} as a JPEG")
            return stream
        stream = self.nv.CodeStream(path)
        if region is not None:
            y, x, h, w = region
            stream = stream.get_sub_code_stream(region=self.nv.Region(y, x, y + h, x + w))
        return stream

    def code_stream_or_none(self, path: str, region=None, data: bytes | None = None):
        """code_stream(), or None where nvImageCodec refuses the file (CPU decodes it)."""
        try:
            return self.code_stream(path, region, data)
        except Exception:  # noqa: BLE001 - any refusal sends the image to the CPU
            return None

    def _acquire(self, shape):
        import jax.numpy as jnp

        pool = self.free.get(tuple(shape))
        if pool:
            canvas, done, targets = pool.pop(0)
            if done is not None:
                done.block_until_ready()
            return canvas, targets
        canvas = jnp.zeros(shape, jnp.uint8, device=self.device if self.commit else None)
        # XLA's zero fill must land before our writes. It is queued behind every step
        # already dispatched, so this waits for the GPU to drain: it happens once per
        # canvas, never per batch (the pools below keep each shape's canvases).
        canvas.block_until_ready()
        self.allocations += 1
        if self.api != "python":  # images are made per batch (each slot's window differs)
            return canvas, None
        _, height, width, _ = shape
        base, slot_bytes = canvas.unsafe_buffer_pointer(), height * width * 3
        targets = [self.nv.as_image(_Slot(base + i * slot_bytes, height, width),
                                    cuda_stream=self.stream) for i in range(shape[0])]
        return canvas, targets

    def release(self, canvas, done, targets) -> None:
        """Gives a canvas back once the step reading it is dispatched (done: its marker)."""
        # One pool per shape: batches alternate between canvas buckets, and a pool
        # shared by all shapes would drop one bucket's canvases for another's, so
        # each return to that bucket allocated again and waited for the GPU to drain.
        pool = self.free.setdefault(tuple(canvas.shape), [])
        pool.append((canvas, done, targets))
        del pool[:-self.keep]  # dropping a canvas is safe: JAX frees it once unused

    def fill(self, shape, slots):
        """A canvas of `shape` with every gpu- and host-route slot written into it.

        Returns:
            (canvas, slot images, the gpu slots that did not decode: the caller
            decodes them on the CPU and hands them to `fill_host`).
        """
        self._use()
        canvas, targets = self._acquire(shape)
        _, height, width, _ = shape
        base, pitch = canvas.unsafe_buffer_pointer(), width * 3
        gpu = [s for s in slots if s.route == "gpu" and s.code_stream is not None]
        failed = [s for s in slots if s.route == "gpu" and s.code_stream is None]
        if gpu and self.api == "nvjpeg":
            def decode(part):
                datas, regions = zip(*[s.code_stream for s in part])
                pointers = [base + s.index * height * pitch for s in part]
                return self.decoder.decode(datas, regions, pointers, [pitch] * len(part),
                                           self.stream)

            refused, calls = decode_bisecting(decode, gpu)
            self.decoded += len(gpu) - len(refused)
            self.refused_batches += calls > 1
            failed += refused  # the images nvJPEG refuses alone: the CPU decodes them
            self._synchronize()
        elif gpu and self.api == "c":
            images = [self.decoder.image(base + s.index * height * pitch, *s.content, pitch,
                                         self.stream) for s in gpu]
            decoded = self.decoder.decode([s.code_stream for s in gpu], images)
            failed += [s for s, ok in zip(gpu, decoded) if not ok]
            self.decoded += sum(decoded)
            self._synchronize()
            del images
        elif gpu:
            streams = [s.code_stream for s in gpu]
            images = None
            if self.write == "direct":
                try:
                    images = self.decoder.decode(streams, images=[targets[s.index] for s in gpu],
                                                 params=self.params, cuda_stream=self.stream)
                except (ValueError, RuntimeError) as e:  # refuses external buffers
                    self.write, self.direct_error = "copy", str(e)
            if images is None:
                images = self.decoder.decode(streams, params=self.params, cuda_stream=self.stream)
            for slot, image in zip(gpu, images):
                h, w = slot.content
                if image is None or tuple(image.shape) != (h, w, 3):
                    failed.append(slot)
                    continue
                self.decoded += 1
                if image is targets[slot.index]:
                    continue
                interface = image.__cuda_array_interface__
                row = (interface.get("strides") or (w * 3,))[0]
                target = base + slot.index * height * pitch
                if interface["data"][0] != target or (h > 1 and row != pitch):
                    # Decoded elsewhere (copy mode): copy it into its slot.
                    self.cuda.copy_2d(target, pitch, interface["data"][0], row, w * 3, h,
                                      self.stream)
                    self.copies += 1
            # The decoded images (and nvImageCodec's buffers behind them) must live
            # until the copies that read them have run.
            self.cuda.synchronize(self.stream)
            del images
        self._copy_host(canvas, [s for s in slots if s.route == "host"])
        return canvas, targets, failed

    def fill_host(self, canvas, slots) -> None:
        self._use()
        self._copy_host(canvas, slots)

    def warm(self, jpegs) -> bool:
        """api "nvjpeg": has nvJPEG's hardware decoder grow its buffers now for batches
        of `jpegs` (jpeg_plan.warm_up_jpegs), once; the other APIs: nothing. Call it
        from the thread that decodes. Returns whether nvJPEG took them all."""
        if self.api != "nvjpeg" or self.warmed_up:
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
            view = np.ctypeslib.as_array(
                (ctypes.c_uint8 * canvas.size).from_address(canvas.unsafe_buffer_pointer()))
            view = view.reshape(canvas.shape)
            for slot in slots:
                h, w = slot.pixels.shape[:2]
                view[slot.index, :h, :w] = slot.pixels
            return
        _, height, width, _ = canvas.shape
        base, pitch = canvas.unsafe_buffer_pointer(), width * 3
        for slot in slots:
            h, w = slot.pixels.shape[:2]
            self.cuda.copy_2d(base + slot.index * height * pitch, pitch, slot.pixels, w * 3,
                              w * 3, h, self.stream)
        self.cuda.synchronize(self.stream)
