"""The decision's reader (app/report/decision/inputs.py): run folders are someone
else's files. A folder that cannot be used is one InputError line naming it and the
field; a bad metrics record or attempt is left out; whatever the files hold, the
decision made from what is read has finite hours and dollars or none (Hypothesis)."""

import datetime
import json
import math

import pytest
from decision_folders import row, table_of, write_probe, write_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.report.decision import predict as decision, inputs as decision_inputs

TABLE = table_of(row("fast", "^Fast X$", {"on_demand": 2.0, "spot": 0.5}),
                 row("slow", "^Slow Y$", {"on_demand": 1.0}))


def refusal(folder) -> str:
    with pytest.raises(decision_inputs.InputError) as caught:
        decision_inputs.read_folder(str(folder))
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_a_folder_the_decision_cannot_use_is_one_line(tmp_path):
    assert refusal(tmp_path / "none").endswith("none: holds no summary.json (not a run folder)")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text("{not json")
    assert refusal(bad).startswith(f"{bad}: summary.json: ")
    (bad / "summary.json").write_text("[1, 2]")
    assert refusal(bad) == f"{bad}: summary.json holds a list, not an object"
    (bad / "summary.json").write_text(json.dumps({"mode": "ladder"}))
    assert refusal(bad) == (f"{bad}: summary.json: a ladder is no input to the decision; "
                            "accepted: a training run's folder or a --benchmark=probe's")
    probe = write_probe(tmp_path / "probe", images_per_sec=-3.0)
    assert refusal(probe) == (f"{probe}: summary.json: 'images_per_sec' holds float -3.0; "
                              "accepted: number in [1e-09, 1000000000000.0]")
    probe = write_probe(tmp_path / "probe2", startup_seconds=None)
    assert refusal(probe).endswith("'startup_seconds' is missing (a probe measures it)")
    run = write_run(tmp_path / "run", steps_per_epoch="22")
    assert "'steps_per_epoch' holds str '22'; accepted: integer" in refusal(run)


def test_bad_records_and_attempts_are_left_out(tmp_path):
    attempts = [{"resumed_from": {"epoch": 0, "step": 0}}, {"resumed_from": "x"},
                {"status": "recovered from the checkpoint"},
                {"resumed_from": {"epoch": 2, "step": 5}}]
    folder = tmp_path / "run"
    write_run(folder, attempts=attempts)
    with open(folder / "metrics.jsonl", "a") as f:
        f.write('{"epoch": 9, "val_top1": 7, "billed_hours": 1}\n')  # top-1 past 1
        f.write('{"epoch": "10", "billed_hours": 1}\n{torn\n')
    found = decision_inputs.read_folder(str(folder))
    assert [e["epoch"] for e in found["epochs_logged"]] == [1, 2, 3, 4, 5]
    assert found["attempts"] == [{"index": 0, "epoch": 0, "step": 0},
                                 {"index": 3, "epoch": 2, "step": 5}]
    assert found["billed_devices"] == 1 and found["kind"] == "run"


def test_a_probe_on_a_busy_machine_says_so(tmp_path):
    """Its machine_snapshots: a CPU load average over its cores, other processes on a GPU
    (under machine_state in a probe written before the name)."""
    busy = {"before": {"cpu_cores": 2, "load_average_1m": 8.6},
            "after": {"cpu_cores": 2, "load_average_1m": 10.81,
                      "gpus": [{"index": 0, "other_processes": 2}, {"index": 1}]}}
    said = ("the CPU's load average was 8.6-10.81 on 2 cores; 2 other process(es) on a GPU")
    found = decision_inputs.read_folder(write_probe(tmp_path / "busy", machine_snapshots=busy))
    assert found["busy"] == said
    assert decision_inputs.read_folder(write_probe(tmp_path / "older", machine_state=busy))[
        "busy"] == said
    idle = {"before": {"cpu_cores": 16, "load_average_1m": 1.2}, "after": "x"}
    assert decision_inputs.read_folder(write_probe(tmp_path / "idle", machine_snapshots=idle))[
        "busy"] is None


def test_a_cpu_run_bills_its_processes_not_its_logical_devices(tmp_path):
    probe = write_probe(tmp_path / "probe", accelerator="cpu", num_replicas=4)
    assert decision_inputs.read_folder(probe)["billed_devices"] == 1


NUMBERS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**13),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                    st.sampled_from([1e308, -1e308, 0, 0.0, 1e-300]))
FIELDS = ("images_per_sec", "startup_seconds", "steps_per_epoch", "global_batch_size",
          "image_size", "num_replicas", "num_processes")


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.fixed_dictionaries({name: NUMBERS for name in FIELDS}),
       st.lists(st.fixed_dictionaries({"epoch": NUMBERS, "val_top1": NUMBERS,
                                       "billed_hours": NUMBERS}), max_size=6),
       st.lists(st.one_of(st.none(), st.text(max_size=3), st.fixed_dictionaries(
           {"resumed_from": st.one_of(st.none(), st.fixed_dictionaries(
               {"epoch": NUMBERS, "step": NUMBERS}))})), max_size=4),
       st.sampled_from(["run", "probe"]), st.binary(max_size=40))
def test_hostile_folders_give_figures_in_range_or_one_line(tmp_path_factory, fields, records,
                                                            attempts, kind, junk):
    folder = tmp_path_factory.mktemp("hostile")
    good = tmp_path_factory.mktemp("good")
    write_run(good / "run")
    summary = json.loads((good / "run" / "summary.json").read_text())
    summary.update(fields, attempts=attempts, device_kind="Fast X",
                   **({"mode": "probe"} if kind == "probe" else {}))
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "metrics.jsonl").write_bytes(
        "\n".join(json.dumps(r) for r in records).encode() + b"\n" + junk)
    try:
        found = decision_inputs.read_folder(str(folder))
    except decision_inputs.InputError as error:
        assert "\n" not in str(error)
        return
    result = decision.predict([found, decision_inputs.read_folder(str(good / "run"))], 0.9,
                              TABLE, interruptions_per_hour=3.0,
                              today=datetime.date(2026, 12, 6))
    for option in result["options"]:
        for name in ("hours", "dollars"):
            assert option[name] is None or (math.isfinite(option[name]) and option[name] >= 0)
    for machine in result["machines"]:
        assert machine.get("hours") is None or math.isfinite(machine["hours"])
    assert result["cheapest"].startswith("cheapest: ") and "\n" not in result["cheapest"]
