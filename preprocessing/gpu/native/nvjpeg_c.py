"""nvJPEG's hardware batched decoder through ctypes, into the caller's device memory.

What nvImageCodec (preprocessing/gpu/native/nvimgcodec_c.py, and its Python binding) calls for
the GPU's JPEG engines, called directly: `nvjpegDecodeBatchedEx` with each image's
region of interest, interleaved 8-bit RGB written at a row pitch into canvas slots,
buffers allocated once for the largest batch and image. Measured on an H200 while
ResNet-50 trains (benchmarks/results/2026-12-01-h200-nvjpeg.json at 35cc76c, call5): 0.93 of
synthetic data's images/sec against 0.84 through nvImageCodec's C API in the same
call; the engines alone decode ~17,000-19,000 img/s on an idle GPU (same file,
"decoding_under_contention").

What it needs around it (found on the way, same file): nvJPEG converts each decoded
image with a CUDA kernel on streams it makes itself, so the caller's stream and its
priority do not matter (measured: none), but the number of hardware queues does:
with CUDA's default 8 (CUDA_DEVICE_MAX_CONNECTIONS) those kernels share a queue with
XLA's and wait behind whole training steps; app/engine/environment.py sets 32.

Only what preprocessing/gpu/decoders.py needs. Signatures and structs follow `nvjpeg.h`
of nvidia-nvjpeg 13 (shipped in the wheel's include/).
"""

from __future__ import annotations

import ctypes
import os
import sys

from preprocessing.gpu.native.cuda_driver import ClosedWhenCollected, CudaDriver, LoadedOnce

BACKEND_HARDWARE = 3  # NVJPEG_BACKEND_HARDWARE
OUTPUT_RGBI = 5  # NVJPEG_OUTPUT_RGBI
CSS_444 = 0  # NVJPEG_CSS_444
FLAG_FANCY_UPSAMPLING = 1 << 5  # NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION (libjpeg's)
MAX_COMPONENT = 4
WARM_WINDOW = 64  # the window of each warm-up image decoded (HardwareDecoder.warm)
_NAME = "libnvjpeg.so.13"
_void_p, _size_t, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int


class NvjpegImage(ctypes.Structure):
    """nvjpegImage_t: a pointer and a row pitch per channel (RGBI uses channel 0)."""

    _fields_ = [("channel", _void_p * MAX_COMPONENT), ("pitch", _size_t * MAX_COMPONENT)]


def library_path() -> str | None:
    """libnvjpeg.so.13 of the installed nvidia-nvjpeg wheel (nvidia/cu13/lib on the
    path; `nvidia` may be a regular package of another wheel, so every path entry is
    looked at), else the name if the loader finds it (LD_LIBRARY_PATH), else None."""
    for entry in sys.path:
        path = os.path.join(entry or ".", "nvidia", "cu13", "lib", _NAME)
        if os.path.exists(path):
            return path
    try:
        ctypes.CDLL(_NAME)
    except OSError:
        return None
    return _NAME


class Library(LoadedOnce):
    """libnvjpeg, loaded once per process."""

    def __init__(self):
        path = library_path()
        if path is None:
            raise ImportError("nvidia-nvjpeg (libnvjpeg.so.13) is not installed")
        self.quick = ctypes.PyDLL(path)  # keeps the GIL: calls of microseconds
        self.slow = ctypes.CDLL(path)  # releases it: creating, decoding
        for lib in (self.quick, self.slow):
            for name in ("nvjpegCreateEx", "nvjpegJpegStateCreate", "nvjpegDecodeParamsCreate",
                         "nvjpegDecodeParamsSetROI", "nvjpegDecodeParamsSetOutputFormat",
                         "nvjpegDecodeBatchedInitialize", "nvjpegDecodeBatchedPreAllocate",
                         "nvjpegDecodeBatchedEx", "nvjpegSetDeviceMemoryPadding",
                         "nvjpegSetPinnedMemoryPadding",
                         "nvjpegDecodeParamsDestroy", "nvjpegJpegStateDestroy",
                         "nvjpegDestroy"):
                getattr(lib, name).restype = _int

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed: nvJPEG status {status}")


class HardwareDecoder(ClosedWhenCollected):
    """Batches of JPEGs decoded by the GPU's JPEG engines into caller memory.

    Must be created and used with the device's CUDA context current in the thread
    (nvJPEG uses the CUDA runtime, which takes the current context). One decoder per
    lane: its state is not shared between threads.

    Args:
        batch_size: the most images a batch holds (buffers are allocated for it).
        max_side: the image side nvjpegDecodeBatchedPreAllocate is given. It does not
            keep the hardware decoder from growing its buffers when a batch holds
            larger images than it has met (on an H200: 14 of 30 batches of 20,480
            ImageNet-sized JPEGs did, after preallocating 1,024;
            2026-12-01-h200-warm-up.json at 35cc76c call2); `warm` does.
        flags: nvjpegCreateEx's flags; the default, FLAG_FANCY_UPSAMPLING, upsamples
            chroma by interpolation, as libjpeg-turbo (and so TensorFlow and PIL) does.
        padding: bytes nvJPEG adds to each device and pinned buffer it allocates
            (nvjpegSet{Device,Pinned}MemoryPadding); 0: nvJPEG's default. 64 MiB did
            not make the hardware decoder grow its buffers less often (H200, first
            epoch: 57 of 80 batches against 65; 2026-12-01-h200-warm-up.json at 35cc76c call1).

    Its memory is nvJPEG's own: nvjpegCreateExV2 accepts stream-ordered allocators
    with the hardware backend but never calls them (on an H200: no block asked for
    while creating, preallocating and decoding; 2026-12-01-h200-real-data-20k.json at 35cc76c,
    "nvjpeg_allocators_probe_call5"), so
    the pools the other decoders get (preprocessing/gpu/native/memory_pool.py) cannot be used.
    """

    def __init__(self, batch_size: int, max_side: int, flags: int = FLAG_FANCY_UPSAMPLING,
                 padding: int = 0):
        self.lib = Library.get()
        self.handle, self.state = _void_p(), _void_p()
        self.lib.check(self.lib.slow.nvjpegCreateEx(BACKEND_HARDWARE, None, None, flags,
                                                    ctypes.byref(self.handle)),
                       "nvjpegCreateEx(hardware)")
        if padding:
            for name in ("nvjpegSetDeviceMemoryPadding", "nvjpegSetPinnedMemoryPadding"):
                self.lib.check(getattr(self.lib.quick, name)(_size_t(padding), self.handle),
                               name)
        self.lib.check(self.lib.slow.nvjpegJpegStateCreate(self.handle, ctypes.byref(self.state)),
                       "nvjpegJpegStateCreate")
        self.lib.check(self.lib.slow.nvjpegDecodeBatchedPreAllocate(
            self.handle, self.state, batch_size, max_side, max_side, CSS_444, OUTPUT_RGBI),
            "nvjpegDecodeBatchedPreAllocate")
        self.batch_size = batch_size
        self._params = []  # nvjpegDecodeParams_t, one per image of the largest batch
        self._grow_params(batch_size)
        self._batch = None  # the batch size the state is initialized for

    def _grow_params(self, count: int) -> None:
        while len(self._params) < count:
            params = _void_p()
            self.lib.check(self.lib.quick.nvjpegDecodeParamsCreate(self.handle,
                                                                   ctypes.byref(params)),
                           "nvjpegDecodeParamsCreate")
            self._params.append(params)
            self.lib.check(self.lib.quick.nvjpegDecodeParamsSetOutputFormat(params, OUTPUT_RGBI),
                           "nvjpegDecodeParamsSetOutputFormat")

    def decode(self, datas, regions, pointers, pitches, stream: int) -> bool:
        """Queues the decode of datas[i] (a JPEG file's bytes), limited to regions[i]
        ((y, x, h, w) or None: all of it), into pointers[i] (device memory, pitches[i]
        bytes a row) on `stream`; the caller synchronizes the stream. Returns False
        if nvJPEG refused the batch (then nothing is known to be written)."""
        count = len(datas)
        if count == 0:
            return True
        self._grow_params(count)
        quick = self.lib.quick
        if self._batch != count:
            if self.lib.slow.nvjpegDecodeBatchedInitialize(self.handle, self.state, count, 1,
                                                          OUTPUT_RGBI) != 0:
                self._batch = None
                return False
            self._batch = count
        for params, region in zip(self._params, regions):
            y, x, h, w = region if region is not None else (0, 0, -1, -1)
            if quick.nvjpegDecodeParamsSetROI(params, x, y, w, h) != 0:
                return False
        # Pointers into the bytes, no copy: bytes, or shared_bytes.HostBytes (an address).
        data_array = (ctypes.c_char_p * count)(*[d if isinstance(d, bytes) else d.address
                                                 for d in datas])
        length_array = (_size_t * count)(*[len(d) for d in datas])
        images = (NvjpegImage * count)()
        for image, pointer, pitch in zip(images, pointers, pitches):
            image.channel[0], image.pitch[0] = pointer, pitch
        param_array = (_void_p * count)(*[p.value for p in self._params[:count]])
        status = self.lib.slow.nvjpegDecodeBatchedEx(
            self.handle, self.state, data_array, length_array, images, param_array,
            _void_p(stream))
        if status != 0:
            self._batch = None  # re-initialize before the next batch (nvjpeg.h's advice)
        return status == 0

    def warm(self, jpegs, scratch: int, stream: int) -> bool:
        """Decodes a batch_size batch of each of `jpegs` (one JPEG's bytes repeated),
        WARM_WINDOW x WARM_WINDOW pixels of each into `scratch` (device memory of
        warm_scratch_bytes()), on `stream`, synchronizing it: nvJPEG grows its buffers
        for such batches now (planning.warm_up_jpegs says why). Returns whether
        nvJPEG took every batch."""
        window, count = WARM_WINDOW, self.batch_size
        pitch = window * 3
        pointers = [scratch + i * window * pitch for i in range(count)]
        ok = True
        for data in jpegs:  # one at a time: the next reuses the buffers this one reads
            ok &= self.decode([data] * count, [(0, 0, window, window)] * count, pointers,
                              [pitch] * count, stream)
            CudaDriver.get().synchronize(stream)
        return ok

    def warm_scratch_bytes(self) -> int:
        return self.batch_size * WARM_WINDOW * WARM_WINDOW * 3

    def close(self) -> None:
        for params in self._params:
            self.lib.quick.nvjpegDecodeParamsDestroy(params)
        self._params = []
        if self.state.value:
            self.lib.slow.nvjpegJpegStateDestroy(self.state)
            self.state = _void_p()
        if self.handle.value:
            self.lib.slow.nvjpegDestroy(self.handle)
            self.handle = _void_p()
