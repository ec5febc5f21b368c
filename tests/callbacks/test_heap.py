"""callbacks/heap.py: the heap is frozen again once fit has compiled, and only then."""

import gc
import weakref

import numpy as np
import pytest

from callbacks.heap import FreezeAfterCompile, frozen_heap


class Node:
    pass


def _in_collected_generations(objects) -> int:
    """How many of `objects` full collections would scan (generations 0-2: not frozen)."""
    ids = {id(o) for o in objects}
    return sum(id(o) in ids for g in (0, 1, 2) for o in gc.get_objects(generation=g))


def test_refreezes_after_the_first_batch_and_first_evaluation_only():
    callback = FreezeAfterCompile()
    loose = [Node() for _ in range(100)]
    callback.on_train_batch_end(0)  # no freeze around it: nothing to do
    assert gc.get_freeze_count() == 0 and callback.refrozen == {"train": False, "test": False}
    assert _in_collected_generations(loose) == len(loose)
    with frozen_heap():
        made = [Node() for _ in range(5000)]  # what a compile leaves, say
        assert _in_collected_generations(made) == len(made)
        callback.on_train_batch_end(0)
        assert _in_collected_generations(made) == 0 and callback.refrozen["train"]
        more = [Node() for _ in range(5000)]
        callback.on_train_batch_end(1)  # once only: each call would be a full collection
        assert _in_collected_generations(more) == len(more)
        callback.on_test_end()
        assert _in_collected_generations(more) == 0 and callback.refrozen["test"]
        after = [Node() for _ in range(100)]
        callback.on_test_end()
        assert _in_collected_generations(after) == len(after)
        node = Node()  # garbage made after the refreeze is still collected
        node.itself = node
        alive = weakref.ref(node)
        del node
        gc.collect()
        assert alive() is None
    assert gc.get_freeze_count() == 0  # frozen_heap's end unfreezes everything
    assert _in_collected_generations(made + more) == len(made) + len(more)


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


def test_frozen_heap_freezes_what_lives_and_still_collects_new_garbage():
    """Training runs inside frozen_heap (callbacks/heap.py): full collections skip
    what lived before it, garbage made meanwhile is still collected, and nothing stays
    frozen after it, even when training raises."""
    with pytest.raises(RuntimeError):
        with frozen_heap():
            assert gc.get_freeze_count() > 1000  # pytest, numpy, Keras...
            node = Node()
            node.itself = node  # a cycle: only the cyclic collector frees it
            alive = weakref.ref(node)
            del node
            gc.collect()
            assert alive() is None
            raise RuntimeError("training failed")
    assert gc.get_freeze_count() == 0
    with frozen_heap():  # nested: the inner one leaves the outer freeze alone
        frozen = gc.get_freeze_count()
        with frozen_heap():
            pass
        # still frozen (an unfreeze would make it 0); other threads' frees of frozen
        # objects (an input pipeline's, left by another test) may lower it by a few
        assert gc.get_freeze_count() > frozen // 2
    assert gc.get_freeze_count() == 0
