"""nvImageCodec's C API through ctypes: a batch decoded into the caller's buffers.

Why not the Python binding (`nvidia.nvimgcodec.Decoder`): measured on an H200 under
training (benchmarks/results/2026-12-01-h200-decode-contention.json at 35cc76c), its decode
call takes the GIL once per image, and the decoder allocates and frees its working
memory with cudaMalloc/cudaFree; a cudaFree waits for the whole GPU to drain and
meanwhile blocks the training thread's launches. (Measured later,
2026-12-01-h200-nvjpeg.json at 35cc76c:
those frees were not what held decoding back, the hardware queues it shared with XLA
were, see preprocessing/gpu/native/nvjpeg_c.py; with 32 queues this path gives 0.84 of synthetic
data's images/sec, calling nvJPEG directly 0.93.) Here:
- memory comes from `Pool`s handed to the decoder as its device and pinned
  allocators: blocks are reused, never given back while the decoder lives, so no
  free waits for the GPU (DALI gives nvImageCodec its own memory pools likewise);
- quick calls (a code stream, an image) are made holding the GIL (ctypes.PyDLL: no
  release and re-take per call); the decode releases it once for the batch, and so
  do the calls that may run the pools (a Python callback) on nvImageCodec's threads.

Only what preprocessing/gpu/decoders.py needs: code streams read from files with a
region, images over caller memory (device or host, interleaved 8-bit RGB, a row
pitch), a batch decode with a status per image. Struct layouts follow
`nvimgcodec.h` of nvidia-nvimgcodec-cu13 0.9 (shipped in the wheel's include/).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

from preprocessing.gpu.native.cuda_driver import ClosedWhenCollected, LoadedOnce
from preprocessing.gpu.native.memory_pool import ALLOC, FREE, callbacks

CPU_ONLY_DEVICE = -99999  # NVIMGCODEC_DEVICE_CPU_ONLY
BACKEND_KINDS = {"cpu": 1, "gpu": 2, "hybrid": 3, "hw": 4}  # nvimgcodecBackendKind_t
_ADAPTIVE = 3  # NVIMGCODEC_LOAD_HINT_POLICY_ADAPTIVE_MINIMIZE_IDLE_TIME
_FIXED = 2
_SUCCESS = 1  # NVIMGCODEC_PROCESSING_STATUS_SUCCESS
_DEVICE_BUFFER, _HOST_BUFFER = 1, 2  # nvimgcodecImageBufferKind_t
_SRGB, _SAMPLING_NONE, _I_RGB, _UINT8 = 1, 0, 8, 0x0802
# nvimgcodecStructureType_t
(_INSTANCE_CREATE_INFO, _DEVICE_ALLOCATOR, _PINNED_ALLOCATOR, _DECODE_PARAMS) = (2, 3, 4, 5)
(_ORIENTATION, _REGION, _CODE_STREAM_VIEW, _IMAGE_INFO, _IMAGE_PLANE_INFO) = (7, 8, 9, 11, 12)
_BACKEND, _BACKEND_PARAMS, _EXECUTION_PARAMS = 17, 29, 30

_size_t, _void_p, _int = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int


class _Struct(ctypes.Structure):
    """A versioned nvImageCodec struct: type, size and next filled in on creation."""

    TYPE = 0

    def __init__(self, **fields):
        super().__init__(struct_type=self.TYPE, struct_size=ctypes.sizeof(self), **fields)


def _header():
    return [("struct_type", _int), ("struct_size", _size_t), ("struct_next", _void_p)]


class _OutOfBoundsSample(ctypes.Structure):
    _fields_ = [("value", ctypes.c_uint32), ("type", _int)]


class _Region(_Struct):
    TYPE = _REGION
    _fields_ = _header() + [("ndim", _int), ("start", _int * 5), ("end", _int * 5),
                            ("out_of_bounds_policy", _int),
                            ("out_of_bounds_samples", _OutOfBoundsSample * 5)]


class _CodeStreamView(_Struct):
    TYPE = _CODE_STREAM_VIEW
    _fields_ = _header() + [("image_idx", _size_t), ("region", _Region),
                            ("bitstream_offset", _size_t)]


class _Orientation(_Struct):
    TYPE = _ORIENTATION
    _fields_ = _header() + [("rotated", _int), ("flip_x", _int), ("flip_y", _int)]


class _PlaneInfo(_Struct):
    TYPE = _IMAGE_PLANE_INFO
    _fields_ = _header() + [("width", ctypes.c_uint32), ("height", ctypes.c_uint32),
                            ("row_stride", _size_t), ("num_channels", ctypes.c_uint32),
                            ("sample_type", _int), ("precision", ctypes.c_uint8)]


class _ImageInfo(_Struct):
    TYPE = _IMAGE_INFO
    _fields_ = _header() + [("codec_name", ctypes.c_char * 256), ("color_spec", _int),
                            ("chroma_subsampling", _int), ("sample_format", _int),
                            ("orientation", _Orientation), ("num_planes", ctypes.c_uint32),
                            ("plane_info", _PlaneInfo * 32), ("buffer", _void_p),
                            ("buffer_kind", _int), ("cuda_stream", _void_p)]


class _BackendParams(_Struct):
    TYPE = _BACKEND_PARAMS
    _fields_ = _header() + [("load_hint", ctypes.c_float), ("load_hint_policy", _int)]


class _Backend(_Struct):
    TYPE = _BACKEND
    _fields_ = _header() + [("kind", _int), ("params", _BackendParams)]


_ALLOC, _FREE = ALLOC, FREE


class _DeviceAllocator(_Struct):
    TYPE = _DEVICE_ALLOCATOR
    _fields_ = _header() + [("malloc", _ALLOC), ("free", _FREE), ("ctx", _void_p),
                            ("padding", _size_t)]


class _PinnedAllocator(_Struct):
    TYPE = _PINNED_ALLOCATOR
    _fields_ = _header() + [("malloc", _ALLOC), ("free", _FREE), ("ctx", _void_p),
                            ("padding", _size_t)]


class _ExecutionParams(_Struct):
    TYPE = _EXECUTION_PARAMS
    _fields_ = _header() + [("device_allocator", ctypes.POINTER(_DeviceAllocator)),
                            ("pinned_allocator", ctypes.POINTER(_PinnedAllocator)),
                            ("max_num_cpu_threads", _int), ("executor", _void_p),
                            ("device_id", _int), ("pre_init", _int), ("skip_pre_sync", _int),
                            ("num_backends", _int), ("backends", ctypes.POINTER(_Backend))]


class _DecodeParams(_Struct):
    TYPE = _DECODE_PARAMS
    _fields_ = _header() + [("apply_exif_orientation", _int)]


class _InstanceCreateInfo(_Struct):
    TYPE = _INSTANCE_CREATE_INFO
    _fields_ = _header() + [("load_builtin_modules", _int), ("load_extension_modules", _int),
                            ("extension_modules_path", ctypes.c_char_p),
                            ("create_debug_messenger", _int), ("debug_messenger_desc", _void_p),
                            ("message_severity", ctypes.c_uint32),
                            ("message_category", ctypes.c_uint32)]


def package_dir() -> str | None:
    """The installed `nvidia/nvimgcodec` folder (library, extensions), not imported."""
    try:
        spec = importlib.util.find_spec("nvidia.nvimgcodec")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


class Library(LoadedOnce):
    """libnvimgcodec.so.0 and one instance with its extensions loaded (one per process)."""

    def __init__(self):
        folder = package_dir()
        if folder is None:
            raise ImportError("nvidia-nvimgcodec-cu13 is not installed")
        path = os.path.join(folder, "libnvimgcodec.so.0")
        self.quick = ctypes.PyDLL(path)  # keeps the GIL: calls of microseconds
        self.slow = ctypes.CDLL(path)  # releases it: the decode and its wait
        info = _InstanceCreateInfo(load_builtin_modules=1, load_extension_modules=1,
                                   extension_modules_path=os.path.join(folder, "extensions")
                                   .encode(), create_debug_messenger=0)
        self.handle = _void_p()
        self.check(self.slow.nvimgcodecInstanceCreate(ctypes.byref(self.handle),
                                                       ctypes.byref(info)),
                   "nvimgcodecInstanceCreate")

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed: nvImageCodec status {status}")


class Decoder(ClosedWhenCollected):
    """A batch decoder of one device (or the CPU: device=CPU_ONLY_DEVICE).

    Args:
        device: CUDA ordinal, or CPU_ONLY_DEVICE.
        backends: [(kind, load_hint)], kind in BACKEND_KINDS; a hint below 1 lets
            that backend's share of a batch adapt batch by batch (the rest goes to the
            next backend). Empty: nvImageCodec's choice.
        options: nvImageCodec decoder options (e.g. ":fancy_upsampling=1").
        device_pool, pinned_pool: Pools for the decoder's device and pinned memory
            (None: nvImageCodec's own cudaMalloc/cudaFree).
    """

    def __init__(self, device: int, backends=(), options: str = "", device_pool=None,
                 pinned_pool=None):
        self.lib = Library.get()
        self.device = device
        self._keep = []  # ctypes objects the decoder points at
        params = _ExecutionParams(device_id=device, max_num_cpu_threads=0, pre_init=1)
        if backends:
            array = (_Backend * len(backends))(*[
                _Backend(kind=BACKEND_KINDS[kind], params=_BackendParams(
                    load_hint=hint, load_hint_policy=_ADAPTIVE if hint < 1 else _FIXED))
                for kind, hint in backends])
            params.num_backends, params.backends = len(backends), array
            self._keep.append(array)
        for pool, cls, field in ((device_pool, _DeviceAllocator, "device_allocator"),
                                 (pinned_pool, _PinnedAllocator, "pinned_allocator")):
            if pool is not None:
                malloc, free = callbacks(pool)
                allocator = cls(malloc=malloc, free=free)
                setattr(params, field, ctypes.pointer(allocator))
                self._keep.append(allocator)
        self._keep.append(params)  # in case the decoder keeps pointers into it
        self.handle = _void_p()
        # Released GIL: creating (pre_init) may call the pools from nvImageCodec's
        # threads, which take the GIL to run them.
        self.lib.check(self.lib.slow.nvimgcodecDecoderCreate(
            self.lib.handle, ctypes.byref(self.handle), ctypes.byref(params),
            options.encode()), "nvimgcodecDecoderCreate")
        self._params = _DecodeParams(apply_exif_orientation=0)

    def code_stream(self, path: str, region=None) -> "CodeStream | None":
        """A code stream of the JPEG file limited to region (y, x, h, w), or None where
        nvImageCodec cannot parse it as a JPEG."""
        handle = _void_p()
        status = self.lib.quick.nvimgcodecCodeStreamCreateFromFile(
            self.lib.handle, ctypes.byref(handle), os.fsencode(path), None)
        if status != 0 or not handle.value:
            return None
        whole = CodeStream(self.lib, handle)
        info = _ImageInfo()
        if self.lib.quick.nvimgcodecCodeStreamGetImageInfo(handle, ctypes.byref(info)) != 0 \
                or info.codec_name != b"jpeg":
            return None  # not a JPEG nvImageCodec can parse: the CPU decodes it
        if region is None:
            return whole
        y, x, h, w = region
        view = _CodeStreamView(region=_Region(ndim=2, start=(_int * 5)(y, x),
                                              end=(_int * 5)(y + h, x + w)))
        sub = _void_p()
        status = self.lib.quick.nvimgcodecCodeStreamGetSubCodeStream(
            handle, ctypes.byref(sub), ctypes.byref(view))
        # The view reads its parent's bytes: the parent lives as long as the view.
        return CodeStream(self.lib, sub, parent=whole) if status == 0 and sub.value else None

    def image(self, pointer: int, height: int, width: int, pitch: int,
              stream: int | None = None) -> "Image":
        """An interleaved RGB uint8 image over memory at `pointer` (device memory with a
        CUDA stream, host memory without)."""
        info = _ImageInfo(color_spec=_SRGB, chroma_subsampling=_SAMPLING_NONE,
                          sample_format=_I_RGB, orientation=_Orientation(), num_planes=1,
                          buffer=pointer, cuda_stream=stream,
                          buffer_kind=_HOST_BUFFER if stream is None else _DEVICE_BUFFER)
        info.plane_info[0] = _PlaneInfo(width=width, height=height, row_stride=pitch,
                                        num_channels=3, sample_type=_UINT8)
        handle = _void_p()
        self.lib.check(self.lib.quick.nvimgcodecImageCreate(
            self.lib.handle, ctypes.byref(handle), ctypes.byref(info)), "nvimgcodecImageCreate")
        return Image(self.lib, handle)

    def decode(self, streams, images) -> list[bool]:
        """Decodes streams[i] into images[i], all of them; True where it succeeded."""
        count = len(streams)
        if count == 0:
            return []
        stream_array = (_void_p * count)(*[s.handle for s in streams])
        image_array = (_void_p * count)(*[i.handle for i in images])
        future = _void_p()
        slow = self.lib.slow
        self.lib.check(slow.nvimgcodecDecoderDecode(
            self.handle, stream_array, image_array, count, ctypes.byref(self._params),
            ctypes.byref(future)), "nvimgcodecDecoderDecode")
        try:
            self.lib.check(slow.nvimgcodecFutureWaitForAll(future), "nvimgcodecFutureWaitForAll")
            statuses, size = (ctypes.c_uint32 * count)(), _size_t(count)
            self.lib.check(self.lib.quick.nvimgcodecFutureGetProcessingStatus(
                future, statuses, ctypes.byref(size)), "nvimgcodecFutureGetProcessingStatus")
        finally:
            self.lib.quick.nvimgcodecFutureDestroy(future)
        return [status == _SUCCESS for status in statuses]

    def close(self) -> None:
        if self.handle.value:
            self.lib.slow.nvimgcodecDecoderDestroy(self.handle)
            self.handle = _void_p()


class _Owned(ClosedWhenCollected):
    """A library handle destroyed with its Python object (before its parent's)."""

    DESTROY = ""

    def __init__(self, lib: Library, handle, parent=None):
        self.lib, self.handle, self.parent = lib, handle, parent

    def close(self) -> None:
        if self.handle.value:
            getattr(self.lib.quick, self.DESTROY)(self.handle)
            self.handle = _void_p()


class CodeStream(_Owned):
    DESTROY = "nvimgcodecCodeStreamDestroy"


class Image(_Owned):
    DESTROY = "nvimgcodecImageDestroy"
