"""Reading back what a run folder holds, trusting none of it (a helper, not a callback).

Everything the app reads back (billing.json, metrics.jsonl, summary.json,
config.json, a checkpoint's state.json, run folders handed to the report) may have
been cut short by a kill, edited by hand, or written by someone else. The readers
of those formats parse through here, so that every one of them meets the same rules:

- bytes that are not UTF-8, text that is not JSON, or JSON nested deeper than
  MAX_DEPTH is a `RecordError` (one line), never a traceback (Python's own parser
  recurses: 100,000 nested brackets end in RecursionError);
- a number that is not finite (`NaN`, `Infinity`, `1e400`) is a `RecordError`;
- `field(...)` checks one value's type and range and names it in its message.

A reader then decides what a `RecordError` means for its file: kept aside with one
warning, rebuilt from the folder's other records, or a one-line refusal.
"""

from __future__ import annotations

import json
import math
import os

MAX_DEPTH = 64  # deeper than anything the app writes (summary.json is ~4 levels)
MAX_BYTES = 64 << 20  # a record file larger than this is not one the app wrote


class RecordError(ValueError):
    """A record that cannot be trusted; the message is one line naming why."""


def _depth(text: str) -> int:
    """The deepest nesting of [ and { in JSON `text` (strings skipped), in one pass."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RecordError(f"the number {text[:20]} is not finite")
    return value


def _no_constant(name: str):
    raise RecordError(f"{name} is not a number JSON allows")


def loads(data: bytes | str):
    """The JSON value of `data`, checked as the module docstring says.

    Raises:
        RecordError: not UTF-8, not JSON, too deep, or a number that is not finite.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise RecordError(f"not UTF-8 text (byte {error.start})") from None
    if _depth(data) > MAX_DEPTH:
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data, parse_float=_finite, parse_constant=_no_constant)
    except RecordError:
        raise
    except (ValueError, RecursionError) as error:
        raise RecordError(f"not JSON ({str(error).splitlines()[0][:80]})") from None


class FileRefused(RecordError):
    """A file the door will not read: `why` is "a folder", "not a regular file" or
    "too large" (`size`: its bytes)."""

    def __init__(self, why: str, size: int | None = None):
        super().__init__(why if size is None else f"{why} ({size:,} bytes)")
        self.why, self.size = why, size


def read_regular(path: str, max_bytes: int, head: int | None = None) -> tuple[bytes, int]:
    """(its bytes, its size): a regular file's first `head` bytes, or all of them where
    `head` is None, at most `max_bytes`: the one door of every file a user names (a
    flagfile, a price catalog, the rates table, an autotune file) and every record read
    back. Opened without blocking and checked on its handle, so a FIFO is refused, never
    waited on, and a file swapped after a check is still the file checked.

    Raises:
        FileRefused: a folder, not a regular file, or over `max_bytes`.
        OSError: it cannot be read (missing included: callers say so in their words).
    """
    with open(path, "rb", opener=_open_regular) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise FileRefused("too large", size)
        data = f.read(max_bytes + 1 if head is None else min(head, max_bytes))
    if len(data) > max_bytes:  # it grew while read
        raise FileRefused("too large", len(data))
    return data, size


def read_bytes(path: str, max_bytes: int = MAX_BYTES) -> bytes:
    """A regular file's bytes, at most `max_bytes` (`read_regular`).

    Raises:
        RecordError: not a regular file (a FIFO would block), or too large.
        OSError: it cannot be read (missing included: callers test for that).
    """
    try:
        return read_regular(path, max_bytes)[0]
    except FileRefused as refused:
        raise RecordError(f"larger than {max_bytes:,} bytes" if refused.why == "too large"
                          else "not a regular file") from None


def _open_regular(path: str, flags: int) -> int:
    handle = os.open(path, flags | os.O_NONBLOCK)  # a FIFO opens without blocking
    try:
        import stat

        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused("a folder" if stat.S_ISDIR(mode) else "not a regular file")
        os.set_blocking(handle, True)
    except BaseException:
        os.close(handle)
        raise
    return handle


def read_json(path: str, max_bytes: int = MAX_BYTES):
    """`loads` of the file at `path`.

    Raises:
        RecordError: see `loads` and `read_bytes`.
        OSError: it cannot be read.
    """
    return loads(read_bytes(path, max_bytes))


_KINDS = {"number": (int, float), "integer": (int,), "text": (str,), "object": (dict,),
          "list": (list,), "bool": (bool,)}


def field(record, name: str, kind: str, *, low=None, high=None, required=True,
          default=None):
    """`record[name]`, checked to be of `kind` (see _KINDS) and within [low, high].

    Booleans are not numbers here (JSON's true is not 1). A missing or null field
    returns `default` when not `required`.

    Raises:
        RecordError: naming the field, what it held and what is accepted.
    """
    if not isinstance(record, dict):
        raise RecordError(f"expected an object holding {name!r}, found "
                          f"{type(record).__name__}")
    value = record.get(name)
    if value is None:
        if required:
            raise RecordError(f"{name!r} is missing")
        return default
    kinds = _KINDS[kind]
    if (not isinstance(value, kinds)) or (kind != "bool" and isinstance(value, bool)):
        raise RecordError(f"{name!r} holds {_show(value)}; accepted: {kind}")
    if isinstance(value, float) and not math.isfinite(value):  # a record not read by loads
        raise RecordError(f"{name!r} holds {value}; accepted: a finite {kind}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise RecordError(f"{name!r} holds {_show(value)}; accepted: {kind} in "
                          f"[{low}, {high}]")
    return value


def _show(value) -> str:
    text = json.dumps(value)[:40] if not isinstance(value, str) else repr(value[:40])
    return f"{type(value).__name__} {text}"
