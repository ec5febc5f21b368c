"""An HLO module's text, in either of its two forms, read into one: computation ->
its instructions, each a dict of its fields (a scalar field as the list of its values,
text; a message field as the list of its messages, dicts of the same form).

- HloProto text (xprof's graph_viewer `pbtxt`, what a trace holds): read as it is.
- XLA's dump format (`HloModule` text, what `--xla_dump_to` writes and `as_text()`
  prints: the saved GPU modules of tests/fixtures/) is converted to the same fields.

In the dump format a computation is `[ENTRY] %name (params) -> shape {` ... `}`; each
instruction one line, `[ROOT] %name = SHAPE opcode(OPERANDS), key=value, ...`. Each
becomes the dict the HloProto text gives (every field a list of values, text or
messages): name, opcode, id (its name: names are unique in a module), shape,
operand_ids, called_computation_ids, window, convolution_dimension_numbers (from
`dim_labels`), dot_dimension_numbers, feature_group_count, batch_group_count,
custom_call_target, backend_config (its JSON text) and metadata's op_name.
Computations are keyed by name. Newer XLA prints an operand that is one element of a
tuple as `%name#i` (`%name#i#j` nested) instead of a get-tuple-element; the id is kept
so, and hlo_cost.py resolves it to the element's shape. TensorFlow prints each operand
with its shape (`f32[2,3]{1,0} %x`): the name is the last word. Text that does not
parse is skipped line by line (an instruction's unreadable attribute is left out),
never raised.
"""

from __future__ import annotations

import re

# Messages of an instruction the costs never read: dropped while parsing HloProto text
# (a large module's text is mostly these).
_SKIPPED = {"layout", "frontend_attributes", "statistics_viz", "sparsity_config",
            "precision_config", "original_value"}

_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?([^\s(]+)\s*(\(.*\)\s*->.*)?\{\s*$")
_NAME = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_ARRAY = re.compile(r"^\s*([a-zA-Z][a-zA-Z0-9]*)\[([^\]]*)\]")
_COMMENT = re.compile(r"/\*.*?\*/")
# A shape nested deeper than this is not a model's (and would recurse without end).
MAX_TUPLE_DEPTH = 16
# Opcodes whose parentheses hold a literal or a number, not operands.
_NO_OPERANDS = {"constant", "parameter", "iota"}
# Attributes naming the computations an instruction calls.
_CALLS = ("calls", "to_apply", "condition", "body", "branch_computations",
          "called_computations", "true_computation", "false_computation")


def _closing(text: str, start: int) -> int:
    """The index just past the bracket that closes text[start] ('(', '{' or '['),
    quoted strings skipped; len(text) where it is never closed."""
    depth, quoted, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if quoted:
            if char == '"' and not escaped:
                quoted = False
            escaped = char == "\\" and not escaped
            continue
        if char == '"':
            quoted = True
        elif char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def _split(text: str) -> list[str]:
    """Items separated by top-level commas (not inside brackets or quotes)."""
    items, start, index = [], 0, 0
    while index < len(text):
        char = text[index]
        if char in "({[\"":
            index = _closing(text, index) if char != '"' else _end_quote(text, index)
            continue
        if char == ",":
            items.append(text[start:index])
            start = index + 1
        index += 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _end_quote(text: str, start: int) -> int:
    index, escaped = start + 1, False
    while index < len(text):
        if text[index] == '"' and not escaped:
            return index + 1
        escaped = text[index] == "\\" and not escaped
        index += 1
    return len(text)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def shape(text: str, depth: int = 0) -> dict | None:
    """A shape's message: {"element_type": ["BF16"], "dimensions": [...]} or
    {"tuple_shapes": [...]}; None where the text is no shape."""
    text = _COMMENT.sub("", text).strip()
    if text.startswith("("):
        if depth >= MAX_TUPLE_DEPTH:
            return None
        inner = text[1:_closing(text, 0) - 1]
        parts = [shape(part, depth + 1) for part in _split(inner)]
        return None if None in parts else {"tuple_shapes": parts}
    found = _ARRAY.match(text)
    if not found:
        return None
    dims = [d.strip().lstrip("<=") for d in found.group(2).split(",") if d.strip()]
    if not all(d.isdigit() for d in dims):
        return None
    return {"element_type": [found.group(1).upper()], "dimensions": dims}


def _window(text: str) -> dict:
    """`size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=2x2 rhs_dilate=2x2 rhs_reversal=1x1`."""
    fields = dict(item.split("=", 1) for item in text.strip("{}").split() if "=" in item)
    sizes = fields.get("size", "").split("x") if fields.get("size") else []
    per_axis = {key: (fields[key].split("x") if key in fields else None)
                for key in ("stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")}
    dimensions = []
    for axis, size in enumerate(sizes):
        def at(key, default):
            values = per_axis[key]
            return values[axis] if values and axis < len(values) else default
        low, _, high = at("pad", "0_0").partition("_")
        dimensions.append({"size": [size], "stride": [at("stride", "1")],
                           "padding_low": [low], "padding_high": [high or "0"],
                           "base_dilation": [at("lhs_dilate", "1")],
                           "window_dilation": [at("rhs_dilate", "1")],
                           "window_reversal": ["true" if at("rhs_reversal", "0") == "1"
                                               else "false"]})
    return {"dimensions": dimensions}


def _dim_labels(text: str) -> dict | None:
    """`b01f_01io->b01f` as convolution_dimension_numbers (spatial axes by their digit)."""
    found = re.fullmatch(r"(\w+)_(\w+)->(\w+)", text.strip())
    if not found:
        return None
    lhs, rhs, out = found.groups()

    def spatial(labels):
        return [str(labels.index(d)) for d in sorted(c for c in labels if c.isdigit())]

    try:
        return {"input_batch_dimension": [str(lhs.index("b"))],
                "input_feature_dimension": [str(lhs.index("f"))],
                "input_spatial_dimensions": spatial(lhs),
                "kernel_input_feature_dimension": [str(rhs.index("i"))],
                "kernel_output_feature_dimension": [str(rhs.index("o"))],
                "kernel_spatial_dimensions": spatial(rhs),
                "output_batch_dimension": [str(out.index("b"))],
                "output_feature_dimension": [str(out.index("f"))],
                "output_spatial_dimensions": spatial(out)}
    except ValueError:  # a label missing
        return None


def _numbers(text: str) -> list[str]:
    return [n.strip() for n in text.strip("{}").split(",") if n.strip().isdigit()]


def _attributes(instruction: dict, text: str) -> None:
    dot = {}
    for item in _split(text):
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "window":
            instruction["window"] = [_window(value)]
        elif key == "dim_labels" and (labels := _dim_labels(value)) is not None:
            instruction["convolution_dimension_numbers"] = [labels]
        elif key in ("feature_group_count", "batch_group_count") and value.strip().isdigit():
            instruction[key] = [value.strip()]
        elif key in ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims",
                     "rhs_batch_dims"):
            dot[key.replace("_dims", "_dimensions")] = _numbers(value)
        elif key in _CALLS:
            instruction.setdefault("called_computation_ids", []).extend(
                name.strip().lstrip("%") for name in value.strip("{}").split(",")
                if name.strip())
        elif key == "custom_call_target":
            instruction["custom_call_target"] = [_unquote(value)]
        elif key == "backend_config":
            instruction["backend_config"] = [_unquote(value) if value.startswith('"')
                                             else value]
        elif key == "metadata":
            found = re.search(r'op_name="((?:[^"\\]|\\.)*)"', value)
            if found:
                instruction["metadata"] = [{"op_name": [_unquote(f'"{found.group(1)}"')]}]
    if dot:
        instruction["dot_dimension_numbers"] = [dot]


def instruction(line: str) -> dict | None:
    """One instruction line as HloProto text's dict, None where it is not one."""
    named = _NAME.match(line)
    if not named:
        return None
    name, rest = named.group(2), line[named.end():]
    if rest.startswith("("):
        end = _closing(rest, 0)
    else:
        end = len(rest.split(" ", 1)[0])
    found_shape, rest = shape(rest[:end]), rest[end:].lstrip()
    opcode = re.match(r"([\w\-]+)\(", rest)
    if found_shape is None or not opcode:
        return None
    close = _closing(rest, opcode.end() - 1)
    operands = rest[opcode.end():close - 1]
    item = {"name": [name], "id": [name], "opcode": [opcode.group(1)],
            "shape": [found_shape], "operand_ids": []}
    if opcode.group(1) not in _NO_OPERANDS:
        item["operand_ids"] = [_COMMENT.sub("", o).split()[-1].lstrip("%")
                               for o in _split(operands) if _COMMENT.sub("", o).split()]
    _attributes(item, rest[close:].lstrip(", "))
    return item


def is_dump(text: str) -> bool:
    """Whether `text` is XLA's dump format (else HloProto text)."""
    return text.lstrip().startswith(("HloModule", "ENTRY", "%"))


def computations(text: str) -> dict[str, list[dict]]:
    """Computation -> its instructions, from either form (see the module docstring):
    keyed by id in HloProto text, by name in the dump format."""
    return dump_computations(text) if is_dump(text) else proto_computations(text)


def first(fields: dict, key: str, default=""):
    """The first value of a field, where it is of the default's kind (text for a text
    or number default, a message for a dict or None default); else `default`."""
    values = fields.get(key) if isinstance(fields, dict) else None
    value = values[0] if values else default
    return value if isinstance(value, dict) == (default is None or isinstance(default, dict)) \
        else default


def index(text: str) -> int:
    """A size or a dimension's index: a whole number >= 0 (ValueError otherwise)."""
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} < 0")
    return value


def dims(shape: dict | None) -> list[int] | None:
    """An array shape's dimensions; None for a tuple or no shape."""
    if not shape or "tuple_shapes" in shape:
        return None
    return [index(d) for d in shape.get("dimensions", [])]


def calls(instruction: dict) -> list[str]:
    """The ids of the computations an instruction calls (a fusion's, a call's)."""
    return [c for c in instruction.get("called_computation_ids", []) if isinstance(c, str)]


def _proto_unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return bytes(value[1:-1], "utf-8").decode("unicode_escape").encode(
            "latin-1").decode("utf-8", "replace")
    return value


def proto_computations(text: str) -> dict[str, list[dict]]:
    """Computation id -> its instructions, from HloProto text."""
    found: dict[str, list[dict]] = {}
    stack: list[str] = []
    nodes: list[dict | None] = []  # the instruction's open messages (None: skipped)
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("{"):
            name = line[:-1].strip()
            stack.append(name)
            if len(stack) == 2 and name == "computations":
                # protobuf's text form leaves out a field at its default: an id of 0
                current = {"id": "0", "instructions": []}
            elif len(stack) == 3 and name == "instructions" and current is not None:
                nodes = [{}]
            elif nodes:
                child = None if nodes[-1] is None or name in _SKIPPED else {}
                if child is not None:
                    nodes[-1].setdefault(name, []).append(child)
                nodes.append(child)
            continue
        if line == "}":
            depth = len(stack)
            name = stack.pop() if stack else ""
            if depth == 3 and name == "instructions" and nodes and current is not None:
                nodes[0].setdefault("id", ["0"])  # (as a computation's)
                current["instructions"].append(nodes[0])
                nodes = []
            elif nodes and depth > 3:
                nodes.pop()
            elif depth == 2 and name == "computations" and current is not None:
                found[current["id"]] = current["instructions"]
                current = None
            continue
        key, _, value = line.partition(": ")
        if nodes:
            if nodes[-1] is not None:
                nodes[-1].setdefault(key, []).append(_proto_unquote(value))
        elif current is not None and len(stack) == 2 and key == "id":
            current["id"] = value
    return found


def dump_computations(text: str) -> dict[str, list[dict]]:
    """Computation name -> its instructions, from XLA's dump format."""
    found: dict[str, list[dict]] = {}
    current = None
    for line in text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header and not line.startswith("HloModule"):
                current = found.setdefault(header.group(2), [])
            continue
        if line.strip() == "}":
            current = None
            continue
        item = instruction(line)
        if item is not None:
            current.append(item)
    return found
