"""Flags (and the launcher's environment) -> the one frozen Config of this process.

Called once, by app/main.py; after it nothing reads FLAGS.
"""

from __future__ import annotations

import dataclasses
import os

from flags.config import Config, ConfigError


# Flags that may be given bare: absl's string flags need a value, so a bare one is
# rewritten to an empty value (for --list_machines: every row).
BARE_ACTIONS = ("list_machines",)


def with_bare_actions(argv: list[str]) -> list[str]:
    """argv with each bare `--list_machines` (or `-list_machines`) as `--list_machines=`;
    argv[0] and everything after a `--` are left alone."""
    out, rest = list(argv[:1]), list(argv[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            out += [arg, *rest]
            break
        name = arg.lstrip("-")
        out.append(f"--{name}=" if arg.startswith("-") and name in BARE_ACTIONS else arg)
    return out


def _parse_numbers(values, flag, kind):
    """Parses a comma list flag into numbers of `kind` (float or int)."""
    out = []
    for value in values:
        try:
            out.append(kind(value))
        except ValueError:
            raise ConfigError(f"--{flag} has {value!r}; accepted: "
                              f"{'numbers' if kind is float else 'integers'}, comma separated")
    return out


# Where a launcher or platform describes the hosts of a run (used when the flag is unset).
HOST_ENVIRONMENT = {
    "coordinator_address": ("JAX_COORDINATOR_ADDRESS", "KERAS_DISTRIBUTION_JOB_ADDRESSES"),
    "num_processes": ("JAX_NUM_PROCESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES"),
    "process_id": ("JAX_PROCESS_ID", "KERAS_DISTRIBUTION_PROCESS_ID"),
}


def _from_environment(values: dict, flag_values) -> None:
    for name, variables in HOST_ENVIRONMENT.items():
        if flag_values[name].present:
            continue
        for variable in variables:
            text = os.environ.get(variable, "").strip()
            if not text:
                continue
            if name == "coordinator_address":
                values[name] = text.split(",")[0]  # the first job is the coordinator
            else:
                try:
                    values[name] = int(text)
                except ValueError:
                    raise ConfigError(f"${variable}={text!r}; accepted: an integer")
            break


def config_from_flags(flag_values) -> Config:
    """Builds the one Config of this process from parsed absl flags.

    The multi-host settings fall back to the usual environment variables
    (HOST_ENVIRONMENT) where their flags are not given.

    Args:
        flag_values: parsed `absl.flags.FLAGS`.

    Returns:
        The frozen, validated Config.

    Raises:
        ConfigError: for any invalid value or combination.
    """
    values = {}
    for field in dataclasses.fields(Config):
        values[field.name] = flag_values[field.name].value
    _from_environment(values, flag_values)
    values["target_top1"] = _parse_numbers(values["target_top1"], "target_top1", float)
    values["sweep_batch_sizes"] = _parse_numbers(values["sweep_batch_sizes"],
                                                 "sweep_batch_sizes", int)
    return Config(**values)
