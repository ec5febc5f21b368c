"""Stops a `fit` at the next step boundary once a stop is requested (SIGTERM, Ctrl-C).

For fits that save no checkpoint (the throughput sweep's): training's own stop is the
checkpoint callback's, which saves first. This one only takes the request, so the
process's signal watcher (app/run/signals.py) sees the run stopping on its own, and
raises `Preempted`, which the caller turns into what it keeps.
"""

from __future__ import annotations

import keras

from callbacks.stops import Preempted, StopRequest


class StopOnRequest(keras.callbacks.Callback):
    """Raises `Preempted` at the first step boundary after `request` is set.

    Args:
        request: the process's StopRequest (callbacks.stops.PROCESS_STOP).
    """

    async_safe = True  # the check runs in on_train_batch_begin, on the main thread

    def __init__(self, request: StopRequest):
        super().__init__()
        if not isinstance(request, StopRequest):
            raise ValueError(f"request must be a StopRequest, received {request!r}")
        self.request = request
        self.steps = 0  # steps begun in this fit

    def on_train_begin(self, logs=None):
        self.steps = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.request.requested.is_set():
            raise Preempted(self.steps or None, None, self.request.take())
        self.steps = batch + 1
