"""A SIGKILL campaign: a run killed again and again at random moments, then finished.

Unlike tests/test_resilience.py's kills, which wait until an attempt is on the bill
(or hit exact points), these land anywhere: while Python imports, while the flags and
the data are checked, while the model is built, in steps, in checkpoint writes. What a
run held must survive all of it:
- every epoch once, in order, in metrics.jsonl and in TensorBoard's epoch series;
- the bill covers every attempt that passed its checks: the banner is printed once
  they have (the run folder exists then, and the ledger with it), so an attempt whose
  banner was read is billed at least from its process start to its kill, less one
  heartbeat, measured here with this process's own clock;
- nothing half-written is left (no `.tmp-*` file or folder anywhere in the run folder).
"""

import json
import os
import random
import subprocess
import threading
import time

import pytest
from conftest import PATIENCE_SECONDS, error_lines, run_cli
from processes import start
from test_resilience import epoch_points, flags

from callbacks.records.metrics_file import read_metrics

KILLS_PER_BACKEND = 10
HEARTBEAT_SLACK_SECONDS = 2.5  # the ledger's heartbeat (2 s) and the clocks' rounding
EPOCHS = 4
AFTER_CHECKS_FIRST = 3


def _watch_stdout(process: subprocess.Popen, seen: dict) -> threading.Thread:
    """Reads `process`'s stdout in a thread; stores when the banner line came and sets
    `seen["event"]` then."""
    def read():
        for line in process.stdout:
            if line.startswith("[") and "backend=" in line and "banner" not in seen:
                seen["banner"] = time.time()
                seen["event"].set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _attempt(args, since: str, delay: float) -> dict:
    """One attempt, SIGKILLed `delay` seconds after it starts (`since="start"`) or after
    its banner (`since="banner"`), unless it ends first."""
    began, seen = time.time(), {"event": threading.Event()}
    process = start(args)
    reader = _watch_stdout(process, seen)
    if since == "banner":
        while not seen["event"].wait(0.05) and process.poll() is None:
            assert time.time() - began < PATIENCE_SECONDS, "no banner"
        delay += (seen.get("banner") or time.time()) - began
    try:
        process.wait(timeout=max(0.0, began + delay - time.time()))
    except subprocess.TimeoutExpired:
        process.kill()
    killed = time.time()
    process.wait()
    reader.join(timeout=10)
    stderr = process.stderr.read()
    return {"pid": process.pid, "began": began, "killed": killed, "code": process.returncode,
            "banner": seen.get("banner"), "stderr": stderr}


def _kill_moment(rng: random.Random, attempts: list[dict]) -> tuple[str, float]:
    """When to kill the next attempt, in turns: a random moment before the checks pass
    (while Python imports, the flags and data are checked), measured from the start;
    or one after, measured from the banner (the model built, steps, checkpoint writes).
    How long the checks take is measured from the attempts that showed the banner (12 s
    until one has). The first AFTER_CHECKS_FIRST kills after the banner land within a
    second of it, while the model is still being built, so that at least that many
    attempts test the bill however fast the machine trains: a window of several seconds
    lets a resumed attempt finish the run, and the campaign then ends early."""
    to_banner = max((a["banner"] - a["began"] for a in attempts if a["banner"]), default=12.0)
    if len(attempts) % 2 == 0:
        return "start", rng.uniform(0.2, to_banner)
    if len(attempts) // 2 < AFTER_CHECKS_FIRST:
        return "banner", rng.uniform(0.0, 1.0)
    return "banner", rng.uniform(0.0, 8.0)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_sigkills_at_random_moments_lose_nothing_and_bill_every_checked_attempt(
        digits_dir, tmp_path, backend):
    logdir = tmp_path / "campaign"
    args = flags(digits_dir, logdir, "--image_size=16", f"--epochs={EPOCHS}",
                 "--steps_per_epoch=20", "--checkpoint_every_steps=3", f"--backend={backend}")
    rng = random.Random(f"campaign-{backend}")
    attempts = []
    while sum(a["code"] == -9 for a in attempts) < KILLS_PER_BACKEND:
        attempt = _attempt(args, *_kill_moment(rng, attempts))
        attempts.append(attempt)
        if attempt["code"] != -9:  # it finished (or failed) before its kill
            assert attempt["code"] == 0, attempt["stderr"][-2000:]
            break
    began = time.time()
    done = run_cli(*args)
    final_wall = time.time() - began
    assert done.returncode == 0, done.stderr[-2000:]
    assert not error_lines(done.stderr)

    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["epochs_completed"] == EPOCHS
    assert [r["epoch"] for r in read_metrics(str(logdir))] == list(range(1, EPOCHS + 1))
    assert epoch_points(logdir / "validation", "accuracy/epoch_top1") == list(
        range(1, EPOCHS + 1))

    # Every attempt past its checks is on the bill, from its start to its kill.
    billed = {a.get("pid"): a["last_seen"] - a["started_at"] for a in summary["attempts"]}
    checked = [a for a in attempts if a["banner"] is not None]
    assert len(checked) >= AFTER_CHECKS_FIRST, "too few kills landed after the checks to say anything"
    for attempt in checked:
        assert attempt["pid"] in billed, (attempt["pid"], sorted(billed))
        assert billed[attempt["pid"]] >= (attempt["killed"] - attempt["began"]
                                          - HEARTBEAT_SLACK_SECONDS), attempt
    # ... and no attempt is billed more than it lived (the final run's own included).
    walls = sum(a["killed"] - a["began"] for a in attempts)
    assert 0 <= summary["billed_seconds"] <= walls + final_wall + 1
    assert summary["cost_usd"] == pytest.approx(
        summary["billed_seconds"] / 3600 * summary["price_per_hour_usd"], rel=1e-3)

    # Nothing half-written is left behind.
    leftovers = [os.path.join(folder, name) for folder, dirs, files in os.walk(logdir)
                 for name in dirs + files if ".tmp-" in name]
    assert not leftovers, leftovers
