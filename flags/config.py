"""The run's frozen configuration: built once from the flags, validated, then read-only.

Everything that can be checked without touching a device or a file is checked in
`Config.__post_init__`, so a mistake ends the run before anything starts. Derived
values (learning rate for the batch, the precision that `auto` means, default
paths) are computed here too, so the rest of the app never re-derives them.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re

from callbacks.figures.bill import PRICINGS  # --pricing's choices: the Bill's
from flags.ranges import check_ranges
from preprocessing.augment import PRESETS

MODELS = ("small_resnet", "resnet18", "resnet34", "resnet50",
          "vit_ti16", "vit_s16", "vit_b16", "vit_l16")  # app/engine/models/
OPTIMIZERS = ("auto", "sgd", "adamw")
NAMED_DATASETS = ("digits", "fashion_mnist", "synthetic", "imagenet2012")
DATASET_PREFIXES = ("tfds:", "folder:")
BACKENDS = ("tensorflow", "jax")
ACCELERATORS = ("cpu", "gpu", "tpu")
PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")
LR_SCHEDULES = ("cosine", "step")
BATCHNORM_STATISTICS = ("per_replica", "global")
PREPROCESSINGS = ("auto",) + PRESETS
VERBOSITIES = ("auto", "0", "1", "2")
BENCHMARKS = ("none", "input", "ladder", "probe")
INPUT_PIPELINES = ("auto", "tf.data", "grain", "gpu", "device")
XLA_AUTOTUNES = ("auto", "full", "heuristic")  # app/engine/autotune.py

# --sweep's axes: settings that change how fast or how cheaply the same job runs
# (app/modes/sweep.py measures each point on --dataset, real or synthetic, in one
# process); input_pipeline on a real dataset only (synthetic data has none).
SWEEPABLE = ("precision", "global_batch_size", "steps_per_execution", "xla_autotune",
             "image_size", "model", "batchnorm_statistics", "input_pipeline")
# Why a known flag is not an axis (the first group that names it); the rest: NOT_AN_AXIS.
NOT_SWEEPABLE = {
    ("dataset", "data_dir", "manual_dir", "download", "epochs", "steps_per_epoch",
     "validation_steps", "seed", "target_top1", "logdir", "fresh", "sweep",
     "sweep_batch_sizes", "benchmark", "optimizer", "base_learning_rate", "lr_schedule",
     "warmup_epochs", "momentum", "weight_decay", "label_smoothing", "gradient_clip_norm",
     "preprocessing"): "changes what the job is (its data, length, recipe or outcome), "
                       "not how fast it runs",
    ("accelerator", "backend", "num_devices", "tpu", "num_processes", "process_id",
     "coordinator_address", "coordinator_timeout_seconds", "kernels_from", "keep_kernels"):
        "is fixed for the whole process (one backend, one set of devices); run one sweep "
        "per value",
}
NOT_AN_AXIS = "changes neither speed nor cost of the measured steps"

# Fields that may change between the attempts of one run (resume) without
# changing what is being measured. Everything else must match the saved config.
RESUMABLE_FIELDS = frozenset({
    "fresh", "verbose", "profile_steps", "log_every_steps", "coordinator_address",
    "process_id", "coordinator_timeout_seconds", "logdir", "data_dir", "manual_dir",
    "download", "checkpoint_every_steps", "tpu",
    # The catalog file, as its contents, may change between attempts (prices are
    # updated); the run is billed at the price each attempt reads, as it always was.
    "price_catalog",
})
# Fields added after run folders were written, each at its default: a config.json that
# lacks one matches it, and it leaves the folder's name (`fingerprint`) as it was, so
# a folder made before the field existed resumes (and is found) as before.
LATER_FIELDS = {"repeats": 1, "kernels_from": "", "keep_kernels": False}


# The recipe of each optimizer: what an unset --base_learning_rate, --weight_decay,
# --warmup_epochs and --gradient_clip_norm mean (None in Config until resolved).
RECIPES = {
    # Goyal et al. 2017 (linear scaling, warm-up), tuned on digits; ImageNet's
    # 0.1 and 5 warm-up epochs are in configs/imagenet_resnet50.flags.
    "sgd": {"base_learning_rate": 0.4, "weight_decay": 5e-4, "warmup_epochs": 1.0,
            "gradient_clip_norm": 0.0},
    # DeiT (Touvron et al. 2021): 5e-4 per 512 images, decay 0.05, 5 warm-up epochs;
    # the global norm clipped at 1, as in ViT's own recipe (Dosovitskiy et al. 2021).
    "adamw": {"base_learning_rate": 2.5e-4, "weight_decay": 0.05, "warmup_epochs": 5.0,
              "gradient_clip_norm": 1.0},
}
# --optimizer=auto: the ResNets' SGD; AdamW for the ViTs and every model not ours.
LEARNING_RATE_BATCH = 256  # --base_learning_rate is the peak rate at this global batch
FAMILY_OPTIMIZER = {"resnet": "sgd", "vit": "adamw"}
VIT_PATCH = 16


def model_kind(name: str) -> str | None:
    """What a --model value is by its form: resnet, vit (built in), applications
    (applications:NAME), python (FILE.py:FUNCTION), saved (FILE.keras); None if none."""
    if name in MODELS:
        return "vit" if name.startswith("vit_") else "resnet"
    if re.fullmatch(r"applications:[A-Za-z]\w*", name):
        return "applications"
    if re.fullmatch(r".+\.py:[A-Za-z_]\w*", name):
        return "python"
    return "saved" if re.fullmatch(r".+\.keras", name) else None


def batch_scale(global_batch_size: int) -> float:
    """What a learning rate for 256 images is multiplied by at this global batch:
    linearly from 256 up, by the square root below (Config.learning_rate says why)."""
    ratio = global_batch_size / LEARNING_RATE_BATCH
    return ratio if ratio >= 1 else math.sqrt(ratio)


class ConfigError(ValueError):
    """A user mistake in the flags; its message is one line fit to print as is."""


def _check(condition, message):
    if not condition:
        raise ConfigError(message)


def did_you_mean(value: str, choices) -> str:
    """"; did you mean X?" naming the choices a mistyped `value` is closest to, or ""."""
    choices = list(choices)
    close = [c for c in choices if value and value.lower() in c.lower()]
    close = close or difflib.get_close_matches(value, choices, n=2, cutoff=0.7)
    return f"; did you mean {' or '.join(close[:2])}?" if close else ""


def parse_axis(text: str) -> tuple:
    """(flag, (typed value, ...)) of one --sweep=FLAG=v1,v2,... (a leading -- allowed).

    Raises:
        ConfigError: one line naming the mistake and what is accepted.
    """
    name, equals, values = text.partition("=")
    name = name.strip().lstrip("-")
    fields = {f.name: f.default for f in dataclasses.fields(Config)}
    accepted = f"accepted: {', '.join(SWEEPABLE)}"
    _check(name in fields, f"--sweep={text}: --{name} is not a flag; {accepted}"
                           f"{did_you_mean(name, SWEEPABLE)}")
    reason = next((why for names, why in NOT_SWEEPABLE.items() if name in names),
                  None if name in SWEEPABLE else NOT_AN_AXIS)
    _check(reason is None, f"--sweep={text}: --{name} {reason}; {accepted}")
    items = [v.strip() for v in values.split(",")] if equals else []
    _check(items and all(items), f"--sweep={text}: expected FLAG=v1,v2,... with no empty "
                                 f"value, e.g. --sweep={name}=a,b; {accepted}")
    kind = type(fields[name])
    typed = []
    for item in items:
        try:
            typed.append(kind(item) if kind in (int, float) else item)
        except ValueError:
            raise ConfigError(f"--sweep={text}: {item!r} is not a number; accepted: "
                              f"{'integers' if kind is int else 'numbers'}") from None
    _check(len(set(typed)) == len(typed),
           f"--sweep={text}: a value is given twice; accepted: each value once")
    return name, tuple(typed)


def _dataset_suggestion(name: str) -> str:
    """The --dataset value a near miss probably meant (cifar10 -> tfds:cifar10)."""
    if os.path.isdir(name):
        return f"; did you mean folder:{name}?"
    return did_you_mean(name, NAMED_DATASETS) or (
        f"; did you mean tfds:{name}?" if re.fullmatch(r"[a-z0-9_]+", name) else "")


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
    price_catalog: str = ""  # "" = app/engine/prices.csv (app/engine/catalog.py)
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
            name = ("sweep" if self.is_sweep else "ladder" if self.benchmark == "ladder"
                    else f"probe-{self.dataset_name}" if self.benchmark == "probe"
                    else self.dataset_name)
            object.__setattr__(self, "logdir", os.path.join(
                "runs", f"{self.model_label}-{name}-{self.backend}-{self.fingerprint}"))
        if self.dataset == "synthetic" and self.validation_steps == 0:
            # Random images measure no accuracy: validate them only when asked (N > 0).
            object.__setattr__(self, "validation_steps", -1)
        object.__setattr__(self, "target_top1", tuple(self.target_top1))
        object.__setattr__(self, "sweep_batch_sizes", tuple(self.sweep_batch_sizes))
        object.__setattr__(self, "sweep", tuple(self.sweep))
        self._validate()

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

    # ----------------------------------------------------------------- checks
    def _validate(self):
        for field in dataclasses.fields(self):  # config.json and summary.json are strict JSON
            value = getattr(self, field.name)
            _check(not isinstance(value, float) or math.isfinite(value),
                   f"--{field.name}={value} must be a finite number")
        _check(self.accelerator in ACCELERATORS,
               f"--accelerator={self.accelerator!r} is unknown; accepted: {', '.join(ACCELERATORS)}")
        _check(self.backend in BACKENDS,
               f"--backend={self.backend!r} is unknown; accepted: {', '.join(BACKENDS)}")
        self._validate_model()
        _check(self.precision in PRECISIONS,
               f"--precision={self.precision!r} is unknown; accepted: {', '.join(PRECISIONS)}")
        _check(self.batchnorm_statistics in BATCHNORM_STATISTICS,
               f"--batchnorm_statistics={self.batchnorm_statistics!r} is unknown; accepted: "
               f"{', '.join(BATCHNORM_STATISTICS)}")
        _check(not (self.precision == "mixed_float16" and self.accelerator == "tpu"),
               "--precision=mixed_float16 is not supported on TPU; use mixed_bfloat16")
        self._validate_dataset()
        self._validate_sizes()
        self._validate_optimizer()
        self._validate_processes()
        self._validate_study_flags()
        check_ranges(self, ConfigError)  # after the finer checks: their messages stay

    def _validate_model(self):
        """The form of --model; app.engine.models.check_model looks at files and names."""
        kind = model_kind(self.model)
        _check(kind is not None,
               f"--model={self.model!r} is unknown; accepted: {', '.join(MODELS)}, "
               "applications:NAME (a keras.applications classifier), FILE.py:FUNCTION (a "
               "function of (num_classes, image_size) returning a keras.Model), FILE.keras "
               f"(a saved model){did_you_mean(self.model, MODELS)}")
        _check(kind != "vit" or self.image_size % VIT_PATCH == 0,
               f"--image_size={self.image_size}: --model={self.model} cuts images into "
               f"{VIT_PATCH}x{VIT_PATCH} patches; accepted: a multiple of {VIT_PATCH} "
               "(0 = the dataset's size)")

    def _validate_dataset(self):
        name = self.dataset
        ok = name in NAMED_DATASETS or any(
            name.startswith(p) and len(name) > len(p) for p in DATASET_PREFIXES)
        _check(ok, f"--dataset={name!r} is unknown; accepted: digits, fashion_mnist, synthetic, "
                   f"imagenet2012, tfds:NAME[:VERSION], folder:PATH{_dataset_suggestion(name)}")
        if name.startswith("tfds:"):
            _check(re.fullmatch(r"[a-z0-9_]+(/[a-z0-9_.]+)?(:\d+\.\d+\.\d+)?", name[5:]),
                   f"--dataset={name!r}: expected tfds:NAME or tfds:NAME:X.Y.Z "
                   "(lower-case TFDS name, e.g. tfds:mnist:3.0.1)")
        _check(self.xla_autotune in XLA_AUTOTUNES,
               f"--xla_autotune={self.xla_autotune!r} is unknown; accepted: "
               f"{', '.join(XLA_AUTOTUNES)}")
        _check(self.input_pipeline in INPUT_PIPELINES,
               f"--input_pipeline={self.input_pipeline!r} is unknown; accepted: "
               f"{', '.join(INPUT_PIPELINES)}")
        _check(self.input_pipeline != "gpu" or (self.backend == "jax"
                                                and self.accelerator == "gpu"),
               "--input_pipeline=gpu decodes JPEGs on the GPU through JAX; it needs "
               "--backend=jax --accelerator=gpu (use grain or tf.data elsewhere)")
        _check(self.benchmark != "input" or name != "synthetic",
               "--benchmark=input measures an input pipeline; --dataset=synthetic has none")
        _check(self.benchmark == "none" or not self.is_sweep,
               f"--benchmark={self.benchmark} and --sweep are two modes; accepted: one of them")
        _check(self.repeats == 1 or self.is_sweep or self.benchmark != "none",
               f"--repeats={self.repeats} repeats a benchmark's timed window; accepted with "
               "--sweep, --sweep_batch_sizes or --benchmark=ladder/input (a training run "
               "times every epoch of its own)")
        _check(self.image_size == 0 or 8 <= self.image_size <= 1024,
               f"--image_size={self.image_size} is out of range; accepted: 0 (dataset "
               "default) or 8..1024")

    def _validate_sizes(self):
        _check(self.global_batch_size >= 1,
               f"--global_batch_size={self.global_batch_size} must be a positive integer")
        _check(self.epochs >= 1, f"--epochs={self.epochs} must be at least 1")
        _check(self.steps_per_epoch >= 0,
               f"--steps_per_epoch={self.steps_per_epoch} must be >= 0 (0 = whole epoch)")
        _check(self.validation_steps >= -1,
               f"--validation_steps={self.validation_steps} must be >= -1 "
               "(0 = all validation images, -1 = none)")
        _check(self.steps_per_execution >= 0,
               f"--steps_per_execution={self.steps_per_execution} must be >= 0 (0 = auto)")
        _check(not self.steps_per_execution or self.steps_per_epoch % self.steps_per_execution == 0,
               f"--steps_per_epoch={self.steps_per_epoch} is not a multiple of "
               f"--steps_per_execution={self.steps_per_execution}")
        _check(self.num_devices >= 0,
               f"--num_devices={self.num_devices} must be >= 0 (0 = all visible)")
        for size in self.sweep_batch_sizes:
            _check(isinstance(size, int) and size >= 1,
                   f"--sweep_batch_sizes has {size!r}; accepted: positive integers")
        _check(self.checkpoint_every_steps >= 0,
               f"--checkpoint_every_steps={self.checkpoint_every_steps} must be >= 0")
        _check(self.log_every_steps >= 1,
               f"--log_every_steps={self.log_every_steps} must be at least 1")
        _check(self.throughput_warmup_steps >= 0,
               f"--throughput_warmup_steps={self.throughput_warmup_steps} must be >= 0")
        _check(self.seed is None or 0 <= self.seed < 2**32,
               f"--seed={self.seed} is out of range; accepted: 0..4294967295")

    def _validate_optimizer(self):
        _check(self.optimizer in OPTIMIZERS,
               f"--optimizer={self.optimizer!r} is unknown; accepted: {', '.join(OPTIMIZERS)}")
        clip = self.gradient_clip_norm
        _check(clip is None or clip >= 0,
               f"--gradient_clip_norm={clip} must be >= 0 (0 = no clipping)")
        _check(self.base_learning_rate > 0 and math.isfinite(self.base_learning_rate),
               f"--base_learning_rate={self.base_learning_rate} must be a finite number > 0")
        _check(self.warmup_epochs >= 0, f"--warmup_epochs={self.warmup_epochs} must be >= 0")
        _check(0 <= self.momentum < 1, f"--momentum={self.momentum} must be in [0, 1)")
        _check(self.weight_decay >= 0, f"--weight_decay={self.weight_decay} must be >= 0")
        _check(0 <= self.label_smoothing < 1,
               f"--label_smoothing={self.label_smoothing} must be in [0, 1)")

    def _validate_processes(self):
        _check(self.num_processes >= 1,
               f"--num_processes={self.num_processes} must be at least 1")
        _check(0 <= self.process_id < self.num_processes,
               f"--process_id={self.process_id} must be in [0, {self.num_processes})")
        if self.num_processes > 1:
            _check(self.backend == "jax",
                   "multi-host training needs --backend=jax: Keras 3's fit fails under "
                   "TensorFlow's MultiWorkerMirroredStrategy (keras-team/keras#20585)")
            _check(re.fullmatch(r"[\w.\-\[\]:]+:\d{1,5}", self.coordinator_address or ""),
                   f"--coordinator_address={self.coordinator_address!r}: a multi-host run "
                   "needs HOST:PORT of process 0")
        _check(self.coordinator_timeout_seconds >= 1,
               f"--coordinator_timeout_seconds={self.coordinator_timeout_seconds} must be >= 1")

    def _validate_study_flags(self):
        for target in self.target_top1:
            _check(isinstance(target, float) and 0 < target <= 1,
                   f"--target_top1 has {target!r}; accepted: numbers in (0, 1], e.g. 0.757")
        _check(self.pricing in PRICINGS,
               f"--pricing={self.pricing!r} is unknown; accepted: {', '.join(PRICINGS)}")
        price, peak = self.price_per_hour_usd, self.peak_tflops_per_device
        _check(price is None or (price >= 0 and math.isfinite(price)),
               f"--price_per_hour_usd={price} must be a finite number >= 0")
        _check(peak is None or (peak > 0 and math.isfinite(peak)),
               f"--peak_tflops_per_device={peak} must be a finite number > 0")
        self.profile_range  # parses and checks --profile_steps
        self._validate_sweep()
        from flags.autotune_results import AutotuneFileError, check_flags

        try:
            check_flags(self)  # --kernels_from (its file, read at its head), --keep_kernels
        except AutotuneFileError as error:
            raise ConfigError(str(error)) from None

    def _validate_sweep(self):
        """Each --sweep value as a plain run of that setting would be checked (the
        grid's combinations are checked point by point, app/modes/sweep.py)."""
        for name, values in self.sweep_axes:
            if name == "input_pipeline":
                _check(self.dataset != "synthetic",
                       f"--sweep=input_pipeline={','.join(values)}: --dataset=synthetic has "
                       "no input pipeline to vary (its images are made on the device); "
                       "accepted: a real --dataset (e.g. digits), or time one pipeline "
                       "with --benchmark=input")
                # A known value that cannot apply here (gpu on a CPU) is a point that
                # did not run, with its reason (app/modes/bench.py), not a refusal.
                for value in values:
                    _check(value in INPUT_PIPELINES,
                           f"--sweep=input_pipeline={value}: --input_pipeline={value!r} is "
                           f"unknown; accepted: {', '.join(INPUT_PIPELINES)}")
                continue
            for value in values:
                try:
                    self.sweep_point({name: value})
                except ConfigError as error:
                    raise ConfigError(f"--sweep={name}={value}: {error}") from None

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
            _check(name not in dict(axes),
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
        the digits job 0.989 -> 0.997 (issue 42 item 7)."""
        return self.base_learning_rate * batch_scale(self.global_batch_size)

    @property
    def profile_range(self) -> tuple[int, int] | None:
        """(first, last) training step to trace, 1-based inclusive; None = no profile."""
        if not self.profile_steps:
            return None
        match = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", self.profile_steps)
        _check(match, f"--profile_steps={self.profile_steps!r}: expected START,STOP "
                      "(1-based training steps, e.g. 3,5)")
        start, stop = int(match.group(1)), int(match.group(2))
        _check(1 <= start <= stop,
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
