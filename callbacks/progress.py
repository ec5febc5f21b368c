"""The console during `fit`: the few figures a person watches; the rest go to the logs.

Keras's own progress bar prints every key of `logs`: about twenty figures here, a
900-character line per epoch. This one prints loss, top-1, images/sec and dollars:
a bar redrawn in place on a terminal (verbose 1) or, to a file or a pipe (verbose 2),
a line per epoch and one every `line_every_seconds` within it, each naming the epoch
of the run (a resumed run's short first `fit` included) and what is left: of the epoch (the bar) and of the run, estimated from the pace so far.
Every figure still reaches metrics.jsonl and TensorBoard, whose sink reads `logs`.

It is a `ProgbarLogger` so that `fit` uses it instead of adding Keras's own, and
follows fit's `verbose` as Keras's would. Validation inside fit prints nothing.

`PointProgress` is the benchmark points' (a sweep point, a ladder rung): their fits run
with verbose=0, and much of a point is no fit at all (building, compiling), so it names
the point's phase and speaks from a thread of its own.
"""

from __future__ import annotations

import sys
import threading
import time

import keras

from callbacks.figures.bill import usd

BAR_WIDTH = 20
REDRAW_SECONDS = 0.2


def duration(seconds: float) -> str:
    """A short duration: "42 s", "12 min", "3.4 h"."""
    if seconds < 100:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 6000 else f"{seconds / 3600:.1f} h"


def figures(logs: dict) -> str:
    """The watched figures of `logs`, e.g. "loss 0.4123 - top-1 0.8750 - 1,670 images/sec":
    the epoch's steady-state rate at its end, the running rate during it."""
    shown = []
    for key, label in (("loss", "loss"), ("top1", "top-1"), ("val_top1", "val top-1")):
        if logs.get(key) is not None:
            shown.append(f"{label} {float(logs[key]):.4f}")
    rate = logs.get("epoch_images_per_sec", logs.get("running_images_per_sec"))
    if rate is not None:
        shown.append(f"{float(rate):,.0f} images/sec")
    if logs.get("cost_usd") is not None:
        shown.append(usd(float(logs["cost_usd"])))
    return " - ".join(shown)


class Progress(keras.callbacks.ProgbarLogger):
    """Prints training progress with the watched figures only.

    Args:
        stream: where to print (default sys.stdout).
        total_epochs: epochs of the whole run (default: the fit's own), so that a
            resumed run's short first fit still says "epoch 4/6".
        steps_per_epoch: steps of a full epoch (default: the fit's own), for the
            time left in the run.
        stop_request: the process's StopRequest (callbacks.stops.PROCESS_STOP), if
            any: once a stop is asked for (SIGTERM, Ctrl-C), the bar's line is ended,
            so what the stop prints next (the closing lines, the error line) starts
            a line of its own rather than being glued to the bar.
        line_every_seconds: at --verbose=2 (output to a file or a pipe: nohup, CI,
            `| tee`), a progress line this often within an epoch, so a long epoch is
            not silent until it ends; 0: none.
    """

    async_safe = True  # O(1) work and a print, like Keras's own bar

    def __init__(self, stream=None, total_epochs: int | None = None,
                 steps_per_epoch: int | None = None, stop_request=None,
                 line_every_seconds: float = 0):
        super().__init__()
        self.line_every_seconds = line_every_seconds
        self.stream = stream
        self.stop_request = stop_request
        self.total_epochs = total_epochs
        self.steps_per_epoch = steps_per_epoch
        self._epoch = 0
        self._epoch_seconds = None  # a full epoch's seconds, from the last one finished
        self._began = self._drawn_at = 0.0
        self._width = 0  # of the bar drawn last, to clear it
        self._done = 0  # steps of this epoch done, as far as the hooks have told
        self._lock = threading.Lock()  # on JAX, batch hooks run in worker threads

    def _write(self, text: str):
        stream = self.stream or sys.stdout
        stream.write(text)
        stream.flush()

    def _silent(self, *args, **kwargs):
        """Validation inside fit (and prediction) print nothing."""

    on_test_begin = on_test_batch_end = on_test_end = _silent
    on_predict_begin = on_predict_batch_end = on_predict_end = _silent

    def on_train_begin(self, logs=None):
        # The line is ended as the stop is asked for, not at the next batch hook: the
        # checkpoint callback may take the stop at a boundary this hook has passed
        # (or, on JAX, before this hook's thread runs), and "status: preempted" would
        # follow the bar on its line.
        if self.stop_request is not None:
            self.stop_request.when_requested(self._stop_asked)

    def on_train_end(self, logs=None):
        if self.stop_request is not None:
            self.stop_request.forget(self._stop_asked)

    def _stop_asked(self):
        with self._lock:
            self._end_line()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch, self._began, self._drawn_at, self._done = epoch, time.time(), 0.0, 0

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:  # hooks may run out of order: the count never goes back
            self._done = max(self._done, batch + 1)
            if self.stop_request is not None and self.stop_request.requested.is_set():
                return  # stopping: _stop_asked ended the line, nothing more to draw
            now = time.time()
            if self.verbose == 1 and now - self._drawn_at >= REDRAW_SECONDS:
                self._drawn_at = now
                self._redraw(self._status(self._done, now, logs))
            elif (self.verbose == 2 and self.line_every_seconds
                  and now - max(self._drawn_at, self._began) >= self.line_every_seconds):
                self._drawn_at = now  # a file or a pipe: a line now and then, not a bar
                self._write(self._status(self._done, now, logs) + "\n")

    def _name(self, epoch: int) -> str:
        return f"epoch {epoch + 1}/{self.total_epochs or self.epochs}"

    def _full_epoch_steps(self) -> int | None:
        return self.steps_per_epoch or self.target

    def _after_this_epoch(self, epoch: int, pace: float | None) -> float | None:
        """Seconds the epochs after `epoch` will take: a full epoch's seconds as the
        last one took, else at `pace` (seconds per step of this one)."""
        left = (self.total_epochs or self.epochs or 0) - epoch - 1
        per_epoch = self._epoch_seconds
        if per_epoch is None and pace is not None and self._full_epoch_steps():
            per_epoch = pace * self._full_epoch_steps()
        return None if per_epoch is None else max(left, 0) * per_epoch

    def _status(self, done: int, now: float, logs) -> str:
        """The bar's text: steps done of the epoch, time, ETAs, the watched figures."""
        elapsed = now - self._began
        if self.target:
            filled = BAR_WIDTH * min(done, self.target) // self.target
            bar = f"{done}/{self.target} [{'=' * filled}{'.' * (BAR_WIDTH - filled)}]"
        else:
            bar = f"{done} steps"
        text = f"{self._name(self._epoch)} step {bar} {duration(elapsed)}"
        pace = elapsed / done if done else None
        if pace is not None and self.target:
            epoch_left = pace * max(self.target - done, 0)
            text += f", ETA {duration(epoch_left)}"
            rest = self._after_this_epoch(self._epoch, pace)
            if rest:
                text += f" (run {duration(epoch_left + rest)})"
        return f"{text} - {figures(logs or {})}"

    def _redraw(self, line: str):
        self._write("\r" + line.ljust(self._width))
        self._width = len(line)

    def _end_line(self):
        """Ends the bar's line, if one is drawn (what follows starts a line)."""
        if self._width:
            self._write("\n")
            self._width = 0

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.time() - self._began
        with self._lock:
            if self._done and self._full_epoch_steps():  # this epoch's pace, a full epoch
                self._epoch_seconds = seconds / self._done * self._full_epoch_steps()
        if not self.verbose:
            return
        line = f"{self._name(epoch)} - {duration(seconds)}"
        rest = self._after_this_epoch(epoch, None)
        if rest:
            line += f" - run ETA {duration(rest)}"
        line += f" - {figures(logs or {})}"
        if self.verbose == 1:
            self._redraw(line)
            self._end_line()
        else:
            self._write(line + "\n")


class PointProgress(keras.callbacks.Callback):
    """A benchmark point's progress (a sweep point, a ladder rung), so that no point is
    silent while it builds, compiles, times and traces: minutes each on a CPU.

    A point runs several fits with verbose=0 (a warm-up that compiles, timed windows,
    a traced fit) and work outside any fit (building the model, the data): the
    measuring code names each phase (`phase`), this callback counts the fit's steps,
    and a thread of its own speaks where no step comes (a compile has no hook). On a
    terminal (verbose 1) one line is redrawn in place, "[sweep] global batch 64:
    timing window 2/3, step 37/100, 1 min"; to a file or a pipe (verbose 2), such a
    line every `line_every_seconds`; verbose 0 prints nothing. `close` clears the
    terminal's line (the point's result line takes its place) and stops the thread.

    Args:
        label: what is measured, e.g. "[sweep] global batch 64" (the result line's).
        verbose: 0, 1 (a line redrawn in place) or 2 (whole lines).
        stream: where to write (default sys.stdout).
        line_every_seconds: verbose 2's period (BENCH_PROGRESS_LINE_SECONDS, 30 s).
        stop_request: the process's StopRequest: once a stop is asked for, the
            terminal's line is ended and nothing more is drawn.
    """

    async_safe = True  # a counter under a lock, and a write now and then

    def __init__(self, label: str, verbose: int, stream=None,
                 line_every_seconds: float = 30.0, stop_request=None):
        super().__init__()
        self.label, self.verbose, self.stream = label, verbose, stream
        self.line_every_seconds = line_every_seconds
        self.stop_request = stop_request
        self._lock = threading.Lock()
        self._phase, self._target, self._done = "starting", None, 0
        self._started = time.time()
        self._spoke = self._started  # when a line was written last (verbose 2)
        self._width = 0  # of the line drawn last (verbose 1), to clear it
        self._closed = threading.Event()
        self._thread = None
        if verbose in (1, 2):
            if stop_request is not None:
                stop_request.when_requested(self._stop_asked)
            self._thread = threading.Thread(target=self._tick, daemon=True,
                                            name="point-progress")
            self._thread.start()

    def phase(self, text: str, steps: int | None = None) -> None:
        """The point is now doing `text` (e.g. "compiling"), a fit of `steps` if any."""
        with self._lock:
            self._phase, self._target, self._done = text, steps, 0
            self._draw_now(time.time())

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:
            self._done = max(self._done, batch + 1)  # hooks may run out of order (JAX)
            now = time.time()
            if self.verbose == 1 and now - self._drawn_at >= REDRAW_SECONDS:
                self._draw_now(now)

    def status(self, now: float | None = None) -> str:
        """The line: label, phase, steps done of the fit, time in the point."""
        now = time.time() if now is None else now
        steps = (f", step {self._done}/{self._target}" if self._target else "")
        return f"{self.label}: {self._phase}{steps}, {duration(now - self._started)}"

    _drawn_at = 0.0

    def _draw_now(self, now: float) -> None:
        """Redraws the terminal's line (verbose 1); the caller holds the lock."""
        if self.verbose != 1 or self._closed.is_set():
            return
        line = self.status(now)
        self._write("\r" + line.ljust(self._width))
        self._width, self._drawn_at = len(line), now

    def _tick(self) -> None:
        """Speaks where no hook does: the terminal's line each second (its clock), a
        whole line every `line_every_seconds` (verbose 2)."""
        period = 1.0 if self.verbose == 1 else min(1.0, self.line_every_seconds)
        while not self._closed.wait(period):
            with self._lock:
                now = time.time()
                if self._closed.is_set():
                    return
                if self.verbose == 1:
                    self._draw_now(now)
                elif now - self._spoke >= self.line_every_seconds:
                    self._spoke = now
                    self._write(self.status(now) + "\n")

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stdout
        stream.write(text)
        stream.flush()

    def _stop_asked(self) -> None:
        self.close(clear=False)

    def close(self, clear: bool = True) -> None:
        """Stops speaking; the terminal's line is cleared (`clear`: what follows takes
        its place) or ended (a stop: what follows starts a line of its own)."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            if self._width:
                self._write("\r" + " " * self._width + "\r" if clear else "\n")
                self._width = 0
        if self.stop_request is not None:
            self.stop_request.forget(self._stop_asked)
