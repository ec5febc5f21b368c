"""The decoders' memory pools (preprocessing/gpu/native/memory_pool.py), without a GPU: blocks
reused and never given back early, stream-ordered reuse, and the C functions the
decoders call."""

import ctypes

from preprocessing.gpu.native.memory_pool import ALLOC, FREE, Pool, callbacks


def test_a_pool_reuses_blocks_and_frees_them_only_when_closed():
    made, released = [], []

    def allocate(size):
        made.append(size)
        return 4096 * len(made)

    pool = Pool(allocate, released.append)
    first = pool.malloc(3 << 20)
    pool.free(first)
    assert pool.malloc(3 << 20) == first and len(made) == 1  # reused, not made again
    second = pool.malloc(2 << 20)  # the first is taken: a new block (2.5 MiB)
    pool.free(second)
    assert pool.malloc(1 << 20) != second  # over twice the request: kept for larger ones
    pool.free(pool.malloc(64 << 20))  # too small ones are never used: a new block
    assert pool.malloc(3 << 19) == second  # a free block up to twice the request fits
    assert made[0] >= 3 << 20 and made[1] >= 2 << 20 and max(made) >= 64 << 20
    assert pool.blocks == len(made) == 4
    assert released == []  # nothing given back while the pool lives
    pool.close()
    assert sorted(released) == [4096 * (i + 1) for i in range(4)] and pool.blocks == 0


def test_a_block_freed_in_stream_order_is_reused_only_after_its_stream_got_there():
    log = []

    def fence(stream):
        log.append(("fence", stream))
        return lambda: log.append(("wait", stream))

    pool = Pool(lambda size: 4096 * (len(log) + 1), lambda pointer: None, fence)
    first = pool.malloc(1 << 20)
    assert log == []  # a new block: nobody used it, nothing to wait for
    pool.free(first, stream=5)
    assert log == [("fence", 5)]  # marked where stream 5 is now
    assert pool.malloc(1 << 20) == first and log == [("fence", 5), ("wait", 5)]
    pool.free(first, stream=6)
    pool.close()  # waits for the last user before giving memory back
    assert log[-2:] == [("fence", 6), ("wait", 6)]


def test_the_c_functions_run_the_pool_and_turn_failures_into_statuses():
    made = []

    def allocate(size):
        if size > 1 << 30:
            raise RuntimeError("CUDA error 2 (CUDA_ERROR_OUT_OF_MEMORY)")
        made.append(size)
        return 8192 * len(made)

    malloc, free = callbacks(Pool(allocate, lambda pointer: None))
    assert isinstance(malloc, ALLOC) and isinstance(free, FREE)
    pointer = ctypes.c_void_p()
    assert malloc(None, ctypes.byref(pointer), 5 << 20, None) == 0  # as a library calls it
    assert pointer.value == 8192 and made == [(5 << 20) + (5 << 18)]
    assert free(None, pointer.value, 5 << 20, None) == 0
    assert malloc(None, ctypes.byref(pointer), 5 << 20, None) == 0 and pointer.value == 8192
    assert malloc(None, ctypes.byref(pointer), 2 << 30, None) == 1  # no raise into C
    assert free(None, 12345, 1, None) == 1  # not a block of this pool: a status too
