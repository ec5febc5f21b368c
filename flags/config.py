"""The run's frozen configuration: built once from the flags, validated, then read-only.

Everything that can be checked without touching a device or a file is checked in
`Config.__post_init__` (flags/checks.py's `validate`, against flags/choices.py's
choices), so a mistake ends the run before anything starts. Derived
values (learning rate for the batch, the precision that `auto` means, default
paths) are computed here too, so the rest of the app never re-derives them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re

from flags.checks import ConfigError, check, did_you_mean, validate
from flags.modes import mode_of
from flags.choices import (  # noqa: F401 (the choices, read as flags.config's too)
    ACCELERATORS,
    BACKENDS,
    BATCHNORM_STATISTICS,
    BENCHMARKS,
    DATASET_PREFIXES,
    FAMILY_OPTIMIZER,
    INPUT_PIPELINES,
    LATER_FIELDS,
    LEARNING_RATE_BATCH,
    LR_SCHEDULES,
    MODELS,
    NAMED_DATASETS,
    NOT_AN_AXIS,
    NOT_SWEEPABLE,
    OPTIMIZERS,
    PRECISIONS,
    PREPROCESSINGS,
    PRICINGS,
    RECIPES,
    RESUMABLE_FIELDS,
    SWEEPABLE,
    VERBOSITIES,
    VIT_PATCH,
    XLA_AUTOTUNES,
    batch_scale,
    model_kind,
)


def parse_axis(text: str) -> tuple:
    """(flag, (typed value, ...)) of one --sweep=FLAG=v1,v2,... (a leading -- allowed).

    Raises:
        ConfigError: one line naming the mistake and what is accepted.
    """
    name, equals, values = text.partition("=")
    name = name.strip().lstrip("-")
    fields = {f.name: f.default for f in dataclasses.fields(Config)}
    accepted = f"accepted: {', '.join(SWEEPABLE)}"
    check(name in fields, f"--sweep={text}: --{name} is not a flag; {accepted}"
                          f"{did_you_mean(name, SWEEPABLE)}")
    reason = next((why for names, why in NOT_SWEEPABLE.items() if name in names),
                  None if name in SWEEPABLE else NOT_AN_AXIS)
    check(reason is None, f"--sweep={text}: --{name} {reason}; {accepted}")
    items = [v.strip() for v in values.split(",")] if equals else []
    check(items and all(items), f"--sweep={text}: expected FLAG=v1,v2,... with no empty "
                                f"value, e.g. --sweep={name}=a,b; {accepted}")
    kind = type(fields[name])
    typed = []
    for item in items:
        try:
            typed.append(kind(item) if kind in (int, float) else item)
        except ValueError:
            raise ConfigError(f"--sweep={text}: {item!r} is not a number; accepted: "
                              f"{'integers' if kind is int else 'numbers'}") from None
    check(len(set(typed)) == len(typed),
          f"--sweep={text}: a value is given twice; accepted: each value once")
    return name, tuple(typed)


@dataclasses.dataclass(frozen=True)
class Config:
    """All settings of one run. Field names equal flag names (see flags/definitions.py)."""

    accelerator: str = "cpu"
    backend: str = "tensorflow"
    num_devices: int = 0
    tpu: str = "local"
    coordinator_address: str = ""
    num_processes: int = 1
    process_id: int = 0
    coordinator_timeout_seconds: int = 60
    model: str = "small_resnet"
    precision: str = "auto"
    batchnorm_statistics: str = "per_replica"
    # The recipe: None and auto mean the model family's (RECIPES), resolved at once.
    optimizer: str = "auto"
    base_learning_rate: float | None = None
    lr_schedule: str = "cosine"
    warmup_epochs: float | None = None
    momentum: float = 0.9
    weight_decay: float | None = None
    label_smoothing: float = 0.1
    gradient_clip_norm: float | None = None
    dataset: str = "digits"
    data_dir: str = ""
    manual_dir: str = ""
    download: bool = False
    image_size: int = 0
    preprocessing: str = "auto"
    input_pipeline: str = "auto"
    global_batch_size: int = 64
    epochs: int = 15
    steps_per_epoch: int = 0
    validation_steps: int = 0
    steps_per_execution: int = 0  # 0 = auto (app/engine/data.py: steps_per_execution)
    xla_autotune: str = "auto"  # app/engine/autotune.py
    kernels_from: str = ""  # an XLA autotune results file or a run folder (autotune_results.py)
    keep_kernels: bool = False  # <logdir>/kernels/autotune.textproto (app/engine/autotune.py)
    seed: int | None = None
    logdir: str = ""
    fresh: bool = False
    checkpoint_every_steps: int = 0
    log_every_steps: int = 50
    verbose: str = "auto"
    target_top1: tuple = ()
    machine: str = "auto"
    pricing: str = "on_demand"
    price_per_hour_usd: float | None = None
    price_catalog: str = ""  # "" = app/pricing/prices.csv (app/pricing/catalog.py)
    peak_tflops_per_device: float | None = None
    profile_steps: str = ""
    throughput_warmup_steps: int = 0
    sweep_batch_sizes: tuple = ()
    sweep: tuple = ()  # "FLAG=v1,v2,..." each, as given; parsed by sweep_axes
    benchmark: str = "none"
    repeats: int = 1  # timed windows a benchmark point measures (app/engine/measure.py)

    def __post_init__(self):
        # Fill derived defaults. The dataclass is frozen, hence object.__setattr__.
        self._resolve_recipe()
        if not self.data_dir:
            object.__setattr__(self, "data_dir", os.environ.get(
                "TFDS_DATA_DIR", os.path.expanduser("~/tensorflow_datasets")))
        if not self.manual_dir:
            object.__setattr__(self, "manual_dir",
                               os.path.join(self.data_dir, "downloads", "manual"))
        if not self.logdir:
            # Named by what the run measures, so rerunning the same command finds
            # (and resumes, or reports complete) the same folder; --fresh starts over.
            name = mode_of(self).folder.format(dataset=self.dataset_name)
            object.__setattr__(self, "logdir", os.path.join(
                "runs", f"{self.model_label}-{name}-{self.backend}-{self.fingerprint}"))
        if self.dataset == "synthetic" and self.validation_steps == 0:
            # Random images measure no accuracy: validate them only when asked (N > 0).
            object.__setattr__(self, "validation_steps", -1)
        object.__setattr__(self, "target_top1", tuple(self.target_top1))
        object.__setattr__(self, "sweep_batch_sizes", tuple(self.sweep_batch_sizes))
        object.__setattr__(self, "sweep", tuple(self.sweep))
        validate(self)

    def _resolve_recipe(self):
        """--optimizer=auto and the unset recipe flags -> the values of the model family's
        recipe, written into the fields (so config.json records what ran). A Config
        made by `replace(model=...)` keeps the values resolved for the old model."""
        if self.optimizer == "auto":
            object.__setattr__(self, "optimizer",
                               FAMILY_OPTIMIZER.get(model_kind(self.model), "adamw"))
        for name, value in RECIPES.get(self.optimizer, {}).items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    # ---------------------------------------------------------- derived values
    @property
    def is_sweep(self) -> bool:
        """--sweep or --sweep_batch_sizes (its one-axis case) is given."""
        return bool(self.sweep or self.sweep_batch_sizes)

    @property
    def sweep_axes(self) -> tuple:
        """((flag, (value, ...)), ...): --sweep's axes, typed, in the order given, with
        --sweep_batch_sizes as a global_batch_size axis; a batch axis is ascending
        (peak memory, a high-water mark, is then each point's own).

        Raises:
            ConfigError: an unknown or non-sweepable flag, an empty list, a value of
            the wrong type or given twice, the same flag twice.
        """
        texts = list(self.sweep)
        if self.sweep_batch_sizes:
            texts.append("global_batch_size=" + ",".join(map(str, self.sweep_batch_sizes)))
        axes = []
        for text in texts:
            name, values = parse_axis(text)
            check(name not in dict(axes),
                  f"--sweep names --{name} twice (--sweep_batch_sizes is "
                  "--sweep=global_batch_size=...); accepted: each flag once")
            if name == "global_batch_size":
                values = tuple(sorted(values))
            axes.append((name, values))
        return tuple(axes)

    def sweep_point(self, settings: dict) -> "Config":
        """The config of one point of the sweep (or a rung of the ladder): this one with
        `settings` replaced, checked as a plain run's; no sweep or benchmark of its own.

        Raises:
            ConfigError: the point's settings do not make a valid run.
        """
        return self.replace(sweep=(), sweep_batch_sizes=(), benchmark="none", repeats=1,
                            **settings)

    @property
    def dataset_name(self) -> str:
        """A short, path-safe name of the dataset (for folder names and labels)."""
        name = self.dataset.split(":")[0] if ":" in self.dataset else self.dataset
        if self.dataset.startswith("tfds:"):
            name = self.dataset[5:].split(":")[0].replace("/", "-")
        elif self.dataset.startswith("folder:"):
            name = os.path.basename(os.path.normpath(self.dataset[7:])) or "folder"
        return name

    @property
    def model_label(self) -> str:
        """A short, path-safe name of --model (for folder names): resnet50,
        EfficientNetV2S, my_model.make_model, saved (from saved.keras)."""
        kind, name = model_kind(self.model), self.model
        if kind == "applications":
            name = name.split(":", 1)[1]
        elif kind == "python":
            path, _, function = name.rpartition(":")
            name = f"{os.path.splitext(os.path.basename(path))[0]}.{function}"
        elif kind == "saved":
            name = os.path.splitext(os.path.basename(name))[0]
        return re.sub(r"[^\w.-]", "_", name) or "model"

    @property
    def fingerprint(self) -> str:
        """8 hex digits naming the settings that must match on resume."""
        measured = {k: v for k, v in self.to_dict().items() if k not in RESUMABLE_FIELDS
                    and not (k in LATER_FIELDS and v == LATER_FIELDS[k])}
        text = json.dumps(measured, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    @property
    def policy(self) -> str:
        """The Keras dtype policy that --precision names (auto resolved)."""
        if self.precision != "auto":
            return self.precision
        return "float32" if self.accelerator == "cpu" else "mixed_bfloat16"

    @property
    def learning_rate(self) -> float:
        """Peak learning rate: --base_learning_rate (for 256 images) scaled with the
        global batch, linearly from 256 up (Goyal et al. 2017), by the square root
        below (Krizhevsky 2014). The linear rule keeps a small batch's update per image
        the same, but a short run at a small batch then takes too small a step to get
        anywhere: Fashion-MNIST, one epoch of 300 steps at batch 64, val top-1
        0.736-0.749 over three seeds at 0.1 (linear), 0.769-0.774 at 0.2 (square root);
        the digits job 0.989 -> 0.997 (tests/preprocessing/datasets/test_fashion_mnist.py
        checks the three seeds)."""
        return self.base_learning_rate * batch_scale(self.global_batch_size)

    @property
    def profile_range(self) -> tuple[int, int] | None:
        """(first, last) training step to trace, 1-based inclusive; None = no profile."""
        if not self.profile_steps:
            return None
        match = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", self.profile_steps)
        check(match, f"--profile_steps={self.profile_steps!r}: expected START,STOP "
                     "(1-based training steps, e.g. 3,5)")
        start, stop = int(match.group(1)), int(match.group(2))
        check(1 <= start <= stop,
              f"--profile_steps={self.profile_steps!r}: need 1 <= START <= STOP")
        return start, stop

    @property
    def verbosity(self) -> int:
        """Keras fit verbosity: a progress bar on a terminal, a line per epoch otherwise."""
        if self.verbose != "auto":
            return int(self.verbose)
        import sys
        return 1 if sys.stdout.isatty() else 2

    # ----------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}

    def differences(self, saved: dict) -> list[str]:
        """Fields (outside RESUMABLE_FIELDS) whose value differs from a saved config,
        or that the saved config lacks (a lacking field cannot be shown to match, but
        for one of LATER_FIELDS at its default)."""
        mine = self.to_dict()
        missing = object()  # equal to nothing
        return sorted(k for k in mine if k not in RESUMABLE_FIELDS
                      and (saved[k] if k in saved else LATER_FIELDS.get(k, missing)) != mine[k])

    def replace(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes)
