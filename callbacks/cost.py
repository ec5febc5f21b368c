"""The bill's meter: billed hours and the running cloud cost, like the bill the run
will get.

Billing starts when the run starts (importing, compiling, input stalls and
evaluation are all billed, as a cloud bills them) and counts the time billed by
earlier attempts of a resumed run: the run's `Bill` (callbacks/figures/bill.py)
holds that clock and the prices. Figures are computed from wall-clock time and
the price, never from throughput alone. Hours are billed with or without a price;
dollars only where there is one.
"""

from __future__ import annotations

import keras

from callbacks.figures.bill import (
    Bill,
    billed_usd_per_million_images,
    projected_cost_usd,
)
from callbacks.figures.steps import Position


class CloudCost(keras.callbacks.Callback):
    """Charges wall-clock time at a price per hour and projects the whole run.

    Publishes into epoch `logs`: `billed_hours` (always: metrics.jsonl reads it), and
    where the bill has a price `cost_usd` (so far), `usd_per_epoch` (the
    last epoch), `projected_cost_usd` (the whole run at the last epoch's pace),
    `billed_usd_per_million_images` (billed dollars per million training images so
    far; not `usd_per_million_images`, which is price over steady-state rate: see
    callbacks/figures/bill.py); into batch logs a running `cost_usd`. Each epoch's
    figures are read at one instant, the bill's `epoch_end` (the targets read theirs
    there too). Public attributes hold the same figures.

    Args:
        bill: the run's Bill (its clock, earlier attempts' seconds, its price).
        position: the run's Position (callbacks/figures/steps.py: the images of
            earlier attempts and per training step), or, for a fit of its own, its
            global batch (images per training step).
        total_epochs: epochs the run will train, for the projection.

    Example (the dollars of any fit, billed from its process's start at $3.60/h):

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=[keras.metrics.SparseCategoricalAccuracy("top1")])
    >>> x, y = np.random.rand(256, 4), np.random.randint(0, 3, 256)
    >>> import time
    >>> from callbacks.cost import CloudCost
    >>> from callbacks.figures.bill import Bill
    >>> bill = Bill(started_at=time.time(), price_per_hour_usd=3.6)
    >>> cost = CloudCost(bill, 16, total_epochs=2)
    >>> history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[cost])
    >>> 0 < history.history["cost_usd"][0] <= history.history["cost_usd"][1] < 3.6
    True
    """

    async_safe = True

    def __init__(self, bill: Bill, position: Position | int = 1, total_epochs: int = 1):
        super().__init__()
        if not isinstance(bill, Bill):
            raise ValueError(f"bill must be a Bill, received {bill!r}")
        self.bill = bill
        self.position = Position.of(position)
        self.images = self.position.images_before
        self.total_epochs = total_epochs
        self.cost_usd = None
        self.usd_per_epoch = None
        self.projected_cost_usd = None
        self._epoch_start_cost = None

    def on_epoch_begin(self, epoch, logs=None):
        self.bill.epoch_begins(epoch)
        self._epoch_start_cost = self.bill.cost_usd()

    def on_train_batch_end(self, batch, logs=None):
        if logs is not None and self.bill.price_per_hour_usd is not None:
            logs["cost_usd"] = self.bill.cost_usd()

    def on_epoch_end(self, epoch, logs=None):
        steps = (self.params or {}).get("steps") or 0
        self.images += self.position.images(steps)
        at = self.bill.epoch_end(epoch)  # the instant the epoch's money is read at
        if logs is not None:
            logs["billed_hours"] = self.bill.hours(at)
        self.cost_usd = self.bill.cost_usd(at)
        if self.cost_usd is None:
            return
        epoch_cost = self.usd_per_epoch = self.cost_usd - (self._epoch_start_cost or 0.0)
        self.projected_cost_usd = projected_cost_usd(self.cost_usd, epoch_cost,
                                                     self.total_epochs - epoch - 1)
        if logs is None:
            return
        logs["cost_usd"] = self.cost_usd
        logs["usd_per_epoch"] = epoch_cost
        logs["projected_cost_usd"] = self.projected_cost_usd
        if self.images:
            logs["billed_usd_per_million_images"] = billed_usd_per_million_images(
                self.cost_usd, self.images)
