"""callbacks/heap.py: the heap is frozen again once fit has compiled, and only then."""

import gc
import weakref

import numpy as np

from app.engine.timing import frozen_heap
from callbacks.heap import FreezeAfterCompile


class Node:
    pass


def test_refreezes_after_the_first_batch_and_first_evaluation_only():
    callback = FreezeAfterCompile()
    callback.on_train_batch_end(0)  # no freeze around it: nothing to do
    assert gc.get_freeze_count() == 0 and callback.refrozen == {"train": False, "test": False}
    with frozen_heap():
        before = gc.get_freeze_count()
        made = [Node() for _ in range(5000)]  # what a compile leaves, say
        callback.on_train_batch_end(0)
        after_train = gc.get_freeze_count()
        assert after_train >= before + len(made)
        more = [Node() for _ in range(5000)]
        callback.on_train_batch_end(1)  # once only: each call would be a full collection
        assert gc.get_freeze_count() <= after_train
        callback.on_test_end()
        assert gc.get_freeze_count() >= after_train + len(more)
        frozen = gc.get_freeze_count()
        callback.on_test_end()
        assert gc.get_freeze_count() <= frozen
        node = Node()  # garbage made after the refreeze is still collected
        node.itself = node
        alive = weakref.ref(node)
        del node
        gc.collect()
        assert alive() is None
    assert gc.get_freeze_count() == 0  # frozen_heap's end unfreezes everything


def test_fit_freezes_what_its_compile_made():
    """A real Keras fit: the objects alive after the first step (compiled) are frozen
    by the end of the second batch; nothing stays frozen after training."""
    import keras

    counts = {}

    class Probe(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            counts.setdefault(("begin", batch), gc.get_freeze_count())

        def on_train_batch_end(self, batch, logs=None):
            counts.setdefault(("end", batch), gc.get_freeze_count())

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4),
                              keras.layers.Dense(2)])
    model.compile("sgd", "mse")
    x, y = np.zeros((12, 8), "float32"), np.zeros((12, 2), "float32")
    with frozen_heap():
        model.fit(x, y, batch_size=4, epochs=1, verbose=0,
                  callbacks=[FreezeAfterCompile(), Probe()])
    assert counts[("end", 0)] > counts[("begin", 0)], counts  # the first step's compile
    # No more freezing (frozen objects freed by their last reference leave the count).
    assert counts[("end", 2)] <= counts[("end", 0)], counts
    assert gc.get_freeze_count() == 0
