"""Freezes Python's heap again once fit has compiled its steps.

Training runs inside `frozen_heap` (below): Python's full (generation 2)
garbage collections skip every object alive when it began. But `fit` compiles its
steps after that, on its first batch and its first evaluation pass, and a JAX
compile leaves many long-lived objects (traced programs, caches). Every later full
collection scans them all, holding the GIL: the steps' dispatch and the input
pipeline's threads stop meanwhile. With the gpu input pipeline, whose batches make
enough surviving objects to start a full collection every ~5 s, each took 0.19-0.31 s
on the H200 host, three in a 15 s stretch of ResNet-50 training, ~5% of its images/sec
(benchmarks/results/2026-12-01-h200-gc.json, `full_collections_call3`); on synthetic data,
none ran after the compile.

After the first training batch ends (its compile is over) and after the first
evaluation pass, this collects once (garbage first) and freezes what lives, so later
full collections scan only what was made since. `frozen_heap`'s end unfreezes it all.
Outside a freeze (`gc.get_freeze_count() == 0`) it does nothing: whether to freeze is
`frozen_heap`'s decision, not a callback's.
"""

from __future__ import annotations

import contextlib
import gc
import threading

import keras


def refreeze() -> bool:
    """If the heap is frozen: collect, then freeze what is alive now as well.
    Returns whether it did."""
    if not gc.get_freeze_count():
        return False
    gc.collect()
    gc.freeze()
    return True


class FreezeAfterCompile(keras.callbacks.Callback):
    """Calls `refreeze()` after the first training batch and the first evaluation
    pass of the run (those are when `fit` compiles), never again."""

    async_safe = True  # no device work; a collection holds the GIL in any thread

    def __init__(self):
        super().__init__()
        self.refrozen = {"train": False, "test": False}
        self._lock = threading.Lock()  # two worker threads' hooks may arrive at once

    def _once(self, phase: str) -> None:
        with self._lock:
            if not self.refrozen[phase]:
                self.refrozen[phase] = refreeze()

    def on_train_batch_end(self, batch, logs=None):
        self._once("train")

    def on_test_end(self, logs=None):
        self._once("test")


@contextlib.contextmanager
def frozen_heap():
    """While training, Python's cyclic garbage collector skips what is alive now.

    Its full collections scan every tracked object: with a model, Keras and JAX loaded
    they took 0.14-0.27 s holding the GIL, which stalls the input pipeline's threads
    and the steps' dispatch (on an H200 with the gpu pipeline one epoch in four ran
    ~5% slower; frozen, collections took 0.02-0.04 s and the epochs were even:
    benchmarks/results/2026-12-01-h200-gc.json). Garbage is collected first, and cyclic garbage made
    meanwhile is still collected. What fit's compiles make later is frozen by
    callbacks/heap.py's FreezeAfterCompile, inside this freeze; all of it is unfrozen
    at the end. Inside another, it leaves the outer one's freeze as it is.
    """
    if gc.get_freeze_count():  # frozen already (an outer frozen_heap): theirs to undo
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
