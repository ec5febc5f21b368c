"""Memory pools for the GPU decoders' allocators: blocks reused, never freed early.

nvImageCodec (native/nvimgcodec_c.py) and nvJPEG (native/nvjpeg_c.py) take
stream-ordered allocators, `malloc(ctx, &pointer, size, stream)` and
`free(ctx, pointer, size, stream)`. Given none, they allocate with cudaMalloc and
cudaHostAlloc and free with cudaFree and cudaFreeHost, and a free waits for the whole
GPU to drain (training steps included) while it blocks other threads' launches. A
`Pool` keeps every block until it is closed, and `callbacks(pool)` makes the pair of
C functions the decoders call (DALI gives its decoders memory pools likewise).
"""

from __future__ import annotations

import ctypes
import threading

_void_p, _size_t, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
ALLOC = ctypes.CFUNCTYPE(_int, _void_p, ctypes.POINTER(_void_p), _size_t, _void_p)
FREE = ctypes.CFUNCTYPE(_int, _void_p, _void_p, _size_t, _void_p)


class Pool:
    """Blocks from `allocate(size) -> pointer`, reused and never freed while the pool
    lives: a freed block goes back to the pool; a request takes the smallest free block
    at least its size (at most twice it), else a new one with 25% to spare.

    nvImageCodec frees in stream order: work queued on the freeing stream may still
    use the block. With `fence(stream) -> wait` (e.g. a CUDA event recorded on that
    stream, and a wait for it), a block is handed out again only after `wait()`, so
    the next user never overlaps the last one's queued work; the wait is on that one
    stream's work up to the free, never on the whole device.
    """

    def __init__(self, allocate, release, fence=None):
        self._allocate, self._release, self._fence = allocate, release, fence
        self._free = []  # (size, pointer, wait or None), sorted by size
        self._sizes = {}  # pointer -> size of every block made
        self._lock = threading.Lock()

    def malloc(self, size: int) -> int:
        with self._lock:
            for index, (capacity, pointer, wait) in enumerate(self._free):
                if size <= capacity <= 2 * max(size, 1 << 20):
                    del self._free[index]
                    break
            else:
                capacity = max(size + size // 4, 1 << 20)
                pointer = self._allocate(capacity)
                self._sizes[pointer] = capacity
                return pointer
        if wait is not None:
            wait()  # the last user's queued work is done with the block
        return pointer

    def free(self, pointer: int, stream=None) -> None:
        wait = self._fence(stream) if self._fence is not None else None
        with self._lock:
            self._free.append((self._sizes[pointer], pointer, wait))
            self._free.sort(key=lambda block: block[:2])

    @property
    def blocks(self) -> int:
        return len(self._sizes)

    def close(self) -> None:
        with self._lock:
            for _, _, wait in self._free:
                if wait is not None:
                    wait()
            for pointer in self._sizes:
                self._release(pointer)
            self._sizes, self._free = {}, []


def callbacks(pool: Pool):
    """(ALLOC, FREE) C functions over `pool`: a failure is a non-zero status for the
    library, never a Python exception. Keep them alive as long as the library may
    call them."""

    def malloc(ctx, pointer, size, stream):
        try:
            pointer[0] = pool.malloc(size)
            return 0
        except Exception:  # noqa: BLE001 - a failed allocation is a status, not a raise
            return 1

    def free(ctx, pointer, size, stream):
        try:
            pool.free(pointer, stream)
            return 0
        except Exception:  # noqa: BLE001 - a failure is a status, not a raise
            return 1

    return ALLOC(malloc), FREE(free)
