"""The range of every number flag: a value past it is a mistake, not a setting.

absl takes any integer (`--epochs=99999999999999999999`) and any float; these
tables bound each number flag (inclusive) by what a run can honestly reach, and
`check_ranges(config)` refuses the rest in one line naming the flag, the value and
the range. Finer rules (an exclusive bound, a relation between flags) stay in
flags/config.py's checks, which run first and keep their own messages.
"""

from __future__ import annotations

import math

BILLION = 10**9  # steps: at 1,000 steps a second, 11 days; a step count past it is a typo
MAX_BATCH = 2**31  # images per step: array indices are int32 in XLA and tf.data

INT_RANGES = {
    "num_devices": (0, 65536),  # 0 = all visible; the largest pods have thousands of chips
    "num_processes": (1, 65536),
    "process_id": (0, 65535),
    "coordinator_timeout_seconds": (1, 86400),  # a day
    "image_size": (0, 1024),  # 0 = the dataset's size (8..1024 otherwise: config.py)
    "global_batch_size": (1, MAX_BATCH),
    "epochs": (1, 1_000_000),  # a million passes over even the digits take days
    "steps_per_epoch": (0, BILLION),
    "validation_steps": (-1, BILLION),
    "steps_per_execution": (0, 65536),
    "seed": (0, 2**32 - 1),
    "checkpoint_every_steps": (0, BILLION),
    "log_every_steps": (1, BILLION),
    "throughput_warmup_steps": (0, BILLION),
    # Each window compiles afresh and times its steps: 100 windows of a sweep point
    # are hours on a GPU; past that a typo (--repeats=30 meant 3 is still accepted).
    "repeats": (1, 100),
}
FLOAT_RANGES = {
    # Per 256 images; recipes stay under 30, but tests diverge on purpose at 1e37
    # (tests/test_resilience.py): the bound is what a float32 optimizer can hold.
    "base_learning_rate": (0.0, 1e38),
    "warmup_epochs": (0.0, 1_000_000.0),
    "momentum": (0.0, 1.0),
    "weight_decay": (0.0, 10.0),
    "label_smoothing": (0.0, 1.0),
    "gradient_clip_norm": (0.0, 1e9),
    "price_per_hour_usd": (0.0, 1e6),  # the largest clusters sell for thousands an hour
    "peak_tflops_per_device": (0.0, 1e5),  # a 2025 chip: ~2,500 dense bf16
}
LIST_RANGES = {"sweep_batch_sizes": (1, MAX_BATCH), "target_top1": (0.0, 1.0)}


def _number(value) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 \
        else f"{value:g}"


def _text(low, high) -> str:
    return f"{_number(low)}..{_number(high)}"


def out_of_range(name: str, value) -> str | None:
    """The one-line message for `--name=value` outside its range, or None."""
    table = INT_RANGES if name in INT_RANGES else FLOAT_RANGES
    if value is None or name not in table:
        return None
    low, high = table[name]
    if isinstance(value, float) and not math.isfinite(value) or not low <= value <= high:
        return f"--{name}={value} is out of range; accepted: {_text(low, high)}"
    return None


def check_ranges(config, error=ValueError) -> None:
    """Raises `error` (one line) for the first number flag of `config` out of range."""
    for name in (*INT_RANGES, *FLOAT_RANGES):
        message = out_of_range(name, getattr(config, name))
        if message:
            raise error(message)
    for name, (low, high) in LIST_RANGES.items():
        for value in getattr(config, name):
            if not low <= value <= high:
                raise error(f"--{name} has {value}, out of range; accepted: "
                            f"{_text(low, high)}")
