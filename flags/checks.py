"""The config's checks: each flag's value and each combination, refused before
anything is touched, with one line naming the value and what is accepted
(`ConfigError`). `Config.__post_init__` (flags/config.py) calls `validate` once its
derived values are filled in; flags/ranges.py checks the numbers' ranges last.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re

from flags.choices import (
    ACCELERATORS,
    BACKENDS,
    BATCHNORM_STATISTICS,
    DATASET_PREFIXES,
    INPUT_PIPELINES,
    MODELS,
    NAMED_DATASETS,
    OPTIMIZERS,
    PRECISIONS,
    PRICINGS,
    VIT_PATCH,
    XLA_AUTOTUNES,
    model_kind,
)
from flags.modes import MODES, mode_of
from flags.ranges import check_ranges


class ConfigError(ValueError):
    """A user mistake in the flags; its message is one line fit to print as is."""


def check(condition, message):
    """Raises ConfigError(`message`) unless `condition`."""
    if not condition:
        raise ConfigError(message)


def did_you_mean(value: str, choices) -> str:
    """"; did you mean X?" naming the choices a mistyped `value` is closest to, or ""."""
    choices = list(choices)
    close = [c for c in choices if value and value.lower() in c.lower()]
    close = close or difflib.get_close_matches(value, choices, n=2, cutoff=0.7)
    return f"; did you mean {' or '.join(close[:2])}?" if close else ""


def _dataset_suggestion(name: str) -> str:
    """The --dataset value a near miss probably meant (cifar10 -> tfds:cifar10)."""
    if os.path.isdir(name):
        return f"; did you mean folder:{name}?"
    return did_you_mean(name, NAMED_DATASETS) or (
        f"; did you mean tfds:{name}?" if re.fullmatch(r"[a-z0-9_]+", name) else "")


def validate(config) -> None:
    """Every check of the config, the first mistake raising ConfigError: one line naming
    the value and what is accepted (--kernels_from's file is read at its head)."""
    for field in dataclasses.fields(config):  # config.json and summary.json are strict JSON
        value = getattr(config, field.name)
        check(not isinstance(value, float) or math.isfinite(value),
              f"--{field.name}={value} must be a finite number")
    check(config.accelerator in ACCELERATORS,
          f"--accelerator={config.accelerator!r} is unknown; accepted: {', '.join(ACCELERATORS)}")
    check(config.backend in BACKENDS,
          f"--backend={config.backend!r} is unknown; accepted: {', '.join(BACKENDS)}")
    _model(config)
    check(config.precision in PRECISIONS,
          f"--precision={config.precision!r} is unknown; accepted: {', '.join(PRECISIONS)}")
    check(config.batchnorm_statistics in BATCHNORM_STATISTICS,
          f"--batchnorm_statistics={config.batchnorm_statistics!r} is unknown; accepted: "
          f"{', '.join(BATCHNORM_STATISTICS)}")
    check(not (config.precision == "mixed_float16" and config.accelerator == "tpu"),
          "--precision=mixed_float16 is not supported on TPU; use mixed_bfloat16")
    _dataset(config)
    _sizes(config)
    _optimizer(config)
    _processes(config)
    _study_flags(config)
    check_ranges(config, ConfigError)  # after the finer checks: their messages stay


def _model(config):
    """The form of --model; app.models.check_model looks at files and names."""
    kind = model_kind(config.model)
    check(kind is not None,
          f"--model={config.model!r} is unknown; accepted: {', '.join(MODELS)}, "
          "applications:NAME (a keras.applications classifier), FILE.py:FUNCTION (a "
          "function of (num_classes, image_size) returning a keras.Model), FILE.keras "
          f"(a saved model){did_you_mean(config.model, MODELS)}")
    check(kind != "vit" or config.image_size % VIT_PATCH == 0,
          f"--image_size={config.image_size}: --model={config.model} cuts images into "
          f"{VIT_PATCH}x{VIT_PATCH} patches; accepted: a multiple of {VIT_PATCH} "
          "(0 = the dataset's size)")


def _dataset(config):
    name = config.dataset
    ok = name in NAMED_DATASETS or any(
        name.startswith(p) and len(name) > len(p) for p in DATASET_PREFIXES)
    check(ok, f"--dataset={name!r} is unknown; accepted: digits, fashion_mnist, synthetic, "
              f"imagenet2012, tfds:NAME[:VERSION], folder:PATH{_dataset_suggestion(name)}")
    if name.startswith("tfds:"):
        check(re.fullmatch(r"[a-z0-9_]+(/[a-z0-9_.]+)?(:\d+\.\d+\.\d+)?", name[5:]),
              f"--dataset={name!r}: expected tfds:NAME or tfds:NAME:X.Y.Z "
              "(lower-case TFDS name, e.g. tfds:mnist:3.0.1)")
    check(config.xla_autotune in XLA_AUTOTUNES,
          f"--xla_autotune={config.xla_autotune!r} is unknown; accepted: "
          f"{', '.join(XLA_AUTOTUNES)}")
    # XLA's heuristic program of the ViTs' cuDNN fused attention compiles, then fails
    # when it runs (IndexError from XLA's execute: the ladder's ViT-B/16 on an H200, which
    # therefore starts it at full; ViT-B/16 on an H100, 2026-12-07, where it ran with the
    # fused attention off, at 0.64x the speed): refused before anything is built.
    check(not (config.xla_autotune == "heuristic" and model_kind(config.model) == "vit"
               and config.backend == "jax" and config.accelerator == "gpu"),
          "--xla_autotune=heuristic cannot train the built-in ViTs on a GPU: XLA's heuristic "
          "program of their cuDNN fused attention fails when it runs; accepted with them: "
          "auto (the default: measured) or full")
    check(config.input_pipeline in INPUT_PIPELINES,
          f"--input_pipeline={config.input_pipeline!r} is unknown; accepted: "
          f"{', '.join(INPUT_PIPELINES)}")
    check(config.input_pipeline != "gpu" or (config.backend == "jax"
                                            and config.accelerator == "gpu"),
          "--input_pipeline=gpu decodes JPEGs on the GPU through JAX; it needs "
          "--backend=jax --accelerator=gpu (use grain or tf.data elsewhere)")
    check(config.benchmark == "none" or not config.is_sweep,
          f"--benchmark={config.benchmark} and --sweep are two modes; accepted: one of them")
    mode = mode_of(config)
    check(not mode.needs_data or name != "synthetic",
          f"--benchmark={mode.name} measures an input pipeline; --dataset=synthetic has none")
    timed = sorted(m.name for m in MODES.values() if m.repeats is not None and m.name != "sweep")
    check(config.repeats == 1 or mode.repeats is not None,
          f"--repeats={config.repeats} repeats a benchmark's timed window; accepted with "
          f"--sweep, --sweep_batch_sizes or --benchmark={'/'.join(timed)} (a training run "
          "times every epoch of its own)")
    check(config.image_size == 0 or 8 <= config.image_size <= 1024,
          f"--image_size={config.image_size} is out of range; accepted: 0 (dataset "
          "default) or 8..1024")


def _sizes(config):
    check(config.global_batch_size >= 1,
          f"--global_batch_size={config.global_batch_size} must be a positive integer")
    check(config.epochs >= 1, f"--epochs={config.epochs} must be at least 1")
    check(config.steps_per_epoch >= 0,
          f"--steps_per_epoch={config.steps_per_epoch} must be >= 0 (0 = whole epoch)")
    check(config.validation_steps >= -1,
          f"--validation_steps={config.validation_steps} must be >= -1 "
          "(0 = all validation images, -1 = none)")
    check(config.steps_per_execution >= 0,
          f"--steps_per_execution={config.steps_per_execution} must be >= 0 (0 = auto)")
    check(not config.steps_per_execution or config.steps_per_epoch % config.steps_per_execution == 0,
          f"--steps_per_epoch={config.steps_per_epoch} is not a multiple of "
          f"--steps_per_execution={config.steps_per_execution}")
    check(config.num_devices >= 0,
          f"--num_devices={config.num_devices} must be >= 0 (0 = all visible)")
    for size in config.sweep_batch_sizes:
        check(isinstance(size, int) and size >= 1,
              f"--sweep_batch_sizes has {size!r}; accepted: positive integers")
    check(config.checkpoint_every_steps >= 0,
          f"--checkpoint_every_steps={config.checkpoint_every_steps} must be >= 0")
    check(config.log_every_steps >= 1,
          f"--log_every_steps={config.log_every_steps} must be at least 1")
    check(config.throughput_warmup_steps >= 0,
          f"--throughput_warmup_steps={config.throughput_warmup_steps} must be >= 0")
    check(config.seed is None or 0 <= config.seed < 2**32,
          f"--seed={config.seed} is out of range; accepted: 0..4294967295")


def _optimizer(config):
    check(config.optimizer in OPTIMIZERS,
          f"--optimizer={config.optimizer!r} is unknown; accepted: {', '.join(OPTIMIZERS)}")
    clip = config.gradient_clip_norm
    check(clip is None or clip >= 0,
          f"--gradient_clip_norm={clip} must be >= 0 (0 = no clipping)")
    check(config.base_learning_rate > 0 and math.isfinite(config.base_learning_rate),
          f"--base_learning_rate={config.base_learning_rate} must be a finite number > 0")
    check(config.warmup_epochs >= 0, f"--warmup_epochs={config.warmup_epochs} must be >= 0")
    check(0 <= config.momentum < 1, f"--momentum={config.momentum} must be in [0, 1)")
    check(config.weight_decay >= 0, f"--weight_decay={config.weight_decay} must be >= 0")
    check(0 <= config.label_smoothing < 1,
          f"--label_smoothing={config.label_smoothing} must be in [0, 1)")


def _processes(config):
    check(config.num_processes >= 1,
          f"--num_processes={config.num_processes} must be at least 1")
    check(0 <= config.process_id < config.num_processes,
          f"--process_id={config.process_id} must be in [0, {config.num_processes})")
    if config.num_processes > 1:
        check(config.backend == "jax",
              "multi-host training needs --backend=jax: Keras 3's fit fails under "
              "TensorFlow's MultiWorkerMirroredStrategy (keras-team/keras#20585)")
        check(re.fullmatch(r"[\w.\-\[\]:]+:\d{1,5}", config.coordinator_address or ""),
              f"--coordinator_address={config.coordinator_address!r}: a multi-host run "
              "needs HOST:PORT of process 0")
    check(config.coordinator_timeout_seconds >= 1,
          f"--coordinator_timeout_seconds={config.coordinator_timeout_seconds} must be >= 1")


def _study_flags(config):
    for target in config.target_top1:
        check(isinstance(target, float) and 0 < target <= 1,
              f"--target_top1 has {target!r}; accepted: numbers in (0, 1], e.g. 0.757")
    check(config.pricing in PRICINGS,
          f"--pricing={config.pricing!r} is unknown; accepted: {', '.join(PRICINGS)}")
    price, peak = config.price_per_hour_usd, config.peak_tflops_per_device
    check(price is None or (price >= 0 and math.isfinite(price)),
          f"--price_per_hour_usd={price} must be a finite number >= 0")
    check(peak is None or (peak > 0 and math.isfinite(peak)),
          f"--peak_tflops_per_device={peak} must be a finite number > 0")
    config.profile_range  # parses and checks --profile_steps
    _sweep(config)
    from flags.autotune_results import AutotuneFileError, check_flags

    try:
        check_flags(config)  # --kernels_from (its file, read at its head), --keep_kernels
    except AutotuneFileError as error:
        raise ConfigError(str(error)) from None


def _sweep(config):
    """Each --sweep value as a plain run of that setting would be checked (the
    grid's combinations are checked point by point, app/modes/sweep.py)."""
    for name, values in config.sweep_axes:
        if name == "input_pipeline":
            check(config.dataset != "synthetic",
                  f"--sweep=input_pipeline={','.join(values)}: --dataset=synthetic has "
                  "no input pipeline to vary (its images are made on the device); "
                  "accepted: a real --dataset (e.g. digits), or time one pipeline "
                  "with --benchmark=input")
            # A known value that cannot apply here (gpu on a CPU) is a point that
            # did not run, with its reason (app/modes/bench.py), not a refusal.
            for value in values:
                check(value in INPUT_PIPELINES,
                      f"--sweep=input_pipeline={value}: --input_pipeline={value!r} is "
                      f"unknown; accepted: {', '.join(INPUT_PIPELINES)}")
            continue
        for value in values:
            try:
                config.sweep_point({name: value})
            except ConfigError as error:
                raise ConfigError(f"--sweep={name}={value}: {error}") from None
