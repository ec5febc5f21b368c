"""The few CUDA driver calls the GPU JPEG pipeline needs, through ctypes on libcuda.so.1.

Streams, device and pinned allocations (the C decoder's memory pools,
preprocessing/gpu/native/nvimgcodec_c.py) and 2-D copies into canvas slots
(preprocessing/gpu/decoders.py), in JAX's primary context of each device.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

_HOST, _DEVICE = 1, 2  # CUmemorytype
_NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING
_DISABLE_TIMING = 2  # CU_EVENT_DISABLE_TIMING


class _Memcpy2D(ctypes.Structure):
    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int), ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int), ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64), ("dstArray", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t),
    ]


class LoadedOnce:
    """A native library loaded once per process: `get()` makes the one instance of a
    subclass on first use, whichever thread asks first."""

    _loading = threading.RLock()  # re-entrant: one library's set-up may get another

    @classmethod
    def get(cls):
        with LoadedOnce._loading:
            if cls.__dict__.get("_instance") is None:  # this class's own, not a parent's
                cls._instance = cls()
            return cls._instance


class ClosedWhenCollected:
    """A native resource's owner: `close()` runs when the object is collected too (a
    failure then, at interpreter shutdown, is ignored). Subclasses define close()."""

    def close(self) -> None:
        raise NotImplementedError

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class CudaDriver(LoadedOnce):
    """The few CUDA driver calls the canvas needs, through ctypes on libcuda.so.1.

    Works in JAX's primary context of each device; every thread that calls in must
    first call `use(ordinal)` (the driver's current context is per thread).
    """

    _lock = threading.Lock()

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")
        self._contexts = {}

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(name))
            raise RuntimeError(f"{what} failed: CUDA error {status} "
                               f"({(name.value or b'?').decode()})")

    def use(self, ordinal: int) -> None:
        """Makes the primary context of device `ordinal` current in this thread."""
        with self._lock:
            context = self._contexts.get(ordinal)
            if context is None:
                device, context = ctypes.c_int(), ctypes.c_void_p()
                self._check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
                self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
                            "cuDevicePrimaryCtxRetain")
                self._contexts[ordinal] = context
        self._check(self.lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")

    def new_stream(self, high_priority: bool = False) -> tuple[int, int | None]:
        """A non-blocking stream of the current context, and its priority (None: default).

        High priority: its kernels are scheduled ahead of those of default-priority
        streams (XLA's). The decoders do their own GPU work on streams of their own,
        though: measured on an H200, this stream's priority changed nothing
        (benchmarks/results/2026-12-01-h200-nvjpeg.json at 35cc76c); the hardware queues did.
        """
        stream = ctypes.c_void_p()
        if high_priority:
            least, greatest = ctypes.c_int(), ctypes.c_int()
            self._check(self.lib.cuCtxGetStreamPriorityRange(ctypes.byref(least),
                                                             ctypes.byref(greatest)),
                        "cuCtxGetStreamPriorityRange")
            self._check(self.lib.cuStreamCreateWithPriority(
                ctypes.byref(stream), _NON_BLOCKING, greatest.value), "cuStreamCreateWithPriority")
            return stream.value, greatest.value
        self._check(self.lib.cuStreamCreate(ctypes.byref(stream), _NON_BLOCKING), "cuStreamCreate")
        return stream.value, None

    def alloc(self, size: int, pinned: bool = False) -> int:
        """`size` bytes of device memory (or of pinned host memory) of the current context."""
        pointer = ctypes.c_uint64() if not pinned else ctypes.c_void_p()
        if pinned:
            self._check(self.lib.cuMemHostAlloc(ctypes.byref(pointer), ctypes.c_size_t(size), 0),
                        "cuMemHostAlloc")
        else:
            self._check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)),
                        "cuMemAlloc")
        return int(pointer.value)

    def free(self, pointer: int, pinned: bool = False) -> None:
        if pinned:
            self._check(self.lib.cuMemFreeHost(ctypes.c_void_p(pointer)), "cuMemFreeHost")
        else:
            self._check(self.lib.cuMemFree_v2(ctypes.c_uint64(pointer)), "cuMemFree")

    def free_memory(self) -> int:
        """Bytes of device memory free on the current context's device (cuMemGetInfo)."""
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._check(self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)),
                    "cuMemGetInfo")
        return free.value

    def fence(self, stream):
        """A CUDA event recorded on `stream` now; returns wait(), which waits for the
        stream's work queued before it (not the device's) and destroys the event."""
        event = ctypes.c_void_p()
        self._check(self.lib.cuEventCreate(ctypes.byref(event), _DISABLE_TIMING), "cuEventCreate")
        self._check(self.lib.cuEventRecord(event, ctypes.c_void_p(stream)), "cuEventRecord")

        def wait():
            self._check(self.lib.cuEventSynchronize(event), "cuEventSynchronize")
            self._check(self.lib.cuEventDestroy_v2(event), "cuEventDestroy")
        return wait

    def synchronize(self, stream: int) -> None:
        self._check(self.lib.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")

    def copy_2d(self, dst: int, dst_pitch: int, src, src_pitch: int, width_bytes: int,
                height: int, stream: int) -> None:
        """Copies `height` rows of `width_bytes` into device memory at `dst`.

        `src` is a device pointer (int) or a C-contiguous host numpy array (then the
        copy is staged by the driver and has finished reading `src` on return).
        """
        spec = _Memcpy2D(dstMemoryType=_DEVICE, dstDevice=dst, dstPitch=dst_pitch,
                         WidthInBytes=width_bytes, Height=height, srcPitch=src_pitch)
        if isinstance(src, np.ndarray):
            spec.srcMemoryType, spec.srcHost = _HOST, src.ctypes.data
        else:
            spec.srcMemoryType, spec.srcDevice = _DEVICE, int(src)
        self._check(self.lib.cuMemcpy2DAsync_v2(ctypes.byref(spec), ctypes.c_void_p(stream)),
                    "cuMemcpy2DAsync")
