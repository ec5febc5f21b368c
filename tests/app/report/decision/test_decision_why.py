"""The term that decides (app/report/decision/why.py): a case built for each term, the
words a user reads, and the parts adding up to the two options' difference by hand.

Every case trains the job once (a TensorFlow run: 10 steps of 64 images an epoch,
epochs of 1.25x their images at its steady rate, top-1 0.9 at epoch 4) and probes two
machines of one price; each case moves one term of their hours.
"""

import datetime
import json

import pytest

from app.report.decision import predict as decision, inputs as decision_inputs, why as decision_why

from decision_folders import row, table_of, write_probe, write_run  # noqa: E402

TODAY = datetime.date(2026, 12, 6)
SAME_PRICE = table_of(row("a-row", "^A$", {"on_demand": 2.0, "spot": 1.0}),
                      row("b-row", "^B$", {"on_demand": 2.0, "spot": 1.0}))


def decide(folders, table=SAME_PRICE, **kwargs):
    found = [decision_inputs.read_folder(f) for f in folders]
    return decision.predict(found, 0.9, table, today=TODAY, **kwargs)


def probes(tmp_path, a, b):
    return [write_run(tmp_path / "run", device_kind="Other"),
            write_probe(tmp_path / "a", device_kind="A", **a),
            write_probe(tmp_path / "b", device_kind="B", **b)]


def test_the_start_up_decides_a_slower_machine(tmp_path):
    """A at 600 images/sec starting in 2 s; B at 640 starting in 10 s. A: 2 s +
    4 x 640/600 s training (4.27) + a quarter of it; B: 10 + 4 + 1. The fastest's
    cheapest row is its spot one (the same hours, no interruption expected)."""
    result = decide(probes(tmp_path, {"rate": 600.0, "startup": 2.0},
                           {"rate": 640.0, "startup": 10.0}))
    assert result["fastest"] == (
        "fastest: 1 x A (jax, probe a): 0.002037 h, $0.002037 as a-row spot; decided by "
        "start-up 2.0 s against 10.0 s, which outweighs its 0.94x rate (training 4.3 s against "
        "4.0 s over 4 epochs); runner-up 1 x B (jax, probe b) as b-row spot, 0.004167 h")
    assert result["cheapest"].startswith("cheapest: 1 x A (jax, probe a) as a-row spot")
    assert "decided by start-up 2.0 s against 10.0 s" in result["cheapest"]


def test_the_rate_decides_a_machine_that_starts_later(tmp_path):
    result = decide(probes(tmp_path, {"rate": 1280.0, "startup": 6.0},
                           {"rate": 320.0, "startup": 5.0}))
    assert result["fastest"].endswith(
        "decided by its 4.00x rate (training 2.0 s against 8.0 s over 4 epochs), which "
        "outweighs start-up 6.0 s against 5.0 s; runner-up 1 x B (jax, probe b) as b-row "
        "spot, 0.004167 h")


def test_evaluation_and_checkpoints_decide_between_backends(tmp_path):
    """Each backend's own run gives its overhead: TensorFlow's epochs 1.25x their images,
    JAX's 3x (2.5 s and 6 s an epoch at 320 images/sec). Probes of one rate and start-up."""
    folders = [write_run(tmp_path / "tf", device_kind="Other"),
               write_run(tmp_path / "jax", device_kind="Other", backend="jax", epoch_s=6.0),
               write_probe(tmp_path / "a", device_kind="A", backend="tensorflow"),
               write_probe(tmp_path / "b", device_kind="B", backend="jax")]
    result = decide(folders)
    machines = {m["name"]: m for m in result["machines"]}
    assert machines["a"]["overhead"] == pytest.approx(1.25)
    assert machines["b"]["overhead"] == pytest.approx(3.0)
    assert machines["a"]["overhead_whose"] is None and machines["b"]["overhead_whose"] is None
    assert "fastest: 1 x A (tensorflow, probe a)" in result["fastest"]
    assert ("decided by evaluation and checkpoints 1.0 s against 8.0 s over 4 epochs; "
            "runner-up 1 x B (jax, probe b)") in result["fastest"]


def test_spot_interruptions_decide_against_a_spot_only_machine(tmp_path):
    """A on demand only; B on spot only, 0.5 s quicker to start. At 180 interruptions an
    hour, B's 5 s resume costs a quarter of its hours: 10 s / 0.75 = 13.3 s."""
    table = table_of(row("a-row", "^A$", {"on_demand": 2.0}), row("b-row", "^B$", {"spot": 1.0}))
    result = decide(probes(tmp_path, {"startup": 6.0}, {"startup": 5.0}), table=table,
                    interruptions_per_hour=180.0)
    spot = next(o for o in result["options"] if o["row"] == "b-row")
    assert spot["hours"] * 3600 == pytest.approx(10 / 0.75)
    assert spot["terms"]["interruptions"] == pytest.approx(10 / 0.75 - 10)
    assert result["fastest"].endswith(
        "decided by spot interruptions 0 s against 3.3 s, which outweighs start-up 6.0 s "
        "against 5.0 s; runner-up 1 x B (jax, probe b) as b-row spot, 0.003704 h")


def test_the_dollar_parts_add_up_to_the_difference_by_hand(tmp_path):
    """Cheapest at a quarter of the price but half the rate: each term's seconds at the
    runner-up's $4/h, and the price difference ($3/h) over the winner's 20 s."""
    table = table_of(row("a-row", "^A$", {"on_demand": 1.0}), row("b-row", "^B$", {"on_demand": 4.0}))
    result = decide(probes(tmp_path, {"rate": 320.0, "startup": 10.0},
                           {"rate": 640.0, "startup": 6.0}), table=table)
    best, other = (next(o for o in result["options"] if o["row"] == r) for r in ("a-row", "b-row"))
    parts = decision_why.contributions(best, other, "dollars")
    assert parts["startup"] == pytest.approx(-4 / 3600 * 4)
    assert parts["training"] == pytest.approx(-4 / 3600 * 4)
    assert parts["evaluation"] == pytest.approx(-1 / 3600 * 4)
    assert parts["price"] == pytest.approx(20 / 3600 * 3)
    assert sum(parts.values()) == pytest.approx(other["dollars"] - best["dollars"])
    assert "decided by its price per device-hour, $1/h against $4/h (0.25x)" in result["cheapest"]


def test_one_machine_measured_says_so(tmp_path):
    result = decide([write_run(tmp_path / "run", device_kind="A")])
    assert result["cheapest"].endswith("; the only machine measured")


def test_the_runner_up_is_another_machine_not_a_probe_of_the_winners(tmp_path):
    """The run and a probe of its machine (A, TensorFlow, one device) are one choice: the
    runner-up is B (27.3 s to the target), though A's run comes second (20 s, its probe
    11 s); with A alone, A is the only machine measured, however many folders measured it."""
    folders = [write_run(tmp_path / "run", device_kind="A", backend="tensorflow"),
               write_probe(tmp_path / "a", device_kind="A", backend="tensorflow", rate=641.0),
               write_probe(tmp_path / "b", device_kind="B", rate=150.0)]
    result = decide(folders)
    by_hours = sorted(result["options"], key=lambda o: o["hours"])
    assert list(dict.fromkeys(o["machine_label"] for o in by_hours)) == [
        "1 x A (tensorflow, probe a)", "1 x A (tensorflow, run run)", "1 x B (jax, probe b)"]
    assert result["fastest"].startswith("fastest: 1 x A (tensorflow, probe a): ")
    assert "runner-up 1 x B (jax, probe b)" in result["fastest"]
    assert "runner-up 1 x B (jax, probe b)" in result["cheapest"]
    alone = decide(folders[:2])
    assert alone["fastest"].endswith("; the only machine measured")


def test_a_borrowed_overhead_is_named_and_a_warm_cache_said(tmp_path):
    """A JAX probe predicted with the TensorFlow run's overhead says whose it borrowed;
    a JAX run whose programs came from the compile cache says its start-up was warm."""
    warm = write_run(tmp_path / "warm", device_kind="Other", backend="jax", model="other")
    summary = json.loads((tmp_path / "warm" / "summary.json").read_text())
    summary["startup"] = {"programs": [{"program": "train_step", "compiles": 0, "cache_reads": 1}]}
    (tmp_path / "warm" / "summary.json").write_text(json.dumps(summary))
    result = decide(probes(tmp_path, {}, {}) + [warm])
    from app.report.decision import page as decision_page

    text = "\n".join(decision_page.lines(result))
    assert ("caveat: 1 x A (jax, probe a): its epoch overhead (1.25x) is borrowed from run "
            "(tensorflow): no full run on jax was given") in text
    found = decision_inputs.read_folder(warm)
    assert found["compile_cache"] == "warm"
    assert "its start-up came from a warm compile cache" in decision.startup_note(found)


def test_the_epochs_come_from_the_machines_own_backend_and_a_borrowed_one_is_said(tmp_path):
    """One recipe on two backends reached Fashion-MNIST's 0.78 an epoch apart (a
    cross-backend prediction was 61% off): a JAX run at 0.9 in 3 epochs, a TensorFlow
    one in 4; each probe takes its own backend's; with the TensorFlow run alone, the JAX
    probe's 4 epochs are said to be borrowed."""
    tf = write_run(tmp_path / "tf", device_kind="Other")  # 0.91 at epoch 4
    jax = write_run(tmp_path / "jax", device_kind="Other", backend="jax",
                    top1=(0.5, 0.7, 0.92, 0.95, 0.96))
    a = write_probe(tmp_path / "a", device_kind="A", backend="tensorflow")
    b = write_probe(tmp_path / "b", device_kind="B", backend="jax")
    machines = {m["name"]: m for m in decide([tf, jax, a, b])["machines"]}
    assert (machines["a"]["epochs"], machines["b"]["epochs"]) == (4, 3)
    assert machines["b"]["epochs_whose"] == ("the full runs reached it at epochs 3-4: this "
                                             "machine's backend's at 3")
    alone = {m["name"]: m for m in decide([tf, b])["machines"]}
    assert alone["b"]["epochs"] == 4
    from app.report.decision import page as decision_page

    lines = decision_page.caveats(alone["b"])
    b, epoch_hours = alone["b"], alone["b"]["epoch_seconds"] / 3600  # two epochs either way
    assert ("caveat: 1 x B (jax, probe b): its 4 epochs to the target are from tf "
            "(tensorflow): no full run on jax was given, and another backend's numerics can "
            f"reach the target an epoch or two sooner or later; at 2-6 epochs, "
            f"{b['hours'] - 2 * epoch_hours:.4f}-{b['hours'] + 2 * epoch_hours:.4f} h") in lines
    assert b["hours"] * 3600 == pytest.approx(sum(b["terms"].values()))
    assert epoch_hours * 3600 == pytest.approx((b["terms"]["training"]
                                                + b["terms"]["evaluation"]) / 4)
