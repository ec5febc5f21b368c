"""What each flag accepts, and what its values mean before any is checked: the
choices of the enum flags (flags/definitions.py offers them, flags/checks.py refuses
the rest), --sweep's axes and why a flag is none, the fields a resume may change, the
recipe of each optimizer, and what a --model value is by its form.
"""

from __future__ import annotations

import math
import re

from callbacks.figures.bill import PRICINGS  # noqa: F401 (--pricing's choices: the Bill's)
from preprocessing.augment import PRESETS

MODELS = ("small_resnet", "resnet18", "resnet34", "resnet50",
          "vit_ti16", "vit_s16", "vit_b16", "vit_l16")  # app/models/
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
from flags.modes import BENCHMARKS  # noqa: E402,F401 (the modes: flags/modes.py)
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
