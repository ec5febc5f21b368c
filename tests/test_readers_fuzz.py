"""Property-based tests (Hypothesis) of every reader of the run folder's own records:
untrusted.loads / read_json, the billing ledger, metrics.jsonl and a checkpoint's
state.json are fed arbitrary bytes and arbitrary well-formed but hostile
JSON (huge, negative and float-extreme numbers, NaN and Infinity tokens, wrong
types, deep nesting, text that is not UTF-8). Each outcome is a value the app can use,
a file kept aside with one warning line, or a one-line RecordError: never a
traceback, never an infinite or negative bill. Real files in real folders; each test
is bounded to ~200 examples so the file runs in seconds."""

import json
import math
import os
import tempfile
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.run.ledger import LEDGER_FILE, attempts_before
from callbacks.figures.bill import attempts_seconds
from callbacks.records import untrusted
from callbacks.records.checkpoint_files import (
    REQUIRED_STATE,
    STATE_FILE,
    WEIGHTS_FILE,
    latest_checkpoint,
    read_state,
)
from callbacks.records.metrics_file import METRICS_FILE, read_metrics, truncate_metrics
from callbacks.records.untrusted import RecordError

# capsys is function-scoped: each example empties it (readouterr) before the reader runs.
BOUNDED = settings(max_examples=200, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


class Raw(str):
    """A JSON token written as is: what a strict writer never writes."""


NOW = time.time()
RAW_NUMBERS = st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-Infinity",
                               "1e308", "-1e308", "1e-400", "-0",
                               "123456789012345678901234567890123456789"]).map(Raw)
NUMBERS = st.one_of(
    RAW_NUMBERS, st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-2**80, max_value=2**80),
    st.floats(min_value=-1e12, max_value=NOW + 1e9),  # around now, and 31,000 years ago
    st.sampled_from([NOW - 3600, NOW - 60, NOW, NOW + 60, NOW + 86400, 0, -1, 1577836799]))
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))
JSON = st.recursive(LEAVES, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=20)
DEEP = st.integers(min_value=60, max_value=3000).map(lambda n: Raw("[" * n + "]" * n))
HOSTILE = st.one_of(JSON, DEEP)


def text_of(value) -> str:
    """JSON text of `value`, Raw tokens written as they are."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return {math.inf: "Infinity", -math.inf: "-Infinity"}.get(value, "NaN")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {text_of(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(text_of(v) for v in value) + "]"
    return json.dumps(value)


def encoded(value, mangle) -> bytes:
    """`value`'s JSON bytes, maybe cut short or given a byte that is not UTF-8."""
    data = text_of(value).encode()
    cut, bad = mangle
    if cut is not None:
        data = data[:cut]
    if bad is not None:
        data = data[:bad] + b"\xff" + data[bad:]
    return data


MANGLE = st.tuples(st.none() | st.integers(0, 400), st.none() | st.integers(0, 400))
FILES = st.one_of(st.binary(max_size=600), st.tuples(HOSTILE, MANGLE).map(
    lambda pair: encoded(*pair)))


def assert_finite_json(value, depth=0):
    assert depth <= untrusted.MAX_DEPTH
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for item in value.values():
            assert_finite_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            assert_finite_json(item, depth + 1)


def warnings(capsys) -> list[str]:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert all(line.startswith("warning: ") for line in lines), err
    return lines


# ----------------------------------------------------------------- untrusted.py
@BOUNDED
@given(FILES)
def test_loads_gives_a_finite_shallow_value_or_one_line(data):
    try:
        value = untrusted.loads(data)
    except RecordError as error:
        assert str(error) and "\n" not in str(error)
        return
    assert_finite_json(value)
    json.dumps(value, allow_nan=False)  # what it gave is strict JSON


@BOUNDED
@given(FILES)
def test_read_json_of_a_real_file_gives_the_same_as_loads(data):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "record.json")
        with open(path, "wb") as f:
            f.write(data)
        outcomes = []
        for read, arg in ((untrusted.read_json, path), (untrusted.loads, data)):
            try:
                outcomes.append(("value", read(arg)))
            except RecordError as error:
                outcomes.append(("refused", str(error)))
        assert outcomes[0] == outcomes[1]


# ------------------------------------------------------------------- the ledger
ATTEMPT = st.fixed_dictionaries(
    {"started_at": NUMBERS, "last_seen": NUMBERS},
    optional={"pid": st.one_of(st.integers(-5, 2**40), JSON), "status": JSON,
              "resumed_from": HOSTILE})
LEDGERS = st.one_of(
    FILES, st.tuples(st.fixed_dictionaries({"attempts": st.lists(ATTEMPT, max_size=5)}),
                     MANGLE).map(lambda pair: encoded(*pair)))


@BOUNDED
@given(LEDGERS, st.one_of(NUMBERS.filter(lambda n: not isinstance(n, Raw)),
                          st.floats(0, 1e6)))
def test_the_ledger_bills_a_finite_non_negative_time_or_keeps_the_file_aside(
        capsys, data, checkpoint_billed):
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, LEDGER_FILE), "wb") as f:
            f.write(data)
        capsys.readouterr()
        attempts = attempts_before(folder, checkpoint_billed)
        billed = attempts_seconds(attempts)
        assert math.isfinite(billed) and billed >= 0
        for attempt in attempts:
            assert 0 <= attempt["last_seen"] - attempt["started_at"] < math.inf
        json.dumps(attempts, allow_nan=False)  # what summary.json will carry
        shown = warnings(capsys)
        names = os.listdir(folder)
        if LEDGER_FILE in names:  # read as intact: nothing said, nothing moved
            assert shown == [] and names == [LEDGER_FILE]
        else:  # kept aside, as it was, with one line
            (aside,) = names
            assert aside.startswith(LEDGER_FILE + ".damaged-")
            with open(os.path.join(folder, aside), "rb") as f:
                assert f.read() == data
            (line,) = shown
            assert "is damaged" in line and aside in line


# ------------------------------------------------------------------ metrics.jsonl
LINES = st.lists(st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.tuples(st.one_of(HOSTILE, st.fixed_dictionaries(
        {"epoch": st.one_of(st.integers(-3, 6), NUMBERS, JSON)},
        optional={"time": NUMBERS, "loss": NUMBERS, "val_top1": JSON})), MANGLE).map(
        lambda pair: encoded(*pair).replace(b"\n", b""))), max_size=8)


@BOUNDED
@given(LINES, st.booleans(), st.integers(0, 4))
def test_metrics_lines_read_as_good_records_and_a_rewind_keeps_only_good_ones(
        capsys, lines, torn_tail, last_epoch):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, METRICS_FILE)
        with open(path, "wb") as f:
            f.write(b"\n".join(lines) + (b"" if torn_tail else b"\n"))
        for record in read_metrics(folder):
            assert isinstance(record["epoch"], int) and record["epoch"] >= 1
            assert_finite_json(record)
        capsys.readouterr()
        truncate_metrics(folder, last_epoch)
        shown = warnings(capsys)
        assert len(shown) <= 2  # damaged lines kept aside; epochs missing (no events here)
        kept = read_metrics(folder) if os.path.exists(path) else []
        assert [r["epoch"] for r in kept] == sorted({r["epoch"] for r in kept})
        assert all(r["epoch"] <= last_epoch for r in kept)
        if os.path.exists(path):
            with open(path, "rb") as f:
                assert all(untrusted.loads(line) for line in f.read().splitlines())


# ----------------------------------------------------------- a checkpoint's state
STATES = st.one_of(FILES, st.tuples(st.fixed_dictionaries(
    {key: st.one_of(st.integers(-2, 2**60), NUMBERS, JSON) for key in REQUIRED_STATE},
    optional={"billed_seconds": NUMBERS, "top1_history": HOSTILE, "run_figures": HOSTILE,
              "input_state": HOSTILE, "data": HOSTILE, "weights_crc32": NUMBERS}),
    MANGLE).map(lambda pair: encoded(*pair)))


@BOUNDED
@given(STATES)
def test_a_checkpoint_state_reads_typed_or_is_one_line_refusal(data):
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = os.path.join(folder, "checkpoints", "ckpt-0000000012")
        os.makedirs(checkpoint)
        with open(os.path.join(checkpoint, STATE_FILE), "wb") as f:
            f.write(data)
        with open(os.path.join(checkpoint, WEIGHTS_FILE), "wb") as f:
            f.write(b"weights")
        try:
            state = read_state(checkpoint)
        except RecordError as error:
            assert str(error) and "\n" not in str(error)
            assert latest_checkpoint(folder) is None  # unloadable: passed over
            return
        for key in REQUIRED_STATE:
            assert isinstance(state[key], int) and not isinstance(state[key], bool)
            assert state[key] >= 0
        assert state["global_step"] == 12
        billed = float(state.get("billed_seconds") or 0.0)  # as app/run/resume.py reads it
        assert math.isfinite(billed) and billed >= 0
        assert latest_checkpoint(folder) == (checkpoint, state)


def test_a_fifo_in_place_of_a_record_is_kept_aside_with_one_line_not_waited_on(
        tmp_path, capsys):
    """A FIFO named billing.json or metrics.jsonl would block a plain open() forever."""
    for name in (LEDGER_FILE, METRICS_FILE):
        os.mkfifo(tmp_path / name)
    assert attempts_before(str(tmp_path), 12.5) == [
        {"started_at": 0.0, "last_seen": 12.5, "status": "recovered from the checkpoint"}]
    truncate_metrics(str(tmp_path), 0)
    ledger, metrics = warnings(capsys)
    assert f"{tmp_path}/{LEDGER_FILE} is damaged (not a regular file); kept as" in ledger
    assert f"{tmp_path}/{METRICS_FILE} cannot be read (not a regular file); kept as" in metrics
    assert sorted(n.split(".damaged-")[0] for n in os.listdir(tmp_path)) == [
        LEDGER_FILE, METRICS_FILE]


# ------------------------------------------------------ event files, for a rebuild
def framed(body: bytes) -> bytes:
    """`body` as one TFRecord (length, CRCs right): what passes the framing check."""
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(body))
    return (header + struct.pack("<I", masked_crc32c(header)) + body
            + struct.pack("<I", masked_crc32c(body)))


def scalar_event(tag: str, step: int, value: float, wall_time: float) -> bytes:
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    event = event_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.add(tag=tag, tensor=tensor_util.make_tensor_proto(value))
    return event.SerializeToString()


EVENT_BODIES = st.one_of(
    st.binary(max_size=120),
    st.builds(scalar_event, st.sampled_from(["loss/epoch_loss", "cost/epoch_cost_usd",
                                             "other/epoch_x", "other/epoch_time", "x"]),
              st.integers(-2, 4), st.floats(allow_nan=True, allow_infinity=True),
              st.floats(allow_nan=True, allow_infinity=True)))
EVENT_FILES = st.one_of(st.binary(max_size=400),
                        st.lists(EVENT_BODIES, max_size=6).map(
                            lambda bodies: b"".join(map(framed, bodies))))


# 1e300 made float32 overflows in the builder, by design
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@BOUNDED
@given(EVENT_FILES, st.booleans(), st.integers(0, 3))
def test_a_rewind_rebuilds_from_hostile_event_files_without_a_traceback(
        capsys, data, with_metrics, last_epoch):
    from callbacks import metrics_logger

    with tempfile.TemporaryDirectory() as folder:
        os.mkdir(os.path.join(folder, "train"))
        with open(os.path.join(folder, "train", "events.out.tfevents.1.host.1.1"), "wb") as f:
            f.write(data)
        if with_metrics:
            with open(os.path.join(folder, METRICS_FILE), "w") as f:
                f.write('{"epoch": 1, "loss": 0.5}\n')
        capsys.readouterr()
        metrics_logger.rewind(folder, last_epoch, last_epoch * 4)
        assert len(warnings(capsys)) <= 2  # epochs missing; an event file set aside
        kept = read_metrics(folder)
        assert [r["epoch"] for r in kept] == sorted({r["epoch"] for r in kept})
        assert all(1 <= r["epoch"] <= last_epoch for r in kept)
        for record in kept:
            assert_finite_json(record)


# ----------------------------------------------------------------- the trace's record
STEPS = st.lists(st.one_of(st.integers(-3, 10**12), LEAVES), max_size=5)
TRACE_RECORDS = st.one_of(HOSTILE, st.fixed_dictionaries({}, optional={
    "session": st.one_of(st.text(max_size=12), st.sampled_from(["..", ".", "a/b", "/etc", ""]),
                         LEAVES),
    "traced_steps": st.one_of(STEPS, LEAVES), "host_seconds": st.one_of(STEPS, LEAVES),
    "steps_per_call": st.one_of(st.integers(-2, 2**40), LEAVES)}))


@BOUNDED
@given(TRACE_RECORDS)
@example(record={"session": "2026_12_06_08_44_03", "traced_steps": [2, 3],
                 "host_seconds": [0.25, 0.125], "steps_per_call": 1})
@example(record={"session": "../x", "traced_steps": [2], "host_seconds": [0.1],
                 "steps_per_call": 1})
def test_a_checkpoints_record_of_the_trace_is_kept_whole_or_not_at_all(capsys, tmp_path, record):
    """callbacks/profiler.py reads `run_figures.profile` back from a checkpoint (a resumed
    run keeps its traced steps): a hostile one is dropped with one warning, never a
    traceback, and a kept one names a folder inside the run's profile folder, steps and
    finite durations."""
    from callbacks.profiler import Profiler

    try:  # as a checkpoint's state.json is read
        record = untrusted.loads(text_of(record))
    except RecordError:
        return
    capsys.readouterr()
    profiler = Profiler(str(tmp_path), 2, 3, backend="tensorflow", carried=record)
    lines = warnings(capsys)
    if profiler.session is None:
        assert profiler.traced_steps == [] and profiler.state() == {} and len(lines) <= 1
        return
    assert lines == [] and os.path.basename(profiler.session) == profiler.session
    assert os.path.dirname(os.path.join(profiler.profile_folder, profiler.session)) == (
        profiler.profile_folder) and profiler.session not in (".", "..")
    state = profiler.state()
    assert state["traced_steps"] and all(isinstance(s, int) and s >= 1
                                         for s in state["traced_steps"])
    assert state["host_seconds"] and all(0 <= s < 1e6 for s in state["host_seconds"])
    assert state["steps_per_call"] >= 1
