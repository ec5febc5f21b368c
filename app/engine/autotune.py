"""How XLA picks the GPU kernels of the convolutions and matrix products: --xla_autotune.

- full: XLA's default. When it compiles a step, it times every candidate kernel of
  every convolution and matrix product (cuDNN's engines, Triton's tilings) and keeps
  the fastest. That costs seconds per model and shape, once: JAX's compilation cache
  keeps the result for the next run.
- heuristic: each takes the libraries' first deterministic choice, timed never
  (XLA's --xla_gpu_exclude_nondeterministic_ops; PyTorch's default,
  cudnn.benchmark=False, likewise takes cuDNN's heuristic choice). Steps are a few per
  cent slower, the compile seconds faster.

Measured on one H200 (benchmarks/results/2026-12-03-h200-autotune.json), cold compile
of the training step and images/sec: ResNet-50 at batch 256, 15.8 s and 8,001 full
against 6.9 s and 7,753 heuristic (3.1% slower); the small ResNet at batch 512, 12.4 s
against 2.7 s, 272,674 against 251,717 (means of three runs each, 7.7% slower; the
runs spread over 261,426-289,171 and 235,812-268,608). Autotuning pays for itself once
the steps it speeds up outweigh its compile: ~2.2 million images of ResNet-50, ~30
million of the small ResNet.

So `auto` chooses heuristic for a run that trains one of the app's ResNets (measured
so; they have no operation without a deterministic kernel: their max-pooling has a
hand-written gradient, not XLA's select-and-scatter, which this mode cannot compile)
on fewer than HEURISTIC_BELOW_IMAGES images in all, on an NVIDIA GPU under JAX: a
small dataset, where the compile is most of the time to accuracy (the run says what
measuring would have cost). Every other training run (the ViTs, any model the app did
not write, synthetic data) is `measured`: XLA's autotuned step and its heuristic one,
both compiled and timed on the real step, the autotuned kept only where it is 2% faster
(app/engine/measured.py). Fresh autotunes of ConvNeXt-T on an H100 gave 3,290-4,440
images/sec from run to run, the heuristic 4,399: full alone is a coin that usually
lands on the slow side. `measured` is not a flag value: `auto` means it, so a user who
sets full or heuristic gets exactly that, one compile, nothing measured (the heuristic
is refused for the ViTs on a GPU: its program of their cuDNN fused attention fails when
it runs, flags/checks.py; their measured choice then keeps the autotuned). The benchmark
modes (a sweep's points, a ladder's rungs, the probe, the input benchmark) compile one
program inside fit and keep full. A setting of the user's own in XLA_FLAGS is left as
it is, and reported so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

from flags.config import model_kind
from flags.modes import mode_of

HEURISTIC_BELOW_IMAGES = 2_000_000  # ResNet-50's break-even; smaller models' is higher
HEURISTIC_FLAG = "--xla_gpu_exclude_nondeterministic_ops=true"
# XLA flags that decide the same thing: where the user set one, theirs stands.
USERS_OWN = ("xla_gpu_exclude_nondeterministic_ops", "xla_gpu_deterministic_ops",
             "xla_gpu_autotune_level")
FROM_XLA_FLAGS = "xla_flags"  # the user's XLA_FLAGS decide
HEURISTIC_MODEL_KINDS = ("resnet",)  # flags.config.model_kind: the app's ResNets


def planned_images(config, train_examples: int | None) -> int | None:
    """Training images the run plans to see in all epochs, or None where unknown."""
    if config.steps_per_epoch > 0:
        return config.epochs * config.steps_per_epoch * config.global_batch_size
    if train_examples is None:
        return None
    return config.epochs * train_examples


def choose(config, train_examples: int | None) -> str | None:
    """measured, full, heuristic, or xla_flags (the user's own); None where XLA compiles
    no GPU kernels (TensorFlow, a CPU or a TPU).

    Args:
        train_examples: the training split's size, where the dataset's check knew it.
    """
    if config.backend != "jax" or config.accelerator != "gpu":
        return None
    if any(name in os.environ.get("XLA_FLAGS", "") for name in USERS_OWN):
        return FROM_XLA_FLAGS
    if config.xla_autotune != "auto":
        return config.xla_autotune
    if not mode_of(config).trains:
        return "full"  # each point or probe compiles one program inside fit
    images = planned_images(config, train_examples)
    if (config.dataset == "synthetic" or model_kind(config.model) not in HEURISTIC_MODEL_KINDS
            or images is None or images >= HEURISTIC_BELOW_IMAGES):
        return MEASURED
    return "heuristic"


MEASURED = "measured"  # auto's XLA-autotuned-against-heuristic choice (measured.py)


def apply(choice: str | None) -> None:
    """Sets XLA_FLAGS for `choice`, before JAX compiles anything (XLA reads them once)."""
    if choice == "heuristic":
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} {HEURISTIC_FLAG}".strip()


# The XLA option HEURISTIC_FLAG sets, per compile (jax.jit's compiler_options).
OPTION = "xla_gpu_exclude_nondeterministic_ops"


@contextlib.contextmanager
def compiled_with(choice: str | None):
    """Within the block, Keras's JAX trainer compiles its steps with `choice` (full or
    heuristic) whatever XLA_FLAGS the process started with: a sweep point's or a ladder
    rung's own, in one process. Other choices (None: no GPU kernels to pick; xla_flags:
    the user's own) leave compiling as it is.

    Trap: XLA reads XLA_FLAGS once per process, so `apply` cannot serve a second
    setting; jax.jit's compiler_options can, per compile (JAX's compilation cache keys
    on them). Keras's trainer calls its module's `jit` when fit makes the train
    function: the patch must span the first fit after the model is compiled.
    """
    if choice not in ("full", "heuristic"):
        yield
        return
    from keras.src.backend.jax import trainer

    plain = trainer.jit
    trainer.jit = functools.partial(plain, compiler_options={OPTION: choice == "heuristic"})
    try:
        yield
    finally:
        trainer.jit = plain


# --kernels_from and --keep_kernels: XLA's own autotune results, loaded or kept.
LOAD_FLAG = "xla_gpu_load_autotune_results_from"
DUMP_FLAG = "xla_gpu_dump_autotune_results_to"


def set_kernel_flags(config, logdir: str) -> dict:
    """Sets XLA_FLAGS for --kernels_from and --keep_kernels, before JAX compiles anything
    (XLA reads them once); returns {"loaded_from": file or None, "kept_to": file or None}.
    A flag of the user's own in XLA_FLAGS stands.

    Trap: JAX's compilation cache keys on XLA_FLAGS (jax/_src/cache_key.py leaves out
    only the dump flags of its list, and not this one), so a kept run compiles afresh,
    and its folder's path makes the key its own. JAX also has XLA keep each fusion's
    autotuning in the cache folder (jax_persistent_cache_enable_xla_caches), whose
    choices a fresh compile would take untimed: for a kept run it is off, so that the
    file holds what this run's autotuner chose, all of it.
    """
    from app.engine import kernels
    from flags.autotune_results import resolve

    done = {"loaded_from": None, "kept_to": None}
    if config.backend != "jax":
        return done
    flags = os.environ.get("XLA_FLAGS", "")
    if config.kernels_from and LOAD_FLAG not in flags:
        done["loaded_from"] = resolve(config.kernels_from)  # checked by Config already
        flags = f"{flags} --{LOAD_FLAG}={done['loaded_from']}".strip()
    if config.keep_kernels and DUMP_FLAG not in flags:
        done["kept_to"] = os.path.join(os.path.abspath(logdir), kernels.KEPT_FILE)
        # XLA writes the file but makes no folder: without this, the first compile on a
        # GPU failed in a NOT_FOUND traceback (seen on an H100, 2026-12-06)
        os.makedirs(os.path.dirname(done["kept_to"]), exist_ok=True)
        flags = f"{flags} --{DUMP_FLAG}={done['kept_to']}".strip()
        os.environ["JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"] = "none"
        if "jax" in sys.modules:  # (read when JAX starts; set it there too)
            sys.modules["jax"].config.update("jax_persistent_cache_enable_xla_caches", "none")
    if flags:
        os.environ["XLA_FLAGS"] = flags
    kernels.note_start(cache_enabled=not config.keep_kernels)
    return done
