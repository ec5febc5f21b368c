"""Protocol buffers' text format, read without the message's schema (a helper).

XLA writes its autotune logs (`--xla_gpu_dump_autotune_logs_to`: an AutotuningLogs
message, xla/autotuning.proto) in text form; the app has no compiled XLA protos to read
them with. The text form names every field, so it parses into plain values without a
schema: a message is {field name: [values]} (every field a list: any may repeat), a
value a str, int, float, bool, enum name (str) or nested message; an `Any`'s expanded
form ([type.googleapis.com/xla.HloInstructionProto] { ... }) is a field named by its
bracketed type. Strings are C-escaped bytes, decoded as UTF-8 (undecodable bytes replaced).
"""

from __future__ import annotations

import codecs
import re

_TOKEN = re.compile(r"""
    \s+|\#[^\n]*                                  # space, comments
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<bracket>\[[A-Za-z_][\w./-]*\])              # an extension's or an Any's type name
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFuUlL]*)
  | (?P<word>-?[A-Za-z_][\w.]*)
  | (?P<punct>[:{}<>\[\],;])
""", re.X)


class TextProtoError(ValueError):
    """Text that is not protocol buffers' text format (one line)."""


def _tokens(text: str) -> list:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise TextProtoError(f"unexpected {text[at:at + 20]!r} at character {at}")
        at = match.end()
        kind = match.lastgroup
        if kind is not None:
            tokens.append((kind, match.group(kind)))
    return tokens


def parse(text: str | bytes) -> dict:
    """The message `text` holds, as {field: [values]}.

    Raises:
        TextProtoError: naming what could not be read and where.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    tokens = _tokens(data.decode("latin-1"))  # a byte a character: escapes are bytes
    message, at = _message(tokens, 0, closing=None)
    return message


def _message(tokens: list, at: int, closing: str | None) -> tuple[dict, int]:
    fields: dict = {}
    while at < len(tokens):
        kind, value = tokens[at]
        if kind == "punct" and value == closing:
            return fields, at + 1
        if kind == "punct" and value in ",;":
            at += 1
            continue
        if kind not in ("word", "bracket"):
            raise TextProtoError(f"expected a field name, found {value[:20]!r}")
        name, at = value, at + 1
        if at < len(tokens) and tokens[at] == ("punct", ":"):
            at += 1
        values, at = _value(tokens, at)
        fields.setdefault(name, []).extend(values)
    if closing is not None:
        raise TextProtoError(f"a message is not closed ({closing!r} missing)")
    return fields, at


def _value(tokens: list, at: int) -> tuple[list, int]:
    if at >= len(tokens):
        raise TextProtoError("a field has no value")
    kind, value = tokens[at]
    if kind == "punct" and value in "{<":
        message, at = _message(tokens, at + 1, "}" if value == "{" else ">")
        return [message], at
    if kind == "punct" and value == "[":  # a list of values: name: [1, 2]
        values, at = [], at + 1
        while at < len(tokens) and tokens[at] != ("punct", "]"):
            if tokens[at] == ("punct", ","):
                at += 1
                continue
            one, at = _value(tokens, at)
            values.extend(one)
        return values, at + 1
    if kind == "string":
        parts = []
        while at < len(tokens) and tokens[at][0] == "string":  # "a" "b" is "ab"
            parts.append(_unescape(tokens[at][1][1:-1]))
            at += 1
        return ["".join(parts)], at
    if kind == "number":
        return [_number(value)], at + 1
    if kind == "bracket":  # a list of one enum name: [FOO]
        return [value[1:-1]], at + 1
    if kind == "word":
        return [{"true": True, "True": True, "t": True, "false": False, "False": False,
                 "f": False}.get(value, value)], at + 1
    raise TextProtoError(f"unexpected {value[:20]!r} where a value belongs")


def _number(text: str):
    text = text.rstrip("fFuUlL") if not text.lower().startswith(("0x", "-0x")) else text
    try:
        return int(text, 0) if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", text) else float(text)
    except ValueError:
        raise TextProtoError(f"{text[:20]!r} is not a number") from None


def _unescape(body: str) -> str:
    raw = codecs.escape_decode(body.encode("latin-1"))[0]
    return raw.decode("utf-8", "replace")


def first(message: dict | None, name: str, default=None):
    """The first value of field `name` (`default` where there is none)."""
    values = (message or {}).get(name) or []
    return values[0] if values else default


def every(message: dict | None, name: str) -> list:
    """Every value of field `name` (a repeated field's, in order)."""
    return list((message or {}).get(name) or [])


def unpacked(any_message: dict | None) -> dict | None:
    """The message an `Any` holds, in its expanded form ([type/Name] { ... })."""
    for name, values in (any_message or {}).items():
        if name.startswith("[") and values and isinstance(values[0], dict):
            return values[0]
    return None
