"""Cloud cost: a running dollar meter, like the bill the run will get.

Billing starts when the run starts (importing, compiling, input stalls and
evaluation are all billed, as a cloud bills them) and counts the time billed by
earlier attempts of a resumed run. Figures are computed from wall-clock time and
the price, never from throughput alone.
"""

from __future__ import annotations

import time

import keras

from callbacks.figures.money import (
    billed_seconds,
    billed_usd_per_million_images,
    cost_usd,
    projected_cost_usd,
)


class CloudCost(keras.callbacks.Callback):
    """Charges wall-clock time at a price per hour and projects the whole run.

    Publishes into epoch `logs`: `cost_usd` (so far), `billed_hours`,
    `usd_per_epoch` (the last epoch), `projected_cost_usd` (the whole run at the
    last epoch's pace), `billed_usd_per_million_images` (billed dollars per
    million training images so far; not `usd_per_million_images`, which is price
    over steady-state rate: see callbacks/figures/money.py); into batch logs a running `cost_usd`. Public
    attributes hold the same figures.

    Args:
        price_per_hour_usd: dollars per wall-clock hour for all machines of the run.
        start_time: `time.time()` when billing started (the process start).
        billed_seconds_before: seconds billed by earlier attempts (resume).
        images_before: training images processed by earlier attempts.
        global_batch_size: images per training step.
        total_epochs: epochs the run will train, for the projection.
    """

    async_safe = True

    def __init__(self, price_per_hour_usd: float, start_time: float | None = None,
                 billed_seconds_before: float = 0.0, images_before: int = 0,
                 global_batch_size: int = 1, total_epochs: int = 1):
        super().__init__()
        if price_per_hour_usd is None or price_per_hour_usd < 0:
            raise ValueError(f"price_per_hour_usd must be >= 0, received {price_per_hour_usd}")
        if billed_seconds_before < 0:
            raise ValueError(f"billed_seconds_before must be >= 0, "
                             f"received {billed_seconds_before}")
        self.price_per_hour_usd = float(price_per_hour_usd)
        self.start_time = time.time() if start_time is None else start_time
        self.billed_seconds_before = billed_seconds_before
        self.images = images_before
        self.global_batch_size = global_batch_size
        self.total_epochs = total_epochs
        self.cost_usd = None
        self.usd_per_epoch = None
        self.projected_cost_usd = None
        self._epoch_start_cost = None

    def billed_seconds(self) -> float:
        """Seconds billed so far, earlier attempts included."""
        return billed_seconds(self.start_time, self.billed_seconds_before)

    def current_cost_usd(self) -> float:
        return cost_usd(self.billed_seconds(), self.price_per_hour_usd)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_cost = self.current_cost_usd()

    def on_train_batch_end(self, batch, logs=None):
        if logs is not None:
            logs["cost_usd"] = self.current_cost_usd()

    def on_epoch_end(self, epoch, logs=None):
        steps = (self.params or {}).get("steps") or 0
        self.images += steps * self.global_batch_size
        billed = self.billed_seconds()
        self.cost_usd = cost_usd(billed, self.price_per_hour_usd)
        epoch_cost = self.usd_per_epoch = self.cost_usd - (self._epoch_start_cost or 0.0)
        self.projected_cost_usd = projected_cost_usd(self.cost_usd, epoch_cost,
                                                     self.total_epochs - epoch - 1)
        if logs is None:
            return
        logs["cost_usd"] = self.cost_usd
        logs["billed_hours"] = billed / 3600.0
        logs["usd_per_epoch"] = epoch_cost
        logs["projected_cost_usd"] = self.projected_cost_usd
        if self.images:
            logs["billed_usd_per_million_images"] = billed_usd_per_million_images(
                self.cost_usd, self.images)
