"""How fast can planning processes hand a batch's JPEG bytes to the training process?

    python benchmarks/plan_transfer.py FOLDER [--workers=8] [--batch=256] [--batches=200]

The gpu pipeline's planning processes read each batch's files and sent the bytes with
the plan (`read_in="workers"`, the default until 2026-12-01): about 28 MB a batch of
ImageNet-sized JPEGs, 880 MB/s at 8,000 images/sec, pickled through the process pool's
pipe and unpickled by one thread of the training process, which holds the GIL
meanwhile. This times that path against writing the bytes into shared memory (one block
per batch in flight; the training process takes zero-copy views; what
`read_in="shared"`, the default since, does), with the same files and processes, and
reports batches/sec for each and the training process's CPU seconds per batch (what
the GIL-holding side costs). On an H200 host (16 cores, 8 processes, 2026-12-01): the
pipe 33.3 batches/sec and 29.3 ms a batch, shared memory 420 and 0.5 ms
(results/2026-12-01-h200-shared.json). A benchmark tool: it changes nothing in the app.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import glob
import json
import multiprocessing
import os
import resource
import time
from multiprocessing import shared_memory

_BLOCKS: dict[str, shared_memory.SharedMemory] = {}


def _read(paths: list[str]) -> list[bytes]:
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.append(f.read())
    return out


def read_to_pipe(paths: list[str]) -> list[bytes]:
    return _read(paths)


def read_to_shared(paths: list[str], name: str) -> list[tuple[int, int]] | None:
    """Writes the files one after another into shared block `name`; (offset, size) each,
    or None where they do not fit."""
    block = _BLOCKS.get(name)
    if block is None:
        block = _BLOCKS[name] = shared_memory.SharedMemory(name=name)
    offsets, at = [], 0
    for data in _read(paths):
        if at + len(data) > block.size:
            return None
        block.buf[at:at + len(data)] = data
        offsets.append((at, len(data)))
        at += len(data)
    return offsets


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _time(pool, batches, submit, take, in_flight: int) -> dict:
    pending = collections.deque()
    wall, cpu = time.perf_counter(), _cpu_seconds()
    for index, paths in enumerate(batches):
        pending.append(submit(index, paths))
        if len(pending) >= in_flight:
            take(pending.popleft())
    while pending:
        take(pending.popleft())
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    return {"batches_per_sec": round(len(batches) / wall, 1),
            "training_process_cpu_ms_per_batch": round(1e3 * cpu / len(batches), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    files = sorted(glob.glob(os.path.join(args.folder, "**", "*.JPEG"), recursive=True) +
                   glob.glob(os.path.join(args.folder, "**", "*.jpg"), recursive=True))
    if len(files) < args.batch:
        raise SystemExit(f"{args.folder}: {len(files)} JPEGs, fewer than a batch")
    count = len(files) // args.batch
    batches = [files[(i % count) * args.batch:(i % count + 1) * args.batch]
               for i in range(args.batches)]
    largest = max(sum(os.path.getsize(p) for p in b) for b in batches[:count])
    in_flight = 2 * args.workers
    names = [f"plan_transfer_{os.getpid()}_{i}" for i in range(in_flight)]
    blocks = [shared_memory.SharedMemory(name=n, create=True, size=largest) for n in names]
    pool = concurrent.futures.ProcessPoolExecutor(
        args.workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        list(pool.map(read_to_pipe, batches[:args.workers]))  # processes started, files cached
        pipe = _time(pool, batches, lambda i, paths: pool.submit(read_to_pipe, paths),
                     lambda future: future.result(), in_flight)

        def take_shared(item):
            slot, future = item
            views = [blocks[slot].buf[a:a + n] for a, n in future.result()]
            for view in views:
                view.release()

        shared = _time(pool, batches,
                       lambda i, paths: (i % in_flight, pool.submit(
                           read_to_shared, paths, names[i % in_flight])),
                       take_shared, in_flight)
        print(json.dumps({"workers": args.workers, "batch": args.batch,
                          "mean_batch_mb": round(sum(sum(os.path.getsize(p) for p in b)
                                                     for b in batches[:count]) / count / 1e6, 1),
                          "pipe": pipe, "shared_memory": shared}, indent=2))
    finally:
        pool.shutdown(cancel_futures=True)
        for block in blocks:
            block.close()
            block.unlink()


if __name__ == "__main__":
    main()
