"""What makes a run start sooner: its cold-start measures, each with the figure behind it.

- `without_unused_imports`: Keras (and TensorFlow, which imports it) imported without
  the libraries Keras loads for parts the app never uses (seconds on a small host);
- `persistent_compilation_cache`: JAX keeps every compiled program on disk, so that a
  run's second time starts warm;
- `reserve_memory`: the GPUs' memory reserved while Keras imports.

app/engine/distribute.py applies them while it finds the devices. Nothing here imports
a framework: each function is handed the module it works on.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import sys

# What importing each framework loads for parts the app never uses. Keras, whenever
# they are installed: its scikit-learn wrappers, its image-gallery plots, pandas
# DataFrames as model inputs, its RemoteMonitor callback (1.6 s and 1.1 s of `import
# keras` on a 2-core host for the first two; 0.78, 0.48, 0.40 and 0.18 s on the H200
# host). TensorFlow imports Keras too (tf.keras, when Keras 3 is installed), and with it
# the same libraries but requests, which TensorFlow's own preemption handling imports
# (1.2-1.7 s of the 5.2-5.3 s TensorFlow takes to import on a 2-core host).
# distribute.make_topology imports both (its `_import`) without them.
UNUSED_IMPORTS = {"keras": ("sklearn", "matplotlib", "pandas", "requests"),
                  "tensorflow": ("sklearn", "matplotlib", "pandas")}


class _Unimportable(importlib.abc.MetaPathFinder):
    """Makes the named top-level modules raise ModuleNotFoundError while installed."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@contextlib.contextmanager
def without_unused_imports(module: str):
    """While Keras (`module` "keras") or TensorFlow (which imports Keras) is imported,
    those of its UNUSED_IMPORTS not imported yet raise ModuleNotFoundError: Keras then
    takes them for absent (its sklearn wrappers, gallery plots, DataFrame inputs and
    RemoteMonitor are unusable in this process; nothing in the app uses them), and
    they import as usual afterwards (the digits dataset and the charts import their
    own). Any other module, or Keras imported already: nothing changes."""
    absent = [name for name in UNUSED_IMPORTS.get(module, ()) if name not in sys.modules]
    if "keras" in sys.modules or not absent:
        yield
        return
    finder = _Unimportable(absent)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@contextlib.contextmanager
def tensorflow_unseen(lazy):
    """Within the block, Keras takes TensorFlow for absent unless it is imported already.

    `lazy` is Keras's keras.src.utils.module_utils.tensorflow, which imports TensorFlow
    the first time Keras asks whether it is available (seeding, serializing a model's
    config: `model.to_json()` asks of every value it writes). On the JAX backend with
    TensorFlow installed that was a 3.6 s import (2-core host) on the way to the first
    step, and the JAX path must not touch TensorFlow. Keras asks again after the block.
    """
    if "tensorflow" in sys.modules or lazy._available is not None:
        yield
        return
    lazy._available = False
    try:
        yield
    finally:
        lazy._available = None


CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"


def compilation_cache_dir() -> str:
    """Where JAX keeps compiled XLA programs between runs: $JAX_COMPILATION_CACHE_DIR when
    set (empty: no cache), else ~/.cache/keras-accelerator-bench/xla ($XDG_CACHE_HOME
    in place of ~/.cache where set)."""
    if CACHE_ENV in os.environ:
        return os.environ[CACHE_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "keras-accelerator-bench", "xla")


def persistent_compilation_cache(jax) -> str | None:
    """Keeps every compiled program on disk, so that a run's second time starts warm;
    returns the folder, or None where there is none.

    As torch.compile's inductor does by default: on one H200 the default Fashion-MNIST
    job reached its first epoch's end 11.7 s after starting with the cache warm, 28.9 s
    cold (2026-12-03-h200-fashion-mnist.json at 35cc76c, its note). JAX keys
    each entry by the program, its compile options and the devices, so a changed model
    or machine compiles afresh; a cache that cannot be written costs one warning.
    """
    folder = compilation_cache_dir()
    if not folder:
        # Off for JAX too: it reads JAX_COMPILATION_CACHE_DIR="" as a folder named "" and
        # then keeps XLA's autotuning results in ./xla_gpu_per_fusion_autotune_cache_dir,
        # in whatever folder the run started from (where a later run finds them: on an
        # H200 the training step compiled in 1.3 s instead of 13 s, "with no cache").
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        sys.stderr.write(f"warning: no XLA compilation cache ({folder}: {error.strerror}); "
                         f"every program compiles afresh\n")
        return None
    jax.config.update("jax_compilation_cache_dir", folder)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # The initializers' and metrics' small programs too: ~40 of them, 6 s cold on GPU.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    return folder


def reserve_memory(jax, devices) -> None:
    """Puts one number on each of `devices`: JAX's allocator reserves its share of a
    GPU's memory (75% by default) at the first array, 2 s on an H200 (2026-12-03, the
    first array of the device pipeline); run in a thread, it overlaps Keras's import."""
    import numpy as np

    try:
        for device in devices:
            jax.device_put(np.zeros((), np.int32), device).block_until_ready()
    except Exception:  # noqa: BLE001 - the run's first array meets it again, and says so
        pass


# ------------------------------------------------------------------------ the start's cuts
# Each measure that shortens a cold start, by name: (on by default, what it
# does). BENCH_STARTUP_CUTS turns them on and off one by one, so that one device call
# can time each from cold (benchmarks/device_run.sh coldstart): a comma-separated list
# read in order, of "all", "none", NAME (on) and -NAME (off), from the defaults.
# Measured on one H100 (benchmarks/results/2026-12-07-h100-coldstart.json, one cold run
# each, Fashion-MNIST to 0.93): turning each off cost 1.58 s (fit_takes_compiled_steps),
# 1.57 s (steps_side_by_side), 0.57 s (data_read_beside_imports) and 0.29 s
# (devices_beside_keras: its span, 1.73 s, was no shorter than devices then Keras in
# turn, 0.76 + 0.92 s; it is kept for the CPU's figure) of the 6.78 s to the first step.
# Two XLA options for a short run's compile were taken out there: this XLA refuses
# xla_gpu_enable_llvm_module_compilation_parallelism, and matrix products by cuBLAS
# (xla_gpu_enable_triton_gemm=false) started 0.60 s later.
CUTS_ENV = "BENCH_STARTUP_CUTS"
CUTS: dict[str, tuple[bool, str]] = {
    "fit_takes_compiled_steps": (
        True, "fit is handed the steps compiled beside the start (app/engine/precompile.py): "
              "it neither traces, lowers nor reads them back from the compilation cache"),
    "steps_side_by_side": (
        True, "the training and evaluation steps compile in two threads, each as soon as "
              "it is lowered (not under XLA's full autotuning)"),
    "devices_beside_keras": (
        True, "JAX's backend starts (its devices found: on a GPU its driver and context) in "
              "a thread while Keras imports"),
    "data_read_beside_imports": (
        True, "the dataset's files read in a thread while the frameworks import "
              "(Fashion-MNIST's IDX files: preprocessing/datasets/fashion_mnist.py)"),
}


def cuts(value: str | None = None) -> dict[str, bool]:
    """{cut: on} from `value` (BENCH_STARTUP_CUTS where None; unset or empty: the
    defaults).

    Raises:
        ValueError: a name that is not a cut, in one line saying what is accepted.
    """
    value = os.environ.get(CUTS_ENV, "") if value is None else value
    chosen = {name: default for name, (default, _) in CUTS.items()}
    for token in (t.strip() for t in value.split(",")):
        if token in ("all", "none"):
            chosen = dict.fromkeys(CUTS, token == "all")
            continue
        name = token.removeprefix("-")
        if not token:
            continue
        if name not in CUTS:
            raise ValueError(
                f"{CUTS_ENV}={value!r}: {name!r} is not a start-up cut; accepted: all, none, "
                f"and NAME or -NAME (on, off) for each of {', '.join(CUTS) or '(none)'}, "
                "comma-separated")
        chosen[name] = not token.startswith("-")
    return chosen


def cut_on(name: str) -> bool:
    """Whether the cut `name` (a key of CUTS) is on in this process."""
    return cuts()[name]
