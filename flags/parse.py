"""Flags (and the launcher's environment) -> the one frozen Config of this process.

Called once, by app/main.py; after it nothing reads FLAGS.
"""

from __future__ import annotations

import dataclasses
import os

from callbacks.records.untrusted import FileRefused, read_regular
from flags.config import Config, ConfigError
from flags.modes import MODES

MAX_FLAGFILE_BYTES = 1 << 20  # a flagfile is a page of flags; configs/ holds ~1 KB ones
MAX_FLAGFILE_DEPTH = 8  # flagfiles including flagfiles: configs/ nests at most 2 deep
FLAGFILE_DIRECTIVES = ("--flagfile=", "-flagfile=")
FLAGFILE_ACCEPTED = "accepted: a UTF-8 text file of flags, one per line"


def _flagfile_lines(path: str, label: str) -> list[str]:
    """The lines of flagfile `path`, or ConfigError: not a readable regular file of
    at most MAX_FLAGFILE_BYTES of UTF-8 text (read through the one file door, which
    never waits on a FIFO: callbacks/records/untrusted.py's read_regular)."""
    try:
        data, _ = read_regular(path, MAX_FLAGFILE_BYTES)
    except OSError as error:
        raise ConfigError(f"{label} cannot be read ({error.strerror}); "
                          f"{FLAGFILE_ACCEPTED}") from None
    except FileRefused as refused:
        if refused.why == "too large":
            raise ConfigError(f"{label} is {refused.size:,} bytes; {FLAGFILE_ACCEPTED}, "
                              f"up to {MAX_FLAGFILE_BYTES:,} bytes") from None
        raise ConfigError(f"{label} is {refused.why}; {FLAGFILE_ACCEPTED}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{label} is not UTF-8 text (byte 0x{data[error.start]:02x} at "
                          f"offset {error.start}); {FLAGFILE_ACCEPTED}") from None
    if "\0" in text or len(data) > MAX_FLAGFILE_BYTES:
        where = (f"a NUL byte at offset {data.index(0)}" if 0 in data
                 else f"over {MAX_FLAGFILE_BYTES:,} bytes")
        raise ConfigError(f"{label} is not a text file of flags ({where}); "
                          f"{FLAGFILE_ACCEPTED}")
    return text.splitlines(keepends=True)


def _check_flagfile(path: str, chain: tuple[str, ...]) -> None:
    """Checks flagfile `path` and, depth first, those it includes (as absl reads
    them: a line starting --flagfile=, its path relative to the working directory)."""
    label = f"--flagfile={path}" + (f" (included by {chain[-1]})" if chain else "")
    real = os.path.realpath(path)
    names = [*chain, path]
    if real in (os.path.realpath(p) for p in chain):
        raise ConfigError(f"--flagfile={chain[0]} includes itself "
                          f"({' -> '.join(names)}); accepted: flagfiles that include "
                          "others without a cycle")
    if len(chain) >= MAX_FLAGFILE_DEPTH:
        raise ConfigError(f"--flagfile={chain[0]} nests flagfiles over "
                          f"{MAX_FLAGFILE_DEPTH} deep ({' -> '.join(names)}); accepted: "
                          f"at most {MAX_FLAGFILE_DEPTH}")
    for line in _flagfile_lines(path, label):
        if line.startswith(FLAGFILE_DIRECTIVES):  # absl's test, on the unstripped line
            included = os.path.expanduser(line.split("=", 1)[1].strip())
            if included:  # absl ignores an empty one
                _check_flagfile(included, tuple(names))


def check_flagfiles(argv: list[str]) -> None:
    """Every --flagfile in argv (and every one they include) is a readable regular
    file of bounded size, UTF-8 text, nested without a cycle and at most
    MAX_FLAGFILE_DEPTH deep. Run before absl reads them: absl would print a
    UnicodeDecodeError's traceback, warn of a cycle and go on, or wait on a FIFO.

    Raises:
        ConfigError: one line naming the file and what was wrong.
    """
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "--":
            break
        if arg in ("--flagfile", "-flagfile") and args:
            path = os.path.expanduser(args.pop(0))
        elif arg.startswith(FLAGFILE_DIRECTIVES):
            path = os.path.expanduser(arg.split("=", 1)[1].strip())
        else:
            continue
        if path:
            _check_flagfile(path, ())


# Flags that may be given bare: absl's string flags need a value, so a bare one is
# rewritten to an empty value (for --list_machines: every row).
BARE_ACTIONS = ("list_machines",)


def with_bare_actions(argv: list[str], flag_values=None) -> list[str]:
    """argv with each bare `--list_machines` (or `-list_machines`) as `--list_machines=`;
    argv[0] and everything after a `--` are left alone.

    Given `flag_values` (absl's FlagValues), the --flagfile arguments are first
    replaced by the flags they hold, as absl would read them: a bare action on a line
    of a flagfile (as --help shows it) took the next flag as its value, e.g. the
    pattern '--logdir=...'. Call check_flagfiles(argv) first.
    """
    if flag_values is not None:
        argv = [*argv[:1], *flag_values.read_flags_from_files(list(argv[1:]),
                                                              force_gnu=False)]
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


# Flags naming a path, whose "~" is the user's home folder: a shell expands it at a word's
# start only, so --data_dir=~/data and --dataset=folder:~/photos (and any in a flagfile)
# reached the app as typed, and were read as a folder named "~".
PATH_FLAGS = ("data_dir", "manual_dir", "logdir")
FOLDER_DATASET = "folder:"


def _expand_home(values: dict) -> None:
    for name in PATH_FLAGS:
        if values.get(name):
            values[name] = os.path.expanduser(values[name])
    if str(values.get("dataset") or "").startswith(FOLDER_DATASET):
        values["dataset"] = FOLDER_DATASET + os.path.expanduser(
            values["dataset"][len(FOLDER_DATASET):])


# Datasets read from --data_dir that are found elsewhere too where it lacks them
# (Fashion-MNIST: Debian's copy in /usr/share/datasets). The others say in one line
# what --data_dir lacks (a TFDS dataset "is not prepared in ..."), are written there
# (digits; ImageNet prepared from --manual_dir) or do not read it (synthetic, folder:).
FOUND_ELSEWHERE = ("fashion_mnist",)


def _check_data_dir(values: dict, flag_values) -> None:
    """A --data_dir the user gave is a folder, where a dataset would otherwise be read
    from elsewhere unseen: --dataset=fashion_mnist --data_dir=/nothing_here trained a
    97-minute run from Debian's copy. (The banner names the folder read.)

    Raises:
        ConfigError: naming the path and what is accepted.
    """
    path = values["data_dir"]
    if (flag_values["data_dir"].present and path and values["dataset"] in FOUND_ELSEWHERE
            and not os.path.isdir(path)):
        what = "a file, not a folder" if os.path.exists(path) else "not there (no such folder)"
        raise ConfigError(f"--data_dir={path} is {what}; accepted: an existing folder that "
                          "holds the data (or no --data_dir: its default)")


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
    default = MODES[values["benchmark"]].repeats if values["benchmark"] in MODES else None
    if default and not flag_values["repeats"].present:
        values["repeats"] = default  # the mode's own (a probe's: three windows)
    _expand_home(values)
    _check_data_dir(values, flag_values)
    values["target_top1"] = _parse_numbers(values["target_top1"], "target_top1", float)
    values["sweep_batch_sizes"] = _parse_numbers(values["sweep_batch_sizes"],
                                                 "sweep_batch_sizes", int)
    return Config(**values)
