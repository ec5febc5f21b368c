"""--kernels_from at the door: an XLA autotune results file, or a run folder that kept one.

XLA writes the kernels its autotuner chose with --xla_gpu_dump_autotune_results_to
(the app's --keep_kernels puts them in `<run>/kernels/autotune.textproto`) and loads
them with --xla_gpu_load_autotune_results_from, in the proto's text form (.textproto,
.txt) or its binary form (.pb). XLA reads that file while it compiles the first
step, deep in the run: a wrong file would fail there, after the start's tens of
seconds. So it is read here first, its head parsed as either form: one line naming
the path and what is accepted otherwise.
"""

from __future__ import annotations

import os
import re

from callbacks.records.untrusted import FileRefused, read_regular

KEPT = os.path.join("kernels", "autotune.textproto")  # app/engine/kernels.py's KEPT_FILE
HEAD_BYTES = 1 << 16  # enough to see the first entries; the rest is XLA's to parse
MAX_BYTES = 1 << 30  # an autotune file of a large model is megabytes
# AutotuneResults' top-level fields in text form: `version: 3` + `results {` (XLA's
# autotune_results.proto), or `entries {` (the autotuner cache XLA 2025+ dumps).
TEXT_FIELDS = ("version", "results", "entries")
ACCEPTED = ("accepted: an XLA autotune results file (.textproto or .pb, as "
            "--xla_gpu_dump_autotune_results_to writes it) or a run folder that kept one "
            "(--keep_kernels)")


class AutotuneFileError(ValueError):
    """Not a usable autotune results file (or --keep_kernels off JAX); one line."""


def check_flags(config) -> None:
    """--kernels_from and --keep_kernels act on XLA's GPU compiles under JAX; the file
    --kernels_from names is read here, not when XLA meets it mid-compile.

    Raises:
        AutotuneFileError: one line (Config makes it a ConfigError).
    """
    for name in ("kernels_from", "keep_kernels"):
        if getattr(config, name) and config.backend != "jax":
            raise AutotuneFileError(f"--{name} chooses the GPU kernels XLA compiles under "
                                    f"JAX; accepted with --backend=jax (received --backend="
                                    f"{config.backend})")
    if config.kernels_from:
        resolve(config.kernels_from)


def resolve(path: str) -> str:
    """The autotune results file `path` names: the file itself, or a run folder's kept
    one (kernels/autotune.textproto, else kernels/autotune.pb); checked as `check` does.

    Raises:
        AutotuneFileError: naming `path` and what is accepted.
    """
    label = f"--kernels_from={shown(path)}"
    if os.path.isdir(path):
        for name in (KEPT, os.path.splitext(KEPT)[0] + ".pb"):
            if os.path.lexists(os.path.join(path, name)):
                found = os.path.join(path, name)
                break
        else:
            raise AutotuneFileError(f"{label} is a folder without kept kernels ({KEPT}: its "
                                    "run did not pass --keep_kernels, or XLA autotuned "
                                    f"nothing there); {ACCEPTED}")
        label = f"{label} (its {shown(os.path.relpath(found, path))})"
    else:
        found = path
    check(found, label)
    return os.path.abspath(found)


def shown(value: str) -> str:
    """`value` as an error line may print it: as it is where every character prints,
    else escaped as Python writes a string ('a\\nb'): a newline in a path made the
    one-line error two lines (seen with --kernels_from=$'a\\nb')."""
    return value if value.isprintable() else repr(value)


def check(path: str, label: str) -> None:
    """`path` is a readable regular file whose head parses as an autotune results proto,
    in text or binary form.

    Raises:
        AutotuneFileError: one line starting with `label`.
    """
    try:
        head, size = read_regular(path, MAX_BYTES, head=HEAD_BYTES)
    except OSError as error:
        raise AutotuneFileError(f"{label} cannot be read ({error.strerror}); {ACCEPTED}") \
            from None
    except FileRefused as refused:
        raise AutotuneFileError(f"{label} is {refused.size:,} bytes, over {MAX_BYTES:,}; "
                                f"{ACCEPTED}" if refused.why == "too large" else
                                f"{label} is not a regular file; {ACCEPTED}") from None
    if size == 0:
        raise AutotuneFileError(f"{label} is empty; {ACCEPTED}")
    why_text, why_binary = text_form(head), binary_form(head, complete=size <= HEAD_BYTES)
    if why_text is not None and why_binary is not None:
        raise AutotuneFileError(f"{label} is neither form of an autotune results proto (as "
                                f"text: {why_text}; as binary: {why_binary}); {ACCEPTED}")


_TOKEN = re.compile(r"\s*(?:#[^\n]*\n\s*)*([A-Za-z_][A-Za-z0-9_]*)\s*([:{<])")


def text_form(head: bytes) -> str | None:
    """None if `head` begins as AutotuneResults in text form (comments, then a
    top-level field of TEXT_FIELDS opening a value or a message); else why not."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # not merely a character cut by the head's end
            return f"not UTF-8 (byte {error.start})"
        text = head[:error.start].decode("utf-8")
    match = _TOKEN.match(text)
    if not match:
        return "it does not begin with a field"
    if match.group(1) not in TEXT_FIELDS:
        return f"its first field is {match.group(1)[:30]!r}, not one of {', '.join(TEXT_FIELDS)}"
    return None


def binary_form(head: bytes, complete: bool) -> str | None:
    """None if `head` parses as protobuf wire format field by field (each tag's field
    number and wire type valid, each length within the file); else why not. A head cut
    from a longer file may end inside a field."""
    at, fields = 0, 0
    while at < len(head):
        tag, at = _varint(head, at)
        if tag is None:
            return None if not complete and fields else "a tag is cut short"
        number, wire = tag >> 3, tag & 7
        if number == 0 or wire not in (0, 1, 2, 5):
            return f"byte {at - 1}: field {number}, wire type {wire}"
        if wire == 0:
            value, at = _varint(head, at)
            if value is None:
                return None if not complete else "a number is cut short"
        elif wire == 2:
            length, at = _varint(head, at)
            if length is None or (complete and at + length > len(head)):
                return None if not complete and length is not None else "a length overruns"
            at += length
        else:
            at += 8 if wire == 1 else 4
            if at > len(head) and complete:
                return "a fixed-size field overruns"
        fields += 1
    return None if fields else "no field"


def _varint(data: bytes, at: int) -> tuple[int | None, int]:
    value, shift = 0, 0
    while at < len(data) and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, at
