"""SIGTERM and SIGINT: noted at once, acted on at the next step boundary, never lost.

`install()` runs first thing in app/main.py, before any heavy import, so a signal
is never met by Python's default action. Both signals set the process's
`StopRequest` (callbacks/stops.py); the checkpoint callback saves at the next step
boundary and raises `Preempted` (exit 75), and the stages before training check
it too. More SIGTERMs change nothing; a second SIGINT (Ctrl-C twice) stops at once.

Before the run starts (`run_starts()`, called as the run folder is about to be
made) nothing needs saving: a Ctrl-C then ends the process at once, exit 130, in
one line saying nothing was written. A SIGTERM then is a preemption like any other
(exit 75, "before training started", with the command that resumes): the job's
restart reruns it. app/main.py routes a Ctrl-C that comes before `install()` here too.

Python runs signal handlers on the main thread only, between bytecodes: a main
thread blocked inside TensorFlow or JAX (e.g. waiting for an input stream that
yields nothing) would never see them. So the handlers only wake a watcher thread
(through `signal.set_wakeup_fd`, which the C-level handler writes to at once),
and the watcher ends the process itself if no step boundary has taken the
request within GRACE_SECONDS (cloud preemption notices give about 30 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from callbacks.stops import PROCESS_STOP

GRACE_SECONDS = 25.0
EXIT_PREEMPTED = 75
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by SIGINT
EXIT_STALLED = 69  # no training progress (see stalled())


def _line(message: str) -> None:
    try:  # a closed stderr (its reader gone) must not stop the exit that follows
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# Set once the run folder is about to be written; the lock makes "not started yet,
# so exit at once" and "started" exclusive (an exit never lands in the first write).
_RUN_STARTED = threading.Event()
_STARTING = threading.RLock()  # re-entered by the main thread inside `preparing`
_RUN_FOLDER: list[str] = []  # the run folder, once started: what a stop's line says it kept
INTERRUPTED_EARLY = "interrupted (SIGINT) before the run started; nothing was written"


_UNDO_BEFORE_START: list = []  # what a Ctrl-C before the start undoes (the preflight's traces)


def undo_if_interrupted_before_start(undo) -> None:
    """Registers `undo()` (e.g. removing the run folder the preflight made and locked)
    to run if a Ctrl-C ends the process before `run_starts`: "nothing was written"
    stays true."""
    with _STARTING:
        _UNDO_BEFORE_START.append(undo)


@contextlib.contextmanager
def preparing():
    """Within the block (the preflight making the run folder and registering its undo),
    an early Ctrl-C waits for the block to end, then undoes what it made: a SIGINT
    between the folder's making and its undo's registration left the folder behind."""
    with _STARTING:
        yield


def run_starts(logdir: str) -> None:
    """Marks the run in `logdir` as started (before its folder is made): from here on
    a Ctrl-C stops at the next step boundary, saving a checkpoint, like a SIGTERM."""
    with _STARTING:
        _RUN_FOLDER[:] = [logdir]
        _RUN_STARTED.set()


def _kept(last: str = "the last checkpoint") -> str:
    from callbacks.records.checkpoint_files import kept_line

    return kept_line(_RUN_FOLDER[0] if _RUN_FOLDER else None, last)


def install(request=PROCESS_STOP) -> None:
    """Routes SIGTERM and SIGINT to `request` and starts the watcher (main thread only)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    # The wake-up pipe first, then the handlers: a signal that lands between the two
    # is written to the pipe by Python's C-level handler, whichever Python handler
    # runs for it later. The other way round, a SIGINT taken by C just before the swap
    # ran the new no-op handler with no pipe yet: lost. One taken before the pipe is
    # run by main.py's early handler, which signal.signal() calls before it swaps
    # (pending signals first), and replayed. (One taken in Python's own start-up is
    # out of reach: inside a .pth file's import, a KeyboardInterrupt raised in a
    # class's __set_name__ becomes a RuntimeError that `site` prints and goes on from,
    # and Python's check of main.py as a zip archive prints its KeyboardInterrupt as
    # "Failed checking if argv[0] is an import path entry" and goes on: the run starts;
    # tests/test_flag_door.py's first-milliseconds test.)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: None)  # the watcher does the work
    threading.Thread(target=_watch, args=(read_end, request), daemon=True,
                     name="signals").start()


def _watch(read_end: int, request) -> None:
    interrupts = 0
    while True:
        for number in os.read(read_end, 64):
            if number not in (signal.SIGTERM, signal.SIGINT):
                continue
            name = signal.Signals(number).name
            interrupts += number == signal.SIGINT
            if number == signal.SIGINT:
                _exit_if_not_started()
            if interrupts >= 2:
                _line(f"interrupted twice (SIGINT): stopped at once; {_kept()}")
                os._exit(EXIT_INTERRUPTED)
            if not request.requested.is_set():
                # The grace first: the request's listeners (the progress bar ending its
                # line) write to the terminal, which may block.
                threading.Thread(target=_enforce_grace, args=(request,), daemon=True,
                                 name="grace").start()
                request.request(name)


def _exit_if_not_started() -> None:
    with _STARTING:
        if not _RUN_STARTED.is_set():
            for undo in _UNDO_BEFORE_START:
                try:
                    undo()
                except Exception:  # noqa: BLE001 (exiting: the line and exit code matter)
                    pass
            _line(INTERRUPTED_EARLY)
            os._exit(EXIT_INTERRUPTED)  # with the lock held: the run never starts


def _enforce_grace(request) -> None:
    if request.taken.wait(GRACE_SECONDS):
        return  # the run is stopping on its own
    _line(f"preempted ({request.signal_name}) but no step boundary came within "
          f"{GRACE_SECONDS:.0f} s (waiting for data or a device?); stopped without a new "
          f"checkpoint, {_kept('the last one')}; rerun the same command to resume")
    os._exit(EXIT_PREEMPTED)


def stalled(seconds: float) -> None:
    """Ends a run whose training made no progress for `seconds` (called by the
    stall watchdog's thread while the main thread is stuck)."""
    _line(f"no training step finished for {seconds:.0f} s: the input stream yields "
          "nothing (are its images all undecodable, or is its storage hung?); stopped, "
          f"{_kept()}")
    os._exit(EXIT_STALLED)
