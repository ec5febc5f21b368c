"""JPEG bytes from the planning processes to the training process, through shared memory.

The planning processes read every file for its JPEG header; the GPU decoder needs the
same bytes in the training process. Returned through the process pool's pipe they are
pickled there and unpickled here by one thread holding the GIL: a batch of 256
ImageNet-sized JPEGs is ~29 MB, and on an H200 host (16 cores, 8 planning processes)
that cost the training process 29 ms of CPU a batch and carried at most 33 batches a
second, about the 31 a second ResNet-50 trains at (2026-12-01-h200-shared.json at 35cc76c,
"plan_transfer"). Here the training process makes a few blocks of shared memory; a
planning process writes a batch's bytes into the block it is handed and returns only
where each file lies (0.5 ms a batch, 420 batches a second, same measurement). The
GPU decoder reads them in place (`HostBytes`: an address and a length).

A block belongs to one batch from its planning until its decode has finished
(`Blocks.acquire` / `release`); with none free, or a file that does not fit, the bytes
go through the pipe as before: slower, never wrong. The blocks' memory is reserved when
they are made (`posix_fallocate`), so a full /dev/shm (Docker's default is 64 MB) means
fewer blocks or none, never a SIGBUS in a planning process.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from multiprocessing import shared_memory

SHM_DIRECTORY = "/dev/shm"


class HostBytes:
    """`size` bytes at `address` in this process (inside a block of `Blocks`)."""

    __slots__ = ("address", "size")

    def __init__(self, address: int, size: int):
        self.address, self.size = address, size

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return ctypes.string_at(self.address, self.size)


class Blocks:
    """Up to `count` blocks of shared memory of `size` bytes each, made now.

    Blocks whose memory cannot be reserved are not made (`count` says how many were):
    at most `share` of what the shared-memory file system has free is taken. Thread-safe.
    """

    def __init__(self, count: int, size: int, share: float = 0.5):
        self.size = int(size)
        self._blocks: list[shared_memory.SharedMemory] = []
        self._anchors: list[ctypes.Array] = []  # pins each block's address in this process
        self._lock = threading.Lock()
        try:
            stats = os.statvfs(SHM_DIRECTORY)  # where POSIX shared memory lives on Linux
            budget = int(share * stats.f_bavail * stats.f_frsize)
        except OSError:
            budget = 0
        for _ in range(min(int(count), budget // max(self.size, 1))):
            block = self._reserve()
            if block is None:
                break
            self._anchors.append((ctypes.c_char * self.size).from_buffer(block.buf))
            self._blocks.append(block)
        self._free = list(range(len(self._blocks)))
        self.count = len(self._blocks)
        self._closed = False

    def _reserve(self) -> shared_memory.SharedMemory | None:
        try:
            block = shared_memory.SharedMemory(create=True, size=self.size)
        except OSError:
            return None
        try:
            os.posix_fallocate(block._fd, 0, self.size)  # ENOSPC here, not SIGBUS later
        except (OSError, AttributeError):
            block.close()
            block.unlink()
            return None
        return block

    def acquire(self) -> int | None:
        """A free block's index, or None (none free: the bytes take the pipe)."""
        with self._lock:
            return self._free.pop() if self._free else None

    def release(self, index: int | None) -> None:
        if index is None:
            return
        with self._lock:
            if self._closed:
                return
            if index in self._free or not 0 <= index < self.count:
                raise ValueError(f"block {index} was not held")
            self._free.append(index)

    def free(self) -> int:
        with self._lock:
            return len(self._free)

    def name(self, index: int) -> str:
        return self._blocks[index].name

    def view(self, index: int, offset: int, size: int) -> HostBytes:
        """What a planning process wrote at `offset` of block `index`."""
        if offset < 0 or offset + size > self.size:
            raise ValueError(f"{size} bytes at {offset} lie outside block {index}")
        return HostBytes(ctypes.addressof(self._anchors[index]) + offset, size)

    def close(self) -> None:
        """Removes the blocks' names (no process can open them any more; none is handed
        out again). Their memory stays mapped here until this object goes: at exit
        this runs before the streams' threads are stopped, and a decode may still be
        reading a block."""
        with self._lock:
            self._closed = True
            self._free.clear()
        for block in self._blocks:
            try:
                block.unlink()
            except FileNotFoundError:
                pass

    def __del__(self):  # nothing can use the blocks now: unmap them (exports first)
        self._anchors.clear()
        for block in self._blocks:
            block.close()


def write(name: str, datas: list[bytes]) -> list[tuple[int, int] | None]:
    """In a planning process: writes `datas` one after another into block `name`;
    (offset, size) of each, or None for those that did not fit."""
    block = shared_memory.SharedMemory(name=name)
    try:
        places, at = [], 0
        for data in datas:
            if at + len(data) > block.size:
                places.append(None)
                continue
            block.buf[at:at + len(data)] = data
            places.append((at, len(data)))
            at += len(data)
        return places
    finally:
        block.close()


def warn_if_short(blocks: Blocks, wanted: int) -> None:
    if blocks.count < wanted:
        warnings.warn(
            f"{blocks.count} of {wanted} shared-memory blocks of {blocks.size >> 20} MiB could "
            f"be reserved in {SHM_DIRECTORY} (the rest of the JPEG bytes go through the "
            "planning processes' pipe, which is slower; a container can be given more with "
            "e.g. docker run --shm-size=4g)", RuntimeWarning, stacklevel=3)
