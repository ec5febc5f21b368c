"""callbacks/records/untrusted.py, the one validating reader of what a run folder
holds: each of its rules met by a real file or text (records read back as untrusted).
Property-based tests of it and its callers: tests/test_readers_fuzz.py."""

import os
import threading

import pytest

from callbacks.records import untrusted
from callbacks.records.untrusted import RecordError, field, loads, read_bytes, read_json


def one_line(error) -> str:
    message = str(error.value)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize("opening", ["[", "{\"a\":"])
def test_a_depth_bomb_of_100000_brackets_is_one_line_not_a_recursion_error(opening):
    text = opening * 100_000 + "1" + ("]" if opening == "[" else "}") * 100_000
    with pytest.raises(RecordError) as refused:
        loads(text)
    assert one_line(refused) == f"nested deeper than {untrusted.MAX_DEPTH} levels"


def test_nesting_up_to_the_bound_reads_and_brackets_inside_strings_do_not_count():
    deepest = "[" * untrusted.MAX_DEPTH + "]" * untrusted.MAX_DEPTH
    assert loads(deepest) is not None
    assert loads('{"a": "' + "[{" * 1000 + '\\""}') == {"a": "[{" * 1000 + '"'}


@pytest.mark.parametrize("text", ["1e400", "-1e400", '{"last_seen": 1e400}', "[1, 2e999]"])
def test_a_number_beyond_a_float_is_refused_not_read_as_infinity(text):
    with pytest.raises(RecordError) as refused:
        loads(text)
    assert "is not finite" in one_line(refused)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_tokens_are_refused(token):
    with pytest.raises(RecordError) as refused:
        loads('{"loss": %s}' % token)
    assert f"{token} is not a number JSON allows" == one_line(refused)


@pytest.mark.parametrize("data, why", [(b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
                                       (b'{"a": 1', "not JSON"), (b"", "not JSON"),
                                       (b"{} {}", "not JSON")])
def test_bytes_that_are_not_utf8_json_are_one_line(data, why):
    with pytest.raises(RecordError) as refused:
        loads(data)
    assert one_line(refused).startswith(why)


def test_good_json_reads_as_itself():
    assert loads(b'{"epoch": 3, "loss": 0.25, "tags": ["a"], "ok": true, "x": null}') == {
        "epoch": 3, "loss": 0.25, "tags": ["a"], "ok": True, "x": None}
    assert loads("1e308") == 1e308 and loads("-0.0") == 0.0


def test_a_fifo_is_refused_at_once_instead_of_blocking(tmp_path):
    fifo = tmp_path / "billing.json"
    os.mkfifo(fifo)
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_refusal(read_json, str(fifo))),
                              daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert outcome == ["not a regular file"]


def _refusal(read, *args):
    try:
        read(*args)
    except RecordError as error:
        return str(error)
    return None


def test_a_folder_is_not_a_regular_file_and_a_missing_file_is_an_oserror(tmp_path):
    assert _refusal(read_bytes, str(tmp_path)) == "not a regular file"
    with pytest.raises(FileNotFoundError):
        read_bytes(str(tmp_path / "absent.json"))


def test_an_oversize_file_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "summary.json"
    with open(path, "wb") as f:
        f.truncate(untrusted.MAX_BYTES + 1)  # sparse: 64 MiB of zeros on no disk
    assert _refusal(read_json, str(path)) == f"larger than {untrusted.MAX_BYTES:,} bytes"
    path.write_bytes(b"[" + b"0," * 600 + b"0]")
    assert _refusal(read_bytes, str(path), 1000) == "larger than 1,000 bytes"
    assert len(read_json(str(path), 2000)) == 601


def test_a_boolean_is_not_a_number_nor_an_integer():
    for kind in ("number", "integer"):
        with pytest.raises(RecordError) as refused:
            field({"epoch": True}, "epoch", kind)
        assert one_line(refused) == f"'epoch' holds bool true; accepted: {kind}"
    assert field({"ok": False}, "ok", "bool") is False


def test_field_checks_type_range_and_presence():
    assert field({"epoch": 3}, "epoch", "integer", low=1, high=10) == 3
    assert field({"loss": 2}, "loss", "number") == 2  # an integer is a number
    with pytest.raises(RecordError, match=r"'epoch' holds float 3.0; accepted: integer"):
        field({"epoch": 3.0}, "epoch", "integer")
    with pytest.raises(RecordError, match=r"'epoch' holds int -1; accepted: integer in \[0, "):
        field({"epoch": -1}, "epoch", "integer", low=0)
    with pytest.raises(RecordError, match=r"'name' holds str '<img src=x"):
        field({"name": "<img src=x onerror=alert(1)>" * 10}, "name", "number")
    with pytest.raises(RecordError, match="'epoch' is missing"):
        field({}, "epoch", "integer")
    assert field({"epoch": None}, "epoch", "integer", required=False, default=7) == 7
    with pytest.raises(RecordError, match="expected an object holding 'epoch', found list"):
        field([1], "epoch", "integer")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_field_refuses_a_number_that_is_not_finite_even_without_a_range(value):
    """A record built in memory (or read by another parser) can hold NaN, which every
    range comparison lets through."""
    with pytest.raises(untrusted.RecordError, match="accepted: a finite number"):
        untrusted.field({"x": value}, "x", "number")
    with pytest.raises(untrusted.RecordError):
        untrusted.field({"x": value}, "x", "number", low=0, high=1)
