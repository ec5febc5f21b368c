"""What ends training early, importable without Keras.

`app/main.py` maps the exceptions to exit codes before Keras (and its backend) is
imported, so they live apart from the callbacks that raise them. `StopRequest` is
how a signal (SIGTERM, SIGINT) reaches the training loop: the process's signal
watcher (app/run/signals.py) sets it at once, the checkpoint callback acts on it at
the next step boundary.
"""

from __future__ import annotations

import errno
import threading

# What "the run folder cannot take more" looks like, as the OS says it: full, over
# quota, a read-only mount, its permissions taken away (chmod -R a-w: EACCES; an
# immutable file: EPERM), a file past its size limit, a failing disk. Each ends a run
# in one line and exit 74, wherever the write was (app/main.py).
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                            errno.EPERM, errno.EFBIG, errno.EIO})


class Preempted(Exception):
    """Training stopped after SIGTERM or SIGINT; a checkpoint was saved first if
    there was a step to save. `where` and `kept` replace the line's parts about the
    step and the checkpoint in a mode that measures points, not steps (a sweep: "at
    point 2 of 3", its finished points); the line never says how to resume (the
    caller adds the one command that does)."""

    def __init__(self, step: int | None, path: str | None, signal_name: str = "SIGTERM",
                 kept: str | None = None, where: str | None = None):
        where = where or (f"at step {step}" if step else "before training started")
        saved = kept or (f"checkpoint {path}" if path else "no checkpoint yet")
        super().__init__(f"preempted ({signal_name}) {where}; {saved}")
        self.step, self.path, self.signal_name = step, path, signal_name


class Diverged(Exception):
    """The training loss became NaN or infinite. `checkpoint` is the last good one
    (None if none was saved), set by whoever knows it."""

    def __init__(self, step: int, loss: float, checkpoint: str | None = None):
        super().__init__(f"training loss became {loss} at step {step}")
        self.step, self.loss, self.checkpoint = step, loss, checkpoint


class StorageError(Exception):
    """The run folder cannot be written (full, read-only) or is gone; one line."""

    @classmethod
    def cannot_write(cls, error: OSError, path: str, consequence: str) -> "StorageError":
        """A write under the run folder failed for a STORAGE_ERRNOS reason."""
        return cls(f"cannot write {error.filename or path}: "
                   f"{error.strerror or error}; {consequence}")

    @classmethod
    def folder_lost(cls, path: str, consequence: str) -> "StorageError":
        """The run folder was deleted or replaced while the run held it."""
        return cls(f"the run folder {path} was deleted or replaced during the run; "
                   f"{consequence}")


class StopRequest:
    """A request to stop training at the next step boundary.

    `request` may be called from any thread (it only sets events); `take` is called
    by whoever acts on it, so a watcher can tell a run that is stopping from one
    stuck where no step boundary comes (e.g. waiting for data that never arrives).
    """

    def __init__(self):
        self.requested = threading.Event()
        self.taken = threading.Event()
        self.signal_name = "SIGTERM"
        self._listeners = []

    def request(self, signal_name: str) -> None:
        if not self.requested.is_set():
            self.signal_name = signal_name
            self.requested.set()
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:  # noqa: BLE001 - a listener's fault must not lose the stop
                    pass

    def when_requested(self, listener) -> None:
        """Calls `listener()` once a stop is asked for (in the asking thread; now, if it
        was): e.g. the progress bar ends its line before anything prints the stop."""
        self._listeners.append(listener)
        if self.requested.is_set():
            listener()

    def forget(self, listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def take(self) -> str:
        """Marks the request as being acted on; returns the signal's name."""
        self.taken.set()
        return self.signal_name

    def raise_if_requested(self, step: int | None = None, path: str | None = None) -> None:
        if self.requested.is_set():
            raise Preempted(step, path, self.take())


# The process's one request, set by app/run/signals.py.
PROCESS_STOP = StopRequest()
