"""What every native binding builds on (preprocessing/gpu/native/cuda_driver.py), without
a GPU: libraries loaded once, handles closed when collected."""

import concurrent.futures
import gc

import pytest

from preprocessing.gpu.native.cuda_driver import ClosedWhenCollected, LoadedOnce


def test_native_libraries_load_once_per_class_whichever_thread_asks_first():
    made = []

    class First(LoadedOnce):
        def __init__(self):
            made.append(self)
            if len(made) == 1:
                raise OSError("library not found")  # a failed load is tried again

    class Second(LoadedOnce):
        def __init__(self):
            self.first = First.get()  # one library's set-up may load another

    with pytest.raises(OSError):
        First.get()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        seconds = list(pool.map(lambda _: Second.get(), range(32)))
    assert len({id(s) for s in seconds}) == 1 and len(made) == 2
    assert seconds[0].first is First.get() is made[1]
    assert not isinstance(Second.get(), First)


def test_native_handles_are_closed_when_collected_and_failures_then_ignored():
    closed = []

    class Handle(ClosedWhenCollected):
        def __init__(self, fail):
            self.fail = fail

        def close(self):
            closed.append(self.fail)
            if self.fail:
                raise RuntimeError("library already unloaded")

    Handle(False), Handle(True)  # noqa: B018 - made and dropped at once
    gc.collect()
    assert sorted(closed) == [False, True]  # both closed; the failure did not escape
