"""callbacks/sampling.py: a meter read in a background thread, by a real thread and
a real clock: samples every interval, in the window asked, none kept across a start;
a read that raises ends sampling for good and says why; stop joins the thread."""

import threading
import time

import pytest

from callbacks.sampling import Sampler


def test_it_samples_at_its_interval_and_returns_the_window_asked():
    count = iter(range(10_000))
    sampler = Sampler(lambda: next(count), 0.01, "test")
    began = time.perf_counter()
    sampler.start()
    time.sleep(0.3)
    middle = time.perf_counter()
    time.sleep(0.1)
    sampler.stop()
    samples = sampler.samples()
    assert 10 <= len(samples) <= 45, len(samples)  # about 40 at 10 ms, on a busy host fewer
    assert [v for _, v in samples] == list(range(len(samples)))
    assert all(began <= t for t, _ in samples)
    assert [s for s in samples if s[0] <= middle] == sampler.samples(end=middle)
    assert sampler.seconds >= 0 and sampler.error is None
    assert not any(t.name == "test" for t in threading.enumerate())  # joined
    sampler.start()  # a new epoch: the samples before are dropped
    sampler.stop()
    assert len(sampler.samples()) <= 1


def test_a_read_that_fails_ends_sampling_for_good_and_says_why():
    calls = []

    def read():
        calls.append(1)
        raise OSError("NVML gone")

    sampler = Sampler(read, 0.01, "test")
    sampler.start()
    time.sleep(0.1)
    sampler.stop()
    assert calls == [1] and sampler.samples() == []
    assert sampler.error == "OSError: NVML gone"
    sampler.start()  # never again
    sampler.stop()
    assert calls == [1]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="read must be a callable"):
        Sampler(None, 1.0, "x")
    with pytest.raises(ValueError, match="interval_seconds must be > 0"):
        Sampler(lambda: 0, 0, "x")
