"""Reading a run's kernels and machine state back (callbacks/records/state_records.py):
what the app writes reads back as written; hostile values (Hypothesis: wrong types,
huge, negative and non-finite numbers, long text, files cut short or not UTF-8) are a
one-line RecordError or left out with a note, never a traceback, never believed."""

import json
import math
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callbacks.records import durable, untrusted
from callbacks.records.state_records import (
    SOURCES,
    kernels_block,
    machine_state,
    read_kernels,
)
from test_readers_fuzz import FILES, HOSTILE, JSON, text_of

BOUNDED = settings(max_examples=200, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

KERNEL = {"instruction": "cudnn-conv.50", "op_name": "jit(train_step)/conv_general_dilated",
          "target": "__cudnn$convForward", "shape": "bf16[256,56,56,96]{3,2,1,0}",
          "kind": "library", "config": {"algo_id": "5", "tuning_knobs": {}}}
WRITTEN = {"digest": "a" * 64, "library_calls": 1, "fusions": 0, "source": "autotuned",
           "loaded_from": None, "file": "kernels.json", "kernels": [KERNEL]}
STATE = {"device_kind": "NVIDIA H100 80GB HBM3", "driver": "580.95.05", "cuda_driver": "13.0",
         "software": {"jax": "0.11.2", "cudnn": "9.11.0", "xla_extension_version": 467},
         "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "max_sm_clock_mhz": 1980,
                      "max_memory_clock_mhz": 2619, "power_limit_watts": 700.0, "ecc": "on"}],
         "timed_window": {"samples": 40, "devices": [{
             "samples": 40, "sm_clock_mhz": {"mean": 1410.0, "min": 1410, "max": 1980},
             "power_watts": {"mean": 690.5, "min": 500.0, "max": 700.0},
             "throttle_share": {"sw_power_cap": 0.38}, "other_processes": [4242]}]}}


def test_what_the_app_writes_reads_back_as_written(tmp_path):
    path = tmp_path / "kernels.json"
    durable.write_json_atomic(str(path), WRITTEN)
    read = read_kernels(str(path))
    assert read == {**{k: WRITTEN[k] for k in ("digest", "library_calls", "fusions", "source",
                                               "loaded_from")}, "kernels": [KERNEL]}
    assert read_kernels(str(tmp_path / "absent.json")) is None
    checked, notes = machine_state(json.loads(json.dumps(STATE)))
    assert notes == []
    assert checked["driver"] == "580.95.05" and checked["software"]["cudnn"] == "9.11.0"
    assert checked["software"]["xla_extension_version"] == 467
    assert checked["devices"][0]["max_sm_clock_mhz"] == 1980
    assert checked["window"] == [{"sm_clock_mhz": 1410.0, "power_watts": 690.5,
                                  "throttle_share": {"sw_power_cap": 0.38},
                                  "other_processes": [4242]}]


@pytest.mark.parametrize("change, why", [
    ({"digest": "abc"}, "64 hex digits"),
    ({"source": "guessed"}, "accepted: autotuned"),
    ({"library_calls": -1}, "library_calls"),
    ({"fusions": 1.5}, "fusions"),
    ({"kernels": "all of them"}, "'kernels' holds"),
    ({"kernels": [{**KERNEL, "kind": "magic"}]}, "accepted: library, fusion"),
    ({"kernels": [{**KERNEL, "op_name": "x" * 5000}]}, "5,000 characters"),
])
def test_a_wrong_field_of_kernels_json_is_one_line(tmp_path, change, why):
    path = tmp_path / "kernels.json"
    path.write_text(json.dumps({**WRITTEN, **change}))
    with pytest.raises(untrusted.RecordError, match=why):
        read_kernels(str(path))


@pytest.mark.parametrize("change, note", [
    ({"driver": 580}, "'driver' holds int"),
    ({"devices": [{"max_sm_clock_mhz": -5}]}, "max_sm_clock_mhz"),
    ({"timed_window": {"devices": [{"sm_clock_mhz": {"mean": 1e9}}]}}, "sm_clock_mhz"),
    ({"timed_window": {"devices": [{"throttle_share": {"sw_power_cap": 3}}]}}, "sw_power_cap"),
])
def test_a_wrong_field_of_the_machine_state_is_left_out_and_named(change, note):
    checked, notes = machine_state({**STATE, **change})
    assert len(notes) == 1 and note in notes[0]
    assert checked["device_kind"] == STATE["device_kind"]  # the rest is kept


@BOUNDED
@given(FILES)
def test_any_bytes_as_kernels_json_read_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernels.json")
        with open(path, "wb") as f:
            f.write(data)
        try:
            read = read_kernels(path)
        except untrusted.RecordError as error:
            assert "\n" not in str(error)
            return
        assert read["source"] in SOURCES and len(read["digest"]) == 64


HOSTILE_BLOCK = st.fixed_dictionaries({}, optional={
    "digest": st.one_of(st.just("f" * 64), JSON), "source": st.one_of(st.sampled_from(SOURCES),
                                                                      JSON),
    "library_calls": JSON, "fusions": JSON, "loaded_from": JSON, "not_known": JSON,
    "kernels": st.one_of(st.lists(st.fixed_dictionaries({}, optional={
        k: st.one_of(st.just(v), JSON) for k, v in KERNEL.items()}), max_size=3), JSON)})


@BOUNDED
@given(HOSTILE_BLOCK)
def test_a_hostile_kernels_file_is_read_as_written_or_refused(block):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernels.json")
        with open(path, "w") as f:
            f.write(text_of(block))
        try:
            read = read_kernels(path)
        except untrusted.RecordError:
            return
    assert read["digest"] == block["digest"] and read["source"] in SOURCES
    for name in ("library_calls", "fusions"):
        assert isinstance(read[name], int) and 0 <= read[name] <= 1 << 24
    assert all(entry["kind"] in ("library", "fusion") for entry in read["kernels"])


FIGURE = st.fixed_dictionaries({}, optional={"mean": JSON, "min": JSON, "max": JSON})
HOSTILE_STATE = st.fixed_dictionaries({}, optional={
    "device_kind": JSON, "driver": JSON, "cuda_driver": JSON,
    "software": st.one_of(st.dictionaries(st.sampled_from(["jax", "cudnn", "driver"]), JSON),
                          JSON),
    "devices": st.one_of(st.lists(st.dictionaries(st.sampled_from(
        ["name", "max_sm_clock_mhz", "power_limit_watts", "ecc"]), JSON), max_size=3), JSON),
    "timed_window": st.one_of(JSON, st.fixed_dictionaries({"devices": st.lists(
        st.fixed_dictionaries({}, optional={
            "sm_clock_mhz": st.one_of(FIGURE, JSON), "power_watts": FIGURE,
            "throttle_share": st.one_of(st.dictionaries(st.text(max_size=80), JSON), JSON),
            "other_processes": JSON}), max_size=3)}))})


@BOUNDED
@given(st.one_of(HOSTILE_STATE, HOSTILE))
def test_a_hostile_machine_state_keeps_only_values_of_the_right_kind(record):
    try:  # as summary.json is read: a non-finite number or deep nesting refused first
        value = untrusted.loads(text_of(record))
    except untrusted.RecordError:
        return
    checked, notes = machine_state(value)
    assert all("\n" not in note for note in notes)
    for name in ("device_kind", "driver", "cuda_driver"):
        assert name not in checked or isinstance(checked[name], str)
    for device in checked.get("window", []):
        for name, value in device.items():
            if name == "throttle_share":
                assert all(0 <= share <= 1 for share in value.values())
            elif name == "other_processes":
                assert all(isinstance(p, int) and p > 0 for p in value)
            else:
                assert isinstance(value, (int, float)) and math.isfinite(value)
