"""Compiles the evaluation step while the first training step compiles (JAX).

`fit` compiles its training step on the first batch and its evaluation step only when
the first epoch's validation begins, one after the other on the main thread: from
cold, seconds each (the small ResNet's on an H200: the two with the input
functions ~11 s of its first epoch). When training starts, this callback lowers and
compiles the evaluation step as Keras's JAX trainer will (`jax.jit(model.test_step,
donate_argnums=0)` of the model's state and one validation batch, from their shapes
alone) in a thread, beside the training step's compile (XLA compiles without the
GIL). Nothing reaches Keras's own function directly: the program goes into JAX's
persistent compilation cache, where Keras's compile of the same step finds it
(tests/test_compile_ahead.py counts that hit). So it is added only where that cache
is on, and a change in Keras that made the two programs differ would cost the time
saved, nothing else.

The validation's first hook waits for the thread, so the step is never compiled twice
at once. Not under a keras.distribution (Keras's step is compiled with the state's
shardings there) nor with several processes: the app adds it for one device.
"""

from __future__ import annotations

import threading

import keras


class CompileEvaluationAhead(keras.callbacks.Callback):
    """Compiles the evaluation step in a thread from the start of training.

    Args:
        batch_spec: the validation batch as [(shape, dtype name), ...]: images,
            labels, weights, as the stream yields them.
    """

    async_safe = True

    def __init__(self, batch_spec):
        super().__init__()
        self.batch_spec = [(tuple(shape), str(dtype)) for shape, dtype in batch_spec]
        self.seconds = None  # how long the compile took, once it is done
        self.error = None  # why it failed, where it did (the step then compiles as usual)
        self._thread = None

    def on_train_begin(self, logs=None):
        if self._thread is not None:
            return
        import time

        import jax

        def shapes(variables):
            return [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in variables]

        model = self.model
        state = (shapes(model.trainable_variables), shapes(model.non_trainable_variables),
                 shapes(model.metrics_variables))
        batch = tuple(jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in self.batch_spec)

        def compile_step():
            started = time.perf_counter()
            try:
                jax.jit(model.test_step, donate_argnums=0).lower(state, batch).compile()
                self.seconds = time.perf_counter() - started
            except Exception as error:  # noqa: BLE001 - the step compiles as it would have
                self.error = f"{type(error).__name__}: {error}"

        self._thread = threading.Thread(target=compile_step, name="compile-evaluation",
                                        daemon=True)
        self._thread.start()

    def wait(self):
        if self._thread is not None:
            self._thread.join()

    def on_test_begin(self, logs=None):
        self.wait()

    def on_train_end(self, logs=None):
        self.wait()
