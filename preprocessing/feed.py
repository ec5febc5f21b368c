"""Feeding Python iterables to Keras `fit`: one adapter for every non-tf.data stream.

`model.fit` takes a `keras.utils.PyDataset`. Ours serves batches from an iterable:
- an endless training stream (count=None) keeps one iterator for the whole run, so
  its position (and its checkpointable state) carries across epochs;
- a finite stream (count=N, evaluation) starts a new pass whenever Keras asks for
  batch 0, so every evaluation sees every image once.

Batches can be numpy arrays (grain) or device arrays already laid out as the active
`keras.distribution` expects (synthetic data, the GPU pipeline): Keras then has
nothing to move. Where the iterator is checkpointable, `state_at(n)` is its state
after exactly n batches were served, which a checkpoint needs: Keras fetches ahead
of the step it trains, so the iterator's current state is not the model's.
"""

from __future__ import annotations

import collections
import time

import keras  # imported after app.engine.distribute.prepare_backend chose the backend

KEPT_STATES = 32  # how far behind the fetching a checkpoint may ask for a state


class Feed(keras.utils.PyDataset):
    """Serves `count` batches of `iterable` per pass, or endlessly (count=None).

    Args:
        iterable: yields batches; re-iterated for each pass when `count` is set.
        count: batches per pass (evaluation), or None for one endless stream.
    """

    def __init__(self, iterable, count: int | None = None):
        super().__init__(workers=1, use_multiprocessing=False)
        self._iterable, self._count = iterable, count
        self._iterator = None
        self.served = 0
        self.wait_seconds = 0.0  # time `fit` spent waiting here for a batch
        self._states = collections.OrderedDict()

    @property
    def num_batches(self):
        return self._count

    def __len__(self):
        return self._count

    def __getitem__(self, index):
        if self._iterator is None or (self._count is not None and index == 0):
            self._iterator = iter(self._iterable)
        if hasattr(self._iterator, "get_state"):
            self._states[self.served] = self._iterator.get_state()
            while len(self._states) > KEPT_STATES:
                self._states.popitem(last=False)
        started = time.perf_counter()
        batch = next(self._iterator)
        self.wait_seconds += time.perf_counter() - started
        self.served += 1
        return batch

    def state_at(self, served: int):
        """The stream's state after `served` batches, or None if not kept/resumable."""
        if served == self.served and self._iterator is not None and hasattr(
                self._iterator, "get_state"):
            return self._iterator.get_state()
        return self._states.get(served)

    def restore(self, state) -> None:
        """Continues the endless stream from a state saved by `state_at`."""
        if self._iterator is None:
            self._iterator = iter(self._iterable)
        self._iterator.set_state(state)
