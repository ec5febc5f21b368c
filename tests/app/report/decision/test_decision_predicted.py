"""Machines never probed, in the decision (app/report/decision/predicted.py), as
`app/report.py RUNS --target=X` shows them: a CPU run of the job with a breakdown
predicts the catalog's other devices, after the measured ones; one that cannot hold the job is left out with
why; a probe of a device replaces its prediction and checks it; the probe that would
settle the two cheapest is named; a run without a breakdown, or a breakdown of another
model, is refused in one line.

The job: 64 images a step, 4 epochs to top-1 0.9 (decision_folders.write_run), on a CPU
(its row $0.20 an hour); its breakdown: convolutions 20 ms at 0.05 TFLOP/s (1e9 FLOPs a
step), elementwise work 10 ms at 5 GB/s (5e7 bytes a step). The table: on an H100
convolutions at 40% of its 989 TFLOP/s, elementwise work at 70% of its 3,350 GB/s, a
CPU's bytes x 0.5 on an accelerator. A V100 (16 GB) has no row: it borrows the H100's.
"""

import pytest
from decision_folders import COLUMNS, row, write_probe, write_run

from app.report.decision import page as decision_page, device_rates

ERRORS = {"cpu_unseen": (-0.2, 0.1), "source": "benchmarks/results/x-predict-check.json"}
SOURCE = "benchmarks/results/2026-12-06-h100-models-call5.json"
BREAKDOWN = {"parts": {"convolutions": {"ms": 20.0, "tflops_per_sec": 0.05},
                       "elementwise and other": {"ms": 10.0, "gb_per_sec": 5.0},
                       "idle": {"ms": 3.0}}}
H100_STEP = 1e9 / (0.4 * 989e12) + 5e7 * 0.5 / (0.7 * 3350e9)  # seconds, by hand


def files(tmp_path, h100_price=2.0, convolutions=0.4):
    rows = [row("cpu-row", "^cpu$", {"on_demand": 0.2}),
            row("h100-row", r"\bH100", {"on_demand": h100_price}),
            row("v100-row", "V100", {"on_demand": 1.0})]
    for values, device, peak in zip(rows, ("CPU host", "H100 80GB SXM", "V100 16GB"),
                                    ("", "989", "125")):
        values.update(device=device, peak_bf16_tflops_per_device=peak)
    prices = tmp_path / "prices.csv"
    prices.write_text(",".join(COLUMNS) + "\n" + "".join(
        ",".join(r[c] for c in COLUMNS) + "\n" for r in rows))
    rates = tmp_path / "rates.csv"
    rates.write_text(device_rates.to_csv([
        device_rates.Rate("H100 80GB SXM", "NVIDIA H100 80GB HBM3", "convolutions", "other",
                          "peak", convolutions, SOURCE),
        device_rates.Rate("H100 80GB SXM", "NVIDIA H100 80GB HBM3", "elementwise and other",
                          "other", "bandwidth", 0.7, SOURCE),
        device_rates.Rate("cpu", "cpu", "elementwise and other", "other", "cpu_bytes", 0.5,
                          SOURCE)]))
    return str(prices), str(rates)


def cpu_run(tmp_path, name="run", parameters=10**6, breakdown=BREAKDOWN, **fields):
    return write_run(tmp_path / name, device_kind="cpu", accelerator="cpu", backend="jax",
                     parameters=parameters, kept_bytes_per_image=1000,
                     per_replica_batch_size=64, profile={"breakdown": breakdown}, **fields)


def decide(tmp_path, folders, **kwargs):
    prices, rates = files(tmp_path, **kwargs)
    result, warnings = decision_page.decide(folders, 0.9, prices, rates_path=rates,
                                            errors=ERRORS)
    assert not warnings
    return result, decision_page.lines(result)


def test_a_cpu_run_predicts_the_catalogs_other_devices_by_hand(tmp_path):
    result, lines = decide(tmp_path, [cpu_run(tmp_path)])
    h100 = next(m for m in result["machines"] if m["kind"] == "predicted"
                and m["device_kind"] == "H100 80GB SXM")
    assert h100["label"] == "1 x H100 80GB SXM (predicted from run (cpu))"
    assert h100["images_per_sec"] == pytest.approx(64 / H100_STEP)
    # V100: no row of its own, the nearest class's (the H100's) shares on its own peak
    v100 = next(m for m in result["machines"] if m["device_kind"] == "V100 16GB")
    v100_step = 1e9 / (0.4 * 125e12) + 5e7 * 0.5 / (0.7 * 900e9)
    assert v100["images_per_sec"] == pytest.approx(64 / v100_step)
    assert "borrowed from H100 80GB SXM" in v100["from"]["rate"]
    # its hours: the run's start-up (borrowed), its epochs and overhead, the predicted rate
    assert h100["startup_seconds"] == pytest.approx(10.0) and h100["epochs"] == 4
    assert h100["hours"] == pytest.approx((10 + 4 * 640 / h100["images_per_sec"] * 1.25) / 3600)
    predicted = [o for o in result["options"] if o["predicted"]]
    assert {o["row"] for o in predicted} == {"h100-row", "v100-row"}
    assert lines[-1].startswith("settle: no machine never probed beats the verdict's $0.001111 "
                                "within the model's error; the nearest, ")
    assert lines[-2] == ("predicted: 2 device(s) never probed, from run (cpu)'s work by "
                         "kind, each start-up borrowed from it (a start-up is not predicted); "
                         "the model's measured error -20% to +10% of images/sec from a CPU "
                         "run of a family no device of the table measured "
                         "(benchmarks/results/x-predict-check.json)")


def test_the_table_opens_with_the_verdict_and_a_cheaper_prediction_follows(tmp_path):
    """The H100 at $0.01 an hour: predicted cheaper than the CPU's $0.001111 (its 10 s
    borrowed start-up and a second of training), yet no verdict: it follows every
    measured option in the table, as printed, and the settle line names its probe."""
    result, lines = decide(tmp_path, [cpu_run(tmp_path)], h100_price=0.01)
    options = result["options"]
    cheaper = [o for o in options if o["predicted"] and o["dollars"] < options[0]["dollars"]]
    assert cheaper and not options[0]["predicted"]
    assert [o["predicted"] for o in options] == sorted(o["predicted"] for o in options)
    assert result["cheapest"].startswith(f"cheapest: {options[0]['machine_label']} ")
    printed = decision_page.table(result).splitlines()
    assert "run run" in printed[1] and "(predicted from" not in printed[1]
    assert lines[-1].startswith("settle: 1 x H100 80GB SXM (predicted from run (cpu)) as "
                                "h100-row (")
    assert "beats even at its worst the verdict's $0.001111" in lines[-1]


def test_a_device_that_cannot_hold_the_job_is_left_out_with_why(tmp_path):
    """2e9 weights: 3 float32 copies are 24e9 bytes, over the V100's 16 GB."""
    result, lines = decide(tmp_path, [cpu_run(tmp_path, parameters=2 * 10**9)])
    assert {o["row"] for o in result["options"] if o["predicted"]} == {"h100-row"}
    assert ("left out: V100 16GB: does not fit: its step keeps at least 22.4 GiB (64 images "
            "a device), the device holds 16 GiB") in lines


def test_a_probe_of_a_device_replaces_its_prediction_and_checks_it(tmp_path):
    probe = write_probe(tmp_path / "probe", device_kind="NVIDIA H100 80GB HBM3", rate=1e6,
                        startup=3.0)
    result, lines = decide(tmp_path, [cpu_run(tmp_path), probe])
    labels = {o["machine_label"] for o in result["options"] if o["row"] == "h100-row"}
    assert labels == {"1 x NVIDIA H100 80GB HBM3 (jax, probe probe)"}
    error = 64 / H100_STEP / 1e6 - 1
    assert (f"check: probe (NVIDIA H100 80GB HBM3) measured 1,000,000.0 images/sec; predicted "
            f"from run (cpu) {64 / H100_STEP:,.1f} ({error:+.1%})") in lines


def test_the_probe_that_would_settle_the_two_cheapest(tmp_path):
    """Convolutions at 1e-6 of the H100's peak: 1e9 / 989e6 = 1.011 s a step of 64, so
    4 epochs of 640 images take 40.4 s and their evaluation 10.1 s more; with the 10 s
    start-up, 60.6 s: $0.001178 at $0.07 an hour, above the CPU's $0.001111 (20 s at
    $0.20). Off by the error's +10%, training and evaluation take 50.6 / 1.1 s: 56.0 s in
    all, $0.001088, below the CPU's (off by -20%, 73.2 s: $0.001423): a probe of the H100
    would settle it. At $0.08 an hour the least is $0.001244: it cannot beat the verdict
    (the measured cheapest), and the line says so. The verdict stays the measured one."""
    result, lines = decide(tmp_path, [cpu_run(tmp_path)], h100_price=0.07, convolutions=1e-6)
    assert lines[-1] == ("settle: 1 x H100 80GB SXM (predicted from run (cpu)) as h100-row "
                         "($0.001088-$0.001423 within the model's measured error, its start-up "
                         "borrowed) could beat the verdict's $0.001111 (1 x cpu (jax, run run)): "
                         "probe a H100 80GB SXM (`--benchmark=probe`) before renting it for "
                         "the job")
    assert result["cheapest"].startswith("cheapest: 1 x cpu (jax, run run) as cpu-row")
    (tmp_path / "b").mkdir()
    _, lines = decide(tmp_path / "b", [cpu_run(tmp_path / "b")], h100_price=0.08,
                      convolutions=1e-6)
    assert lines[-1].startswith("settle: no machine never probed beats the verdict's "
                                "$0.001111 within the model's error; the nearest, 1 x H100 "
                                "80GB SXM (predicted from run (cpu)) as h100-row ($0.001244-")


def test_a_run_without_a_breakdown_is_refused_in_one_line(tmp_path):
    run = write_run(tmp_path / "run", device_kind="cpu", accelerator="cpu", backend="jax")
    result, lines = decide(tmp_path, [run])
    assert not any(o["predicted"] for o in result["options"])
    assert lines[-1] == (
        "no prediction for machines never probed: no folder given has a step breakdown (no "
        "traced steps): rerun the job with --profile_steps=START,STOP (a few steps after the "
        "first, e.g. --profile_steps=10,12) and --backend=jax, or probe it "
        "(--benchmark=probe traces its steps)")


def test_a_breakdown_of_another_model_or_of_no_work_is_refused_in_one_line(tmp_path):
    job = write_run(tmp_path / "job", device_kind="cpu", accelerator="cpu", backend="jax")
    other = write_probe(tmp_path / "vit", device_kind="cpu", accelerator="cpu",
                        model="vit_b16", breakdown=BREAKDOWN)
    _, lines = decide(tmp_path, [job, other])
    assert lines[-1].startswith("no prediction for machines never probed: vit traced vit_b16 "
                                "on digits at 8 px, the job is small_resnet on digits at 8 px: "
                                "rerun the job with --profile_steps=")
    tensorflow = {"parts": {"convolutions": {"ms": 20.0, "no_rate": "TensorFlow's own ops"}}}
    _, lines = decide(tmp_path, [cpu_run(tmp_path, "tf", breakdown=tensorflow)])
    assert lines[-1] == (
        "no prediction for machines never probed: tf: its breakdown gives no kind's work (a "
        "TensorFlow run's executor ops carry no shapes): profile the job with --backend=jax")


def test_the_apps_own_measured_error_is_found_beside_it():
    """Where the app runs from its repository, the decision quotes the newest committed
    predict-check result (a module moved one folder deeper read none, and the decision
    said "its error is not measured")."""
    from app.report.decision import predicted

    error = predicted.measured_error()
    assert {"accelerator", "cpu", "cpu_unseen"} <= set(error), error
    assert error["source"].startswith("benchmarks/results/") and error["source"].endswith(
        "-predict-check.json")
