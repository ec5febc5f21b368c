"""The training and evaluation steps compiled beside the rest of the start (JAX).

Left to itself, `fit` compiles its training step when it takes its first batch, and
its evaluation step at the first epoch's end: on a small dataset that is most of a
cold start (the small ResNet's training step took 3 s to compile on an H200, 12-16 s
with XLA's autotuning: app/engine/autotune.py), and it starts only once everything
else is done. Here the steps are lowered as soon as the model is compiled and XLA
compiles them in threads while the run goes on (the FLOP count, the callbacks, the
input's own programs). Then `fit` gets them:

- handed over (cold_start cut "fit_takes_compiled_steps"): the compiled executables
  become the model's train and test functions, so `fit` neither traces, lowers nor
  looks up either step (on a 2-core host 0.7 s of its first step went to tracing,
  lowering and reading back from the cache the step compiled already); no
  compilation cache is needed;
- or from JAX's persistent compilation cache, where the thread's compile put them
  (the cut off; the cache must be on): `fit` traces and lowers each step again and
  reads the program back.

Each step starts compiling as soon as it is lowered, the two side by side (cut
"steps_side_by_side"; not under XLA's full autotuning, which times kernels on the GPU
and lets the evaluation step reuse the training step's choices); with the cut off, both
are lowered first and compiled one after the other.

Only where that is sure to pay: the JAX backend, one process, and a pipeline that
knows its batches' shapes before the first one (`Datasets.batch_specs`; the device
pipeline does). The steps are lowered as Keras's JAX trainer lowers them
(`make_train_function`, `make_test_function`, `_distribute_data`): the same function,
donation, shardings and argument avals; tests/app/engine/test_precompile.py checks that
`fit` compiles neither step itself. Lowering runs here, on the calling thread (it traces
Keras's layers, whose global settings, such as flash attention, another thread may be
changing); only XLA's compile, which holds no Python lock, runs in the threads.
"""

from __future__ import annotations

import threading
import time


class Precompile:
    """Threads compiling lowered steps: each in its own (`side_by_side`), else one
    after the other in one thread, in the order they were added.

    Attributes:
        seconds: once joined, how long the compiles took, from the first one's start
            to the last one's end (None before).
        error: once joined, the first compile's exception, if any (`fit` then
            compiles, and raises, as it would have).
        compiled: {"train" or "test": jax.stages.Compiled} of the compiles that ended well.
        train_step: once joined, the training step's jax.stages.Compiled (None
            before): app/engine/kernels.py reads the kernels it chose from its text
            at the run's end. (Held that long: one more copy of the step's GPU code
            besides fit's, megabytes; the evaluation step's is dropped.)
        train_served: once joined, whether JAX's compilation cache served the
            training step (True) or XLA compiled it here.
    """

    def __init__(self, side_by_side: bool = False):
        self.seconds: float | None = None
        self.error: BaseException | None = None
        self.compiled: dict = {}
        self.train_step = None
        self.train_served: bool | None = None
        self.handed: dict = {}  # kind: the step hand_to gave fit (its `fallbacks`)
        self.side_by_side = side_by_side
        # The training step compiled more than once (app/engine/measured.py): each
        # program by name, its compile's seconds, whether JAX's cache served it, or why
        # it did not compile; `adopt` makes one of them the training step.
        self.variants: dict = {}
        self.variant_seconds: dict = {}
        self.variant_served: dict = {}
        self.variant_errors: dict = {}
        self.choice = None  # measured.Plan, where the step is compiled more than once
        self._train_lowered = None
        self._queue: list = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._started = time.perf_counter()

    def add(self, kind: str, lowered, options: dict | None = None,
            variant: str | None = None) -> None:
        """Starts compiling `lowered` (a jax.stages.Lowered), the `kind` step, with XLA
        `options` besides the run's; a `variant` is one of the training step's programs
        (kept apart in `variants` until one is adopted)."""
        with self._lock:
            self._queue.append((kind, lowered, options, variant))
            if self._threads and not self.side_by_side:
                return  # the running thread takes it after the ones before it
        name = "precompile-steps" if not self._threads else f"precompile-{kind}"
        thread = threading.Thread(target=self._compile, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _compile(self):
        from app.engine import kernels

        kernels.listen()
        while True:
            with self._lock:
                if not self._queue:
                    return
                kind, lowered, options, variant = self._queue.pop(0)
            try:
                self._compile_one(kind, lowered, options, variant)
            except Exception as error:  # noqa: BLE001 - fit meets it again, and raises it
                with self._lock:
                    if variant is None:
                        self.error = self.error or error
                    else:  # app/engine/measured.py decides what follows
                        self.variant_errors[variant] = error
            finally:
                with self._lock:
                    self.seconds = time.perf_counter() - self._started
            if self.side_by_side:
                return

    def _compile_one(self, kind: str, lowered, options, variant) -> None:
        from app.engine import kernels

        # into JAX's persistent cache too, where fit finds it when not handed over
        hits = kernels.cache_hits_here()  # counted per thread
        started = time.perf_counter()
        compiled = self._compiled(lowered, options)
        served = kernels.cache_hits_here() > hits
        with self._lock:
            if variant is not None:
                self._train_lowered = lowered
                self.variants[variant] = compiled
                self.variant_seconds[variant] = round(time.perf_counter() - started, 3)
                self.variant_served[variant] = served
                return
            self.compiled[kind] = compiled
            if kind == "train":  # app/engine/kernels.py reads what it chose
                self.train_step = compiled
                self.train_served = served

    @staticmethod
    def _compiled(lowered, options: dict | None = None):
        """`lowered` compiled, with a variant's own XLA `options` where it has them."""
        return lowered.compile(compiler_options=options) if options else lowered.compile()

    def compile_variants(self, variants: list) -> None:
        """Compiles the training step's `variants` [(name, options)] here, now (after
        `join`: a kept choice that did not compile is measured afresh)."""
        for name, options in variants:
            try:
                self._compile_one("train", self._train_lowered, options, name)
            except Exception as error:  # noqa: BLE001 - measured.py decides what follows
                self.variant_errors[name] = error

    def finished(self) -> bool:
        """Whether every compile has ended (`join` returns early on a stop request)."""
        return all(not thread.is_alive() for thread in self._threads)

    def adopt(self, variant: str) -> None:
        """`variant`'s program becomes the training step (fit's, the kernels' record);
        the others are dropped (their GPU code freed)."""
        compiled = self.variants[variant]
        self.compiled["train"] = self.train_step = compiled
        self.train_served = self.variant_served.get(variant)
        self.variants = {}

    def join(self, stop: threading.Event | None = None) -> float:
        """Waits for the compiles (`fit` would otherwise start them a second time), or
        until `stop` is set (a SIGTERM must not wait for XLA); returns the seconds
        this call waited."""
        started = time.perf_counter()
        for thread in list(self._threads):
            while thread.is_alive() and not (stop is not None and stop.is_set()):
                thread.join(timeout=0.1)
        if all(not t.is_alive() for t in self._threads) and self.seconds is None:
            self.seconds = 0.0
        return time.perf_counter() - started

    def hand_to(self, model) -> list[str]:
        """Makes the compiled steps `model`'s train and test functions (as Keras's JAX
        trainer makes its own, around a jitted step), so that `fit` neither traces
        nor compiles them; returns the kinds handed over. Call it after `join`.

        A call whose arguments do not match what was compiled (Compiled refuses it
        before it runs: another pytree, shape or sharding) goes to the jitted step
        instead, as fit would have made it; `handed[kind].fallbacks` counts them."""
        for kind, compiled in sorted(self.compiled.items()):
            self.handed[kind] = step = _Handed(model, kind, compiled)
            if kind == "train":
                model.train_function = model._make_function(step)
            else:
                model.test_function = model._make_function(step)
        return sorted(self.handed)


class _Handed:
    """One compiled step, called as Keras calls its jitted step: (state, data)."""

    def __init__(self, model, kind: str, compiled):
        self.model, self.kind, self.compiled = model, kind, compiled
        self.fallbacks = 0
        self._jitted = None

    def __call__(self, state, data):
        if self._jitted is None:
            try:
                return self.compiled(state, data)
            except (TypeError, ValueError):  # refused before running: nothing donated
                self._jitted = _jit(self.model, train=self.kind == "train")
                self.fallbacks += 1
        return self._jitted(state, data)


def start(model, batch_specs, topology, side_by_side: bool = False,
          hand_to_fit: bool = False, train_options: dict | None = None,
          train_variants: list | None = None) -> Precompile | None:
    """Lowers `model`'s training (and evaluation) step for the batches of
    `batch_specs` and starts compiling each as it is lowered; None where that would
    not pay (see the module's docstring) or where the training step does not lower
    (`fit` then says why).

    Call it after `model.compile`, before anything else traces the model, and join
    the result before `fit` (then `hand_to` the model, if `hand_to_fit`).

    Args:
        side_by_side: each step compiled in its own thread as soon as it is lowered;
            else both are lowered first, then compiled in turn in one thread.
        hand_to_fit: the compiled steps are to be handed to fit (`hand_to`): no
            compilation cache is needed. Without it, fit finds them in the cache.
        train_options: XLA options of the training step's compile alone (only with
            `hand_to_fit`: fit's own compile, with none, would not find it in the cache).
        train_variants: [(name, XLA options)]: the training step compiled once for
            each, in turn, kept in `variants` (app/engine/measured.py adopts one);
            only with `hand_to_fit`, else it is compiled once, as without.
    """
    if why_not(model, batch_specs, topology, hand_to_fit) is not None:
        return None
    train_spec, validation_spec = batch_specs
    compiling = Precompile(side_by_side)
    try:
        train = _lower(model, train_spec, train=True)
    except Exception:  # noqa: BLE001 - fit lowers it again, and raises what is wrong
        return None

    def add_train():
        if train_variants and hand_to_fit:  # in turn, before the evaluation step
            for name, options in train_variants:
                compiling.add("train", train, options, variant=name)
        else:
            compiling.add("train", train, train_options if hand_to_fit else None)

    if side_by_side:
        add_train()  # compiles while the evaluation step is traced
    test = None
    if validation_spec is not None:
        try:
            test = _lower(model, validation_spec, train=False)
        except Exception:  # noqa: BLE001 - fit lowers it again, and raises what is wrong
            test = None
    if not side_by_side:
        add_train()
    if test is not None:
        compiling.add("test", test)
    return compiling


def _jit(model, train: bool):
    """The step as Keras's JAX trainer jits it (make_train_function, make_test_function)."""
    import jax
    from keras.src import distribution as distribution_lib

    out_shardings = None
    if distribution_lib.distribution() is not None:
        trainable, non_trainable, optimizer, metrics = model._get_state_sharding_spec()
        out_shardings = (None, (trainable, non_trainable, optimizer, metrics) if train
                         else (trainable, non_trainable, metrics))
    return jax.jit(model.train_step if train else model.test_step, donate_argnums=0,
                   out_shardings=out_shardings)


def why_not(model, batch_specs, topology, hand_to_fit: bool = False) -> str | None:
    """Why this run's steps are not compiled here, ahead of `fit` (None: they are);
    the kernels' record says it where it cannot name them. `hand_to_fit`: as `start`'s."""
    if topology.backend != "jax":
        return "the TensorFlow backend compiles its step inside fit"
    if topology.num_processes != 1:
        return "a run of several processes compiles its step inside fit"
    if not batch_specs:
        return "this input pipeline does not know its batches' shapes before the first"
    if not (topology.compilation_cache_dir or hand_to_fit):
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
    if distribution is not None:  # Keras's _distribute_data lays each input out so
        spec = tuple(jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=distribution
                                          .get_data_layout(s.shape).backend_layout)
                     for s in spec)
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=train, metrics_variables=True)
    return _jit(model, train).lower(state, spec)
