"""A meter read in the background: what the energy and the machine-state callbacks
sample through each epoch, in one place.

`Sampler(read, interval_seconds, name)` calls `read()` in a daemon thread every
`interval_seconds` from `start()` to `stop()`, keeping (time, value) pairs, the time
(time.perf_counter) the middle of the read. A read that raises ends the sampling for
good (a failing meter never stops training) and `error` says why; `seconds` is the
readers' own time, all samples (what the thread spent). No Keras.
"""

from __future__ import annotations

import threading
import time


class Sampler:
    def __init__(self, read, interval_seconds: float, name: str, argument: str = "read"):
        """`argument`: what the caller calls `read`, for the refusal's words."""
        if not callable(read):
            raise ValueError(f"{argument} must be a callable, received {read!r}")
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be > 0, received {interval_seconds}")
        self.read, self.interval_seconds, self.name = read, interval_seconds, name
        self.error: str | None = None
        self.seconds = 0.0
        self._samples: list[tuple[float, object]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def _run(self):
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                value = self.read()
            except Exception as error:  # noqa: BLE001 - a failing meter ends sampling only
                self.error = f"{type(error).__name__}: {str(error)[:120]}"
                return
            now = time.perf_counter()
            self.seconds += now - started
            with self._lock:
                self._samples.append(((started + now) / 2, value))
            self._stop.wait(self.interval_seconds)

    def start(self) -> None:
        """Sampling anew (the samples before are dropped), unless a read has failed."""
        self.stop()
        with self._lock:
            self._samples = []
        if self.error is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def samples(self, start: float = float("-inf"), end: float = float("inf")) -> list:
        """The (time, value) pairs read between `start` and `end` (perf_counter)."""
        with self._lock:
            return [(t, value) for t, value in self._samples if start <= t <= end]
