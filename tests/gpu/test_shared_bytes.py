"""JPEG bytes handed from the planning processes through shared memory
(preprocessing/gpu/native/shared_bytes.py): what a spawned planning process writes is what the
files hold, files that do not fit take the pipe, blocks are held and freed one batch at
a time, and a shared-memory file system without room means fewer blocks, never a crash.
The GPU stream's use of them is tested on the GPU (tests/gpu/test_nvjpeg_on_gpu.py)."""

import os

import pytest

from photos import assorted_jpegs
from preprocessing.gpu.threads import process_pool
from preprocessing.gpu.planning import PlanSpec, plan_batch
from preprocessing.gpu.native.shared_bytes import (SHM_DIRECTORY, Blocks, HostBytes,
                                                  warn_if_short, write)

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM_DIRECTORY),
                                reason=f"no {SHM_DIRECTORY} on this system")
SPEC = PlanSpec(seed=0, train=True, roi=True, max_side=1024, image_size=32, gpu=True,
                keep_bytes=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return [path for path, _ in assorted_jpegs(tmp_path_factory.mktemp("jpegs"))]


def contents(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_a_planning_process_writes_the_files_bytes_into_the_block(files):
    blocks = Blocks(2, 1 << 20)
    try:
        assert blocks.count == 2
        index = blocks.acquire()
        future = process_pool(2).submit(plan_batch, files, (0, 3), SPEC, blocks.name(index))
        slots = future.result(timeout=60)
        carried = [(path, slot) for path, slot in zip(files, slots) if slot.route == "gpu"]
        assert len(carried) >= len(files) - 2  # all but what the CPU decodes
        ends = []
        for path, slot in carried:
            offset, size = slot.data  # a place in the block, not the bytes
            ends.append((offset, offset + size))
            assert bytes(blocks.view(index, offset, size)) == contents(path), path
        # One after another, no overlap: a batch's files share their block.
        assert all(a[1] <= b[0] for a, b in zip(sorted(ends), sorted(ends)[1:]))
        # The plan is the one made without a block (same windows, flips, routes).
        plain = plan_batch(files, (0, 3), SPEC)
        assert [(s.route, s.window, s.flip) for s in slots] == [
            (s.route, s.window, s.flip) for s in plain]
    finally:
        blocks.close()


def test_files_beyond_the_block_take_the_pipe(files):
    sizes = sorted(len(contents(p)) for p in files)
    tight = Blocks(1, sizes[0] + sizes[1])  # room for the two smallest files, at most
    try:
        index = tight.acquire()
        slots = plan_batch(files, (0, 0), SPEC, tight.name(index))
        gpu = [(p, s) for p, s in zip(files, slots) if s.route == "gpu"]
        in_block = [(p, s) for p, s in gpu if isinstance(s.data, tuple)]
        through_pipe = [(p, s) for p, s in gpu if isinstance(s.data, bytes)]
        assert in_block and through_pipe and len(in_block) + len(through_pipe) == len(gpu)
        for path, slot in in_block:
            assert bytes(tight.view(index, *slot.data)) == contents(path)
        for path, slot in through_pipe:
            assert slot.data == contents(path)
        used = sum(s.data[1] for _, s in in_block)
        assert used <= tight.size
    finally:
        tight.close()


def test_blocks_are_held_one_batch_at_a_time_and_freed_by_close():
    blocks = Blocks(3, 4096)
    names = [blocks.name(i) for i in range(3)]
    held = {blocks.acquire() for _ in range(3)}
    assert held == {0, 1, 2} and blocks.acquire() is None and blocks.free() == 0
    blocks.release(1)
    with pytest.raises(ValueError, match="was not held"):
        blocks.release(1)
    with pytest.raises(ValueError, match="outside block"):
        blocks.view(0, 4000, 200)
    assert blocks.acquire() == 1
    assert all(os.path.exists(os.path.join(SHM_DIRECTORY, n)) for n in names)
    place = write(names[0], [b"in flight"])[0]
    in_flight = blocks.view(0, *place)
    blocks.close()
    assert not any(os.path.exists(os.path.join(SHM_DIRECTORY, n)) for n in names)
    assert blocks.acquire() is None
    # A decode still reading a block when the stream is closed (at exit, the blocks are
    # closed before the streams' threads are stopped) reads what was written, and its
    # release afterwards is a no-op.
    assert bytes(in_flight) == b"in flight"
    blocks.release(0)


def test_no_room_in_shared_memory_means_fewer_blocks_and_a_warning():
    stats = os.statvfs(SHM_DIRECTORY)
    free = stats.f_bavail * stats.f_frsize
    size = 1 << 20
    share = 2.5 * size / free  # room for two blocks of the ten asked for
    blocks = Blocks(10, size, share=share)
    try:
        assert blocks.count == 2
        with pytest.warns(RuntimeWarning, match=r"2 of 10 shared-memory blocks .*--shm-size"):
            warn_if_short(blocks, 10)
    finally:
        blocks.close()
    none = Blocks(4, size, share=0.0)
    assert none.count == 0 and none.acquire() is None


def test_host_bytes_read_in_place():
    import ctypes

    buffer = ctypes.create_string_buffer(b"\xff\xd8jpeg", 6)
    view = HostBytes(ctypes.addressof(buffer), 6)
    assert len(view) == 6 and bytes(view) == b"\xff\xd8jpeg"


KILLED = """
import json, os, pathlib, signal, sys
sys.path.insert(0, "tests")
from photos import assorted_jpegs
from preprocessing.gpu.threads import process_pool
from preprocessing.gpu.planning import PlanSpec, plan_batch
from preprocessing.gpu.native.shared_bytes import Blocks
files = [p for p, _ in assorted_jpegs(pathlib.Path(sys.argv[1]))]
blocks = Blocks(3, 1 << 20)
spec = PlanSpec(seed=0, train=True, roi=True, max_side=1024, image_size=32, gpu=True,
                keep_bytes=True)
index = blocks.acquire()
process_pool(2).submit(plan_batch, files, (0, 0), spec, blocks.name(index)).result()
print(json.dumps([blocks.name(i) for i in range(blocks.count)]), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no finalizer, no atexit: the tracker must clean up
"""


def test_a_killed_training_process_leaves_no_blocks_behind(tmp_path):
    """SIGKILL mid-run: the planning processes notice and exit (they inherited the
    test's pipes: `run` returns only then), and multiprocessing's resource tracker
    unlinks every block (no /dev/shm leak)."""
    import json
    import subprocess
    import sys
    import time

    from conftest import ROOT

    done = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == -9, done.stderr[-2000:]
    names = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(names) == 3
    paths = [os.path.join(SHM_DIRECTORY, n) for n in names]
    deadline = time.monotonic() + 30
    while any(os.path.exists(p) for p in paths) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(os.path.exists(p) for p in paths), "blocks left in /dev/shm"
