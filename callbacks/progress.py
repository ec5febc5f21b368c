"""The console during `fit`: the few figures a person watches; the rest go to the logs.

Keras's own progress bar prints every key of `logs`: about twenty figures here, a
900-character line per epoch. This one prints loss, top-1, images/sec and dollars:
a bar redrawn in place on a terminal (verbose 1) or one line per epoch (verbose 2).
Every figure still reaches metrics.jsonl and TensorBoard, whose sink reads `logs`.

It is a `ProgbarLogger` so that `fit` uses it instead of adding Keras's own, and
follows fit's `verbose` as Keras's would. Validation inside fit prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time

import keras

BAR_WIDTH = 20
REDRAW_SECONDS = 0.2


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def figures(logs: dict) -> str:
    """The watched figures of `logs`, e.g. "loss 0.4123 - top-1 0.8750 - 1,670 images/sec"."""
    shown = []
    for key, label in (("loss", "loss"), ("top1", "top-1"), ("val_top1", "val top-1")):
        if logs.get(key) is not None:
            shown.append(f"{label} {float(logs[key]):.4f}")
    if logs.get("images_per_sec") is not None:
        shown.append(f"{float(logs['images_per_sec']):,.0f} images/sec")
    if logs.get("cost_usd") is not None:
        shown.append(_money(float(logs["cost_usd"])))
    return " - ".join(shown)


class Progress(keras.callbacks.ProgbarLogger):
    """Prints training progress with the watched figures only.

    Args:
        stream: where to print (default sys.stdout).
    """

    async_safe = True  # O(1) work and a print, like Keras's own bar

    def __init__(self, stream=None):
        super().__init__()
        self.stream = stream
        self._epoch = 0
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

    on_train_begin = on_test_begin = on_test_batch_end = on_test_end = _silent
    on_predict_begin = on_predict_batch_end = on_predict_end = _silent

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch, self._began, self._drawn_at, self._done = epoch, time.time(), 0.0, 0

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:  # hooks may run out of order: the count never goes back
            self._done = max(self._done, batch + 1)
            now = time.time()
            if self.verbose != 1 or now - self._drawn_at < REDRAW_SECONDS:
                return
            self._drawn_at = now
            self._draw(self._done, now, logs)

    def _draw(self, done: int, now: float, logs):
        if self.target:
            filled = BAR_WIDTH * min(done, self.target) // self.target
            bar = f"{done}/{self.target} [{'=' * filled}{'.' * (BAR_WIDTH - filled)}]"
        else:
            bar = f"{done} steps"
        self._redraw(f"{bar} {now - self._began:.0f} s - {figures(logs or {})}")

    def _redraw(self, line: str):
        self._write("\r" + line.ljust(self._width))
        self._width = len(line)

    def on_epoch_end(self, epoch, logs=None):
        if not self.verbose:
            return
        line = (f"epoch {epoch + 1}/{self.epochs} - {time.time() - self._began:.0f} s - "
                f"{figures(logs or {})}")
        if self.verbose == 1:
            self._redraw(line)
            self._write("\n")
            self._width = 0
        else:
            self._write(line + "\n")
