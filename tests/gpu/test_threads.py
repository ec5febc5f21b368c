"""A pass's threads (preprocessing/gpu/threads.py) driven by plain callables: batches
in order whatever the lanes' timing, dropped batches skipped, failures raised to the
consumer, and every shared-memory block given back, however the pass ends."""

import concurrent.futures
import itertools
import random
import threading
import time

import pytest

from preprocessing.gpu.threads import END, Running, Work


class Blocks:
    """Stands in for the stream: block i is batch i's; records what was given back."""

    def __init__(self, slow=0.0, drop=(), fail=None):
        self.slow, self.drop, self.fail = slow, set(drop), fail
        self.held, self.released = [], []
        self.lock = threading.Lock()

    def submit(self, position):
        with self.lock:
            self.held.append(position)
        done = concurrent.futures.Future()
        done.set_result(["slot"])
        return ["record"], done, position

    def materialize(self, parts, lane):
        time.sleep(random.uniform(0, self.slow))  # lanes finish out of order
        if parts == self.fail:
            raise OSError("decode failed")
        return None if parts in self.drop else f"batch {parts}"

    def release(self, block):
        with self.lock:
            self.released.append(block)

    def work(self, lanes=3):
        return Work(submit=self.submit, finish=lambda position, records, slots, block:
                    (position, position), materialize=self.materialize,
                    release=self.release, lanes=lanes, prefetch=1, plan_ahead=2)


def take_all(running):
    taken = []
    while (item := running.take()) is not END:
        taken.append(item)
    return taken


def test_lanes_hand_out_batches_in_order_and_skip_the_dropped():
    blocks = Blocks(slow=0.01, drop={3})
    running = Running(iter(range(12)), blocks.work())
    taken = take_all(running)
    running.stop()
    assert taken == [(i, f"batch {i}") for i in range(12) if i != 3]
    assert sorted(blocks.released) == list(range(12))  # each block given back once


def test_a_failure_reaches_the_consumer_and_stopping_gives_every_block_back():
    blocks = Blocks(fail=2)
    running = Running(iter(range(12)), blocks.work(lanes=1))
    with pytest.raises(RuntimeError, match="the JPEG input pipeline failed: OSError"):
        take_all(running)
    running.stop()
    endless = Blocks(slow=0.005)
    running = Running(itertools.count(), endless.work())
    assert [running.take() for _ in range(5)] == [(i, f"batch {i}") for i in range(5)]
    running.stop()  # mid-pass: planned, queued and decoding batches alike
    for each in (blocks, endless):
        assert sorted(each.released) == sorted(each.held) == sorted(set(each.held))
