"""The time-and-cost decision (app/report.py --target), end to end on the CPU as a user
would: a full run, two probes, the decision.

Two settings of one model stand for two machines: the TensorFlow backend (the full
run's, probed again) and JAX, each billed as a row of a catalog of the test's own
(--price_catalog: every option priced). `app/report.py FULL PROBE_A PROBE_B
--target=T --price_catalog=...` then predicts the hours and dollars to T for each: the
hours predicted from probe A (the full run's machine and settings) are the run's terms
at the probe's rate, and every option's dollars are its hours times the
catalog's price, by hand from the CSV. Probe A's own figures are checked here too,
against the test's clock as its lines arrive (app/modes/probe.py), and its rerun.
"""

import csv
import datetime
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import PATIENCE_SECONDS, ROOT, run_cli

from app.modes import probe

COLUMNS = ("machine,accelerator,device,devices_per_machine,device_kind_pattern,provider,region,"
           "on_demand_usd_per_hour,spot_usd_per_hour,one_year_usd_per_hour,"
           "three_year_usd_per_hour,host_usd_per_hour,peak_bf16_tflops_per_device,"
           "memory_gib_per_device,pricing_page,source,date,note")
# Two CPU "machines", every option priced; no device pattern: each probe is priced as
# the row it was billed as (--machine), not as the other.
ROWS = {"cpu-tf": (0.40, 0.12, 0.28, 0.18), "cpu-jax": (0.60, 0.20, 0.42, 0.27)}
JOB = ("--epochs=6", "--seed=5", "--verbose=0")
TF_PROBE = ("--machine=cpu-tf", "--benchmark=probe", "--steps_per_epoch=22")


def app_command(*args):
    return [sys.executable, os.path.join(ROOT, "app", "main.py"), *args]


# The probes' timed seconds: 15 (three windows of 5 s, at least 22 steps each), not the
# default 30 (CI's time).
PROBE_SECONDS = {"BENCH_PROBE_SECONDS": "15"}


def stamped(*args) -> tuple[list, float]:
    """`python app/main.py ARGS`, each line of its stdout with the test's clock (seconds
    since the test started it) as it arrived; (lines, wall seconds)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **PROBE_SECONDS}
    env.pop("KERAS_BACKEND", None)
    began = time.time()
    process = subprocess.Popen(app_command(*args), cwd=ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = [(time.time() - began, line.rstrip("\n")) for line in process.stdout]
    stderr = process.stderr.read()
    assert process.wait(timeout=PATIENCE_SECONDS) == 0, stderr[-3000:]
    return lines, time.time() - began


def report(folder, target, prices, *runs):
    out = folder / "decision"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"),
                           *map(str, runs), f"--target={target}", f"--price_catalog={prices}",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "decision.json").read_text()), done.stdout, out


def probe_error(result, records, target) -> float:
    """The hours predicted from the TensorFlow probe over the full run's measured, less 1."""
    measured = next(r["billed_hours"] for r in records if r["val_top1"] >= target)
    found = next(m for m in result["machines"] if "probe probe-tf" in m["label"])
    return found["hours"] / measured - 1


@pytest.fixture(scope="module")
def decided(digits_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("decide")
    prices = folder / "prices.csv"
    today = datetime.date.today().isoformat()
    prices.write_text(COLUMNS + "\n" + "".join(
        f"{name},CPU as a machine,CPU,1,,test,here,{od},{spot},{one},{three},0,,,"
        f"https://example.com/{name},https://example.com/{name} read {today},{today},\n"
        for name, (od, spot, one, three) in ROWS.items()))
    common = (f"--data_dir={digits_dir}", f"--price_catalog={prices}", *JOB)
    full, tf_probe, jax_probe = (folder / name for name in ("full", "probe-tf", "probe-jax"))
    # The JAX probe as on a host without TensorFlow (the GPU machines): its path needs none.
    done = run_cli(*common, f"--logdir={jax_probe}", "--machine=cpu-jax", "--benchmark=probe",
                   "--steps_per_epoch=22", "--backend=jax",
                   env={"PYTHONPATH": os.path.join(ROOT, "tests", "no_tensorflow"),
                        **PROBE_SECONDS})
    assert done.returncode == 0, done.stderr[-3000:]
    first = None
    for attempt in (1, 2):
        # The full run, then the probe of its machine. The CPU is shared (CI's other
        # worker; on a workstation, anyone's jobs): a load that rose or fell between the
        # two moves the rate and the start-up one of them saw and not the other (here, at
        # a load of 8-11 on 2 cores, start-ups of 33-63 s for the same process). The pair
        # is measured once more then, as a user would; the first error is kept for the
        # message.
        done = run_cli(*common, f"--logdir={full}", "--machine=cpu-tf")
        assert done.returncode == 0, done.stderr[-3000:]
        args = (*common, f"--logdir={tf_probe}", *TF_PROBE)
        probed = {"lines": stamped(*args), "folder": tf_probe, "args": args}
        records = [json.loads(line) for line in open(full / "metrics.jsonl")]
        # The target: the best top-1 the run reached, so that most of its epochs count.
        target = max(r["val_top1"] for r in records) - 1e-4
        result, stdout, out = report(folder, target, prices, full, tf_probe, jax_probe)
        error = probe_error(result, records, target)
        if abs(error) <= 0.35 or attempt == 2:
            break
        first = error
        full, tf_probe = folder / "full-again", folder / "probe-tf-again"
    return {"result": result, "stdout": stdout, "records": records, "target": target,
            "out": out, "prices": prices, "probe": probed, "first_error": first,
            "full": full}


@pytest.mark.slow
def test_the_hours_predicted_from_a_probe_are_its_rate_on_the_full_runs_terms(decided):
    """The probe's hours are its start-up plus the full run's epochs to the target at the
    probe's rate, stretched by the run's epoch overhead: by hand from the entry's own
    figures. The run predicted from its own rate matches what it measured within 5% (the
    model's terms, free of two processes' noise); the probe, measured apart on a shared
    CPU, within 35% (a gross error: a term left out or counted twice). How close a probe
    comes on a quiet machine is benchmarks/decide_check.py's figure, not a unit test's."""
    result, records, target = decided["result"], decided["records"], decided["target"]
    measured = next(r["billed_hours"] for r in records if r["val_top1"] >= target)
    found = next(m for m in result["machines"] if "probe probe-tf" in m["label"])
    full = next(m for m in result["machines"] if m["kind"] == "run")
    assert (found["epochs"], found["overhead"], found["images_per_epoch"]) == (
        full["epochs"], full["overhead"], full["images_per_epoch"])
    assert found["epochs"] == next(r["epoch"] for r in records if r["val_top1"] >= target)
    by_hand = found["startup_seconds"] + found["epochs"] * found["images_per_epoch"] \
        / found["images_per_sec"] * found["overhead"]
    assert found["hours"] * 3600 == pytest.approx(by_hand, rel=1e-9)
    assert full["measured_hours"] == pytest.approx(measured)
    assert full["hours"] == pytest.approx(measured, rel=0.05), (full["hours"], measured,
                                                                full["from"])
    assert found["hours"] == pytest.approx(measured, rel=0.35), (
        found["hours"], measured, decided["first_error"], found["from"])
    assert f"check: {full['label']} measured" in decided["stdout"]


def test_every_options_dollars_are_its_hours_times_the_price_by_hand(decided):
    with open(decided["prices"], newline="") as f:
        by_hand = {r["machine"]: {o: float(r[f"{o}_usd_per_hour"]) for o in (
            "on_demand", "spot", "one_year", "three_year")} for r in csv.DictReader(f)}
    labels = {"probe probe-tf": "cpu-tf", "run full": "cpu-tf", "probe probe-jax)": "cpu-jax"}
    seen = set()
    for option in decided["result"]["options"]:
        row = next(r for part, r in labels.items() if part in option["machine_label"])
        assert option["row"] == row  # each machine priced as its own row only
        price = by_hand[row][option["option"]]
        assert option["dollars"] == pytest.approx(option["hours"] * price, rel=1e-12)
        seen.add((option["machine_label"], option["option"]))
    assert len(seen) == 3 * 4  # three machines, four options each


def test_the_decision_says_the_cheapest_and_the_fastest_and_draws_the_frontier(decided):
    result, lines = decided["result"], decided["stdout"].splitlines()
    assert lines[0].startswith(f"decision: hours and dollars to top-1 {decided['target']:g}")
    assert sum(line.startswith("cheapest: ") for line in lines) == 1
    assert sum(line.startswith("fastest: ") for line in lines) == 1
    cheapest = result["options"][0]
    assert next(line for line in lines if line.startswith("cheapest: ")).startswith(
        f"cheapest: {cheapest['machine_label']} as {cheapest['row']} ")
    assert any(o["frontier"] for o in result["options"])
    assert (decided["out"] / "decision.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for machine in result["machines"]:  # every figure says what it was predicted from
        assert {"epochs", "images_per_epoch", "rate", "startup", "resume"} <= set(
            machine["from"]), machine


# --- The probe the decision used, as its user saw it (app/modes/probe.py). -----------

def test_the_probe_writes_what_it_measured(decided):
    folder = decided["probe"]["folder"]
    summary = json.loads((folder / "probe.json").read_text())
    assert json.loads((folder / "summary.json").read_text()) == summary
    assert summary["mode"] == "probe" and summary["status"] == "completed"
    assert (summary["model"], summary["dataset"], summary["global_batch_size"],
            summary["precision"], summary["epochs"]) == ("small_resnet", "digits", 64,
                                                          "float32", 6)
    # three windows (the probe's default), each at least --steps_per_epoch's 22 steps
    assert summary["repeats"] == 3 and len(summary["windows"]) == 3
    assert summary["timed_steps"] >= summary["steps_per_epoch"] == 22
    assert summary["images_per_sec_min"] <= summary["images_per_sec"] \
        <= summary["images_per_sec_max"]
    assert summary["compile_cache"] == "none"  # TensorFlow: every process compiles
    assert summary["startup_cold_seconds"] == summary["startup_seconds"]
    assert summary["images_per_sec"] > 0 and summary["step_time_ms"] > 0
    # what the device model checks another device's memory with, as a run's summary has it
    assert summary["parameters"] > 0 and summary["kept_bytes_per_image"] > 0
    assert summary["breakdown"]["step_ms"] > 0 and summary["breakdown"]["parts"]
    assert os.listdir(folder / "plugins" / "profile")  # the trace, for TensorBoard


def test_the_probes_times_agree_with_the_tests_clock(decided):
    """Start-up runs from the process's start to the compiled step: after the first
    line (printed before the model is built), before the process ended; the start-up
    and the measuring fit in the process's wall time; the timed images at the rate
    take no longer than the measuring did."""
    (lines, wall), folder = decided["probe"]["lines"], decided["probe"]["folder"]
    summary = json.loads((folder / "probe.json").read_text())
    first = next(t for t, line in lines if line.startswith("[probe] small_resnet on digits"))
    assert first < summary["startup_seconds"] < wall
    assert summary["startup_seconds"] == pytest.approx(
        summary["before_compile_seconds"] + summary["compile_and_warmup_seconds"]
        - summary["warmup_steps_seconds"] + summary["evaluation_compile_seconds"], abs=0.03)
    # the warm-up's steps at the calibrated rate: training a run does in its first epoch
    assert summary["warmup_steps_seconds"] < summary["compile_and_warmup_seconds"]
    assert summary["startup_seconds"] + summary["measuring_seconds"] < wall
    timed = sum(summary["timed_steps"] * summary["global_batch_size"] / w["images_per_sec"]
                for w in summary["windows"])
    assert timed < summary["measuring_seconds"] and summary["billed_seconds"] < wall


def test_the_probes_lines_and_price_by_hand(decided):
    (lines, _), folder = decided["probe"]["lines"], decided["probe"]["folder"]
    lines = [line for _, line in lines]
    summary = json.loads((folder / "probe.json").read_text())
    rate = summary["images_per_sec"]
    assert (f"probe: {rate:,.1f} images/sec ({rate:,.1f} per device x 1) over 3 timed windows "
            f"of {summary['timed_steps']} steps (median of 3, min-max "
            f"{summary['images_per_sec_min']:,.1f}-{summary['images_per_sec_max']:,.1f}") \
        in "\n".join(lines)
    compiling = summary["compile_and_warmup_seconds"] - summary["warmup_steps_seconds"]
    assert (f"start-up: {summary['startup_seconds']:,.1f} s from the process's start to the "
            f"compiled steps ({compiling:,.1f} s of it compiling the training step, "
            f"{summary['evaluation_compile_seconds']:,.1f} s the evaluation step; its "
            f"{summary['warmup_steps']} warm-up steps ({summary['warmup_steps_seconds']:,.1f} "
            "s) count as training)") in lines
    assert summary["price_per_hour_usd_by_pricing"] == dict(zip(
        ("on_demand", "spot", "one_year", "three_year"), ROWS["cpu-tf"]))
    assert summary["cost_usd"] == pytest.approx(summary["billed_seconds"] / 3600 * 0.40,
                                                abs=1e-6)
    assert (f"price: cpu-tf: $0.4/h on demand, $0.12/h on spot, $0.28/h with 1-year "
            f"commitment, $0.18/h with 3-year commitment; this probe "
            f"${summary['cost_usd']:,.4f}") in lines
    state = summary["machine_snapshots"]
    assert state["before"]["cpu_cores"] == len(os.sched_getaffinity(0))
    assert 0 <= state["after"]["load_average_1m"] < 1e4 and "gpus" not in state["after"]
    assert "machine_state" not in summary  # a run's name for its NVML samples
    assert any(line.startswith("breakdown: step ") for line in lines)
    assert any(line.startswith("decide: ") and "--target=TOP1" in line for line in lines)


def test_the_same_probe_again_says_it_is_complete(decided):
    folder = decided["probe"]["folder"]
    summary = json.loads((folder / "probe.json").read_text())
    done = subprocess.run(app_command(*decided["probe"]["args"]), cwd=ROOT,
                          capture_output=True, text=True, timeout=PATIENCE_SECONDS)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"probe is complete: {folder} holds its probe.json")
    assert lines[-len(probe.closing_lines(summary).splitlines()):] == (
        probe.closing_lines(summary).splitlines())
    assert json.loads((folder / "probe.json").read_text()) == summary  # kept as it is


def test_the_probes_are_hparams_sessions_beside_the_runs(decided):
    """TensorBoard's HParams dashboard, served over the decision's folders, lists each
    probe beside the full run, its rate and the probe's cost filled, named a probe."""
    from tensorboard_server import hparams_table, serving

    folder = decided["out"].parent
    with serving([sys.executable, "-m", "tensorboard.main", "--logdir", str(folder)]) as base:
        _, sessions = hparams_table(base)
    assert {"full", "probe-tf", "probe-jax"} <= set(sessions)
    for name in ("probe-tf", "probe-jax"):
        summary = json.loads((folder / name / "summary.json").read_text())
        values = {v["name"]["tag"]: v["value"] for v in sessions[name]["metricValues"]}
        assert values["run/images_per_sec"] == pytest.approx(summary["images_per_sec"], rel=1e-6)
        assert values["run/cost_usd"] == pytest.approx(summary["cost_usd"], rel=1e-6)
        assert sessions[name]["group"].startswith("probe · ")
        assert sessions[name]["hparams"]["status"] == "completed"
