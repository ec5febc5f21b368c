"""The training and evaluation steps compiled beside the rest of the start (JAX).

Left to itself, `fit` compiles its training step when it takes its first batch, and
its evaluation step at the first epoch's end: on a small dataset that is most of a
cold start (the small ResNet's training step took 3 s to compile on an H200, 12-16 s
with XLA's autotuning: app/engine/autotune.py), and it starts only once everything
else is done. Here the steps are lowered as soon as the model is compiled
and XLA compiles them in a thread while the run goes on (the FLOP count, the
callbacks, the input's own programs); `fit` then finds them in JAX's persistent
compilation cache instead of compiling them again.

Only where that is sure to pay: the JAX backend, one process, JAX's compilation cache
on (it is what hands the programs to `fit`), and a pipeline that knows its batches'
shapes before the first one (`Datasets.batch_specs`; the device pipeline does). The
steps are lowered as Keras's JAX trainer lowers them (`make_train_function`,
`make_test_function`, `_distribute_data`): the same function, donation, shardings
and argument avals; tests/app/engine/test_precompile.py checks that `fit` compiles neither step
itself. Lowering runs here, on the calling thread (it traces Keras's layers, whose
global settings, such as flash attention, another thread may be changing); only
XLA's compile, which holds no Python lock, runs in the thread.
"""

from __future__ import annotations

import threading
import time


class Precompile:
    """A thread compiling lowered steps, one after the other (the evaluation step
    reuses the training step's autotuning, so the two are not compiled side by side).

    Attributes:
        seconds: once joined, how long the compiles took (None before).
        error: once joined, the first compile's exception, if any (`fit` then
            compiles, and raises, as it would have).
        train_step: once joined, the training step's jax.stages.Compiled (None
            before): app/engine/kernels.py reads the kernels it chose from its text
            at the run's end. (Held that long: one more copy of the step's GPU code
            besides fit's, megabytes; the evaluation step's is dropped.)
        train_served: once joined, whether JAX's compilation cache served the
            training step (True) or XLA compiled it here.
    """

    def __init__(self, lowered: list):
        self.seconds: float | None = None
        self.error: BaseException | None = None
        self.train_step = None
        self.train_served: bool | None = None
        self._lowered = lowered
        self._thread = threading.Thread(target=self._compile, name="precompile-steps",
                                        daemon=True)
        self._thread.start()

    def _compile(self):
        from app.engine import kernels

        started = time.perf_counter()
        try:
            kernels.listen()
            for index, lowered in enumerate(self._lowered):  # jax.stages.Lowered
                hits = kernels.cache_hits_here()
                compiled = lowered.compile()  # into JAX's persistent cache, where fit finds it
                if index == 0:  # the training step
                    self.train_step = compiled
                    self.train_served = kernels.cache_hits_here() > hits
        except Exception as error:  # noqa: BLE001 - fit meets it again, and raises it
            self.error = error
        finally:
            self._lowered = []
            self.seconds = time.perf_counter() - started

    def join(self, stop: threading.Event | None = None) -> float:
        """Waits for the compiles (`fit` would otherwise start them a second time), or
        until `stop` is set (a SIGTERM must not wait for XLA); returns the seconds
        this call waited."""
        started = time.perf_counter()
        while self._thread.is_alive() and not (stop is not None and stop.is_set()):
            self._thread.join(timeout=0.1)
        return time.perf_counter() - started


def start(model, batch_specs, topology) -> Precompile | None:
    """Lowers `model`'s training (and evaluation) step for the batches of
    `batch_specs` and starts compiling them; None where that would not pay (see the
    module's docstring) or where the steps do not lower (`fit` then says why).

    Call it after `model.compile`, before anything else traces the model, and join
    the result before `fit`.
    """
    if why_not(model, batch_specs, topology) is not None:
        return None
    train_spec, validation_spec = batch_specs
    try:
        lowered = [_lower(model, train_spec, train=True)]
        if validation_spec is not None:
            lowered.append(_lower(model, validation_spec, train=False))
    except Exception:  # noqa: BLE001 - fit lowers them again, and raises what is wrong
        return None
    return Precompile(lowered)


def why_not(model, batch_specs, topology) -> str | None:
    """Why this run's steps are not compiled here, ahead of `fit` (None: they are);
    the kernels' record says it where it cannot name them."""
    if topology.backend != "jax":
        return "the TensorFlow backend compiles its step inside fit"
    if topology.num_processes != 1:
        return "a run of several processes compiles its step inside fit"
    if not batch_specs:
        return "this input pipeline does not know its batches' shapes before the first"
    if not topology.compilation_cache_dir:
        return "JAX's compilation cache is off, so fit compiles the step itself"
    if not getattr(model, "jit_compile", False) or model.run_eagerly:
        return "the model's step is not compiled by XLA"
    return None


def _lower(model, spec: tuple, train: bool):
    """The jitted step of Keras's JAX trainer, lowered for batches of `spec`."""
    import jax
    from keras.src import distribution as distribution_lib

    # What fit does first: build the loss and metrics (their variables are state).
    model._symbolic_build(data_batch=spec)
    distribution = distribution_lib.distribution()
    out_shardings = None
    if distribution is not None:  # Keras's make_train_function / make_test_function
        trainable, non_trainable, optimizer, metrics = model._get_state_sharding_spec()
        out_shardings = (None, (trainable, non_trainable, optimizer, metrics) if train
                         else (trainable, non_trainable, metrics))
        # Keras's _distribute_data lays each input out as the distribution says.
        spec = tuple(jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=distribution
                                          .get_data_layout(s.shape).backend_layout)
                     for s in spec)
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=train, metrics_variables=True)
    step = model.train_step if train else model.test_step
    return jax.jit(step, donate_argnums=0, out_shardings=out_shardings).lower(state, spec)
