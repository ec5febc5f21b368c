"""Top-1 per epoch, the best so far, and when each target top-1 was first reached.

Top-1 is measured once per epoch, on the validation set. A target is "reached"
at the end of the first epoch whose top-1 is at least the target; the hours and
dollars reported are those the run's Bill (callbacks/figures/bill.py) billed by then,
read at the epoch's one instant (`Bill.epoch_end`, the same the bill's meter,
callbacks/cost.py, publishes): hours always, dollars where there is a price. Where
the previous epoch was measured below the target, a linear
interpolation within the epoch is given as well, clearly labelled as such: it
assumes top-1 rose steadily during that epoch.
"""

from __future__ import annotations

import keras

from callbacks.figures.bill import Bill
from callbacks.figures.targets import targets_reached


class TopOneTargets(keras.callbacks.Callback):
    """Tracks top-1 per epoch and the first time each target was reached.

    Reads each epoch's hours and dollars from `bill` (none without one), never from
    the logs: the order of the callbacks carries no figure. Publishes into epoch
    `logs`: `best_val_top1`, and, when targets were given, `targets_reached` (a count;
    without targets it would be a flat 0 everywhere). Public attributes: `history`
    (one dict per epoch: epoch, top1, top5, hours, cost_usd), `best_top1`, and
    `targets()` (a list of dicts: target_top1, reached, epoch, hours, cost_usd,
    interpolated).

    Args:
        targets: top-1 values in (0, 1] to watch for.
        monitor: the epoch-log key holding top-1.
        history: the `history` of earlier attempts (resume), or None.
        bill: the run's Bill, or None (then no hours or dollars).

    Example (the epoch each target top-1 was first reached, and its dollars where it
    is handed the fit's Bill):

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=[keras.metrics.SparseCategoricalAccuracy("top1")])
    >>> x, y = np.random.rand(256, 4), np.random.randint(0, 3, 256)
    >>> from callbacks.accuracy import TopOneTargets
    >>> import time
    >>> from callbacks.figures.bill import Bill
    >>> bill = Bill(started_at=time.time(), price_per_hour_usd=3.6)
    >>> targets = TopOneTargets(targets=(0.01, 1.0), bill=bill)
    >>> _ = model.fit(x, y, validation_data=(x, y), epochs=2, verbose=0, callbacks=[targets])
    >>> [(t["target_top1"], t["reached"], t["epoch"]) for t in targets.targets()]
    [(0.01, True, 1), (1.0, False, None)]
    >>> 0 < targets.targets()[0]["cost_usd"] < 3.6
    True
    """

    def __init__(self, targets=(), monitor: str = "val_top1", history=None,
                 bill: Bill | None = None):
        super().__init__()
        for target in targets:
            if not 0 < target <= 1:
                raise ValueError(f"targets must be in (0, 1], received {target}")
        self.target_values = tuple(sorted(targets))
        self.monitor = monitor
        self.history = list(history or [])
        if bill is not None and not isinstance(bill, Bill):
            raise ValueError(f"bill must be a Bill or None, received {bill!r}")
        self.bill = bill

    @property
    def best_top1(self):
        values = [h["top1"] for h in self.history if h.get("top1") is not None]
        return max(values) if values else None

    def on_epoch_begin(self, epoch, logs=None):
        if self.bill is not None:
            self.bill.epoch_begins(epoch)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        at = self.bill.epoch_end(epoch) if self.bill is not None else None
        top1 = logs.get(self.monitor)
        self.history = [h for h in self.history if h["epoch"] < epoch + 1]  # resume-safe
        self.history.append({
            "epoch": epoch + 1,
            "top1": None if top1 is None else float(top1),
            "top5": logs.get(self.monitor.replace("top1", "top5")),
            "hours": None if at is None else self.bill.hours(at),
            "cost_usd": None if at is None else self.bill.cost_usd(at),
        })
        if self.best_top1 is not None:
            logs["best_" + self.monitor] = self.best_top1
        if self.target_values:
            logs["targets_reached"] = sum(t["reached"] for t in self.targets())

    def targets(self) -> list[dict]:
        """One entry per target: where it was first reached, or reached=False."""
        return targets_reached(self.history, self.target_values)
