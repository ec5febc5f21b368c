"""Runs survive SIGKILL, SIGTERM and NaN: real processes, real signals, resumed runs."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from callbacks import events
from callbacks.checkpoint import latest_checkpoint
from callbacks.metrics_file import read_metrics
from conftest import ROOT, error_lines, run_cli

EPOCHS = 5


def flags(digits_dir, logdir, *extra):
    return [f"--data_dir={digits_dir}", f"--logdir={logdir}", "--image_size=8",
            f"--epochs={EPOCHS}", "--steps_per_epoch=12", "--checkpoint_every_steps=3",
            "--global_batch_size=32", "--seed=3", "--verbose=2", *extra]


def start(args):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "app", "main.py"), *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_until_billed(logdir, pid, timeout=60):
    """Waits until process `pid` has recorded its attempt in billing.json."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            attempts = json.loads((logdir / "billing.json").read_text())["attempts"]
            if any(a["pid"] == pid for a in attempts):
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    return False


def epoch_points(logdir, tag):
    return sorted(e.step for path in events.event_files(str(logdir))
                  for e in events.read_events(path) for v in e.summary.value if v.tag == tag)


def test_sigterm_saves_exits_75_within_the_grace_period_and_the_rerun_resumes(
        digits_dir, tmp_path):
    logdir = tmp_path / "term"
    process = start(flags(digits_dir, logdir))
    deadline = time.time() + 120
    while not read_metrics(str(logdir)) and time.time() < deadline:
        time.sleep(0.2)  # wait for the first epoch
    time.sleep(0.3)
    sent = time.time()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert time.time() - sent < 30
    assert process.returncode == 75, stderr[-2000:]
    assert "preempted (SIGTERM) at step" in error_lines(stderr)[0]
    path, state = latest_checkpoint(str(logdir))
    assert state["global_step"] >= 12
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "preempted"

    done = run_cli(*flags(digits_dir, logdir))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resuming from {path}" in done.stdout
    assert [r["epoch"] for r in read_metrics(str(logdir))] == list(range(1, EPOCHS + 1))
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["epochs_completed"] == EPOCHS
    assert [a["status"] for a in summary["attempts"]] == ["preempted", "completed"]
    assert summary["attempts"][1]["resumed_from"]["step"] == state["global_step"]


def test_a_diverging_run_stops_on_nan_with_its_last_good_checkpoint(digits_dir, tmp_path):
    logdir = tmp_path / "nan"
    done = run_cli(*flags(digits_dir, logdir, "--base_learning_rate=1000", "--warmup_epochs=2",
                          "--label_smoothing=0", "--seed=1"))
    assert done.returncode == 76, done.stderr[-2000:]
    message = error_lines(done.stderr)[0]
    assert "training loss became nan at step" in message
    step = int(message.split("at step ")[1].split(";")[0])
    path, state = latest_checkpoint(str(logdir))
    assert state["global_step"] < step
    import h5py

    with h5py.File(os.path.join(path, "model.weights.h5")) as weights:
        arrays = []
        weights.visititems(lambda name, item: arrays.append(item[()])
                           if isinstance(item, h5py.Dataset) else None)
    assert arrays and all(np.isfinite(a).all() for a in arrays if a.dtype.kind == "f")
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "diverged"
    assert [r["epoch"] for r in read_metrics(str(logdir))] == list(
        range(1, summary["epochs_completed"] + 1))


def test_repeated_sigkill_anywhere_loses_nothing(digits_dir, tmp_path):
    """Killed again and again (in steps, in evaluation, in checkpoint writes), the
    run ends like an uninterrupted one: every epoch once, the bill continuous."""
    epochs = 8  # about 14 s of training after a 6 s start: several kills fit in
    longer = ["--image_size=16", f"--epochs={epochs}", "--steps_per_epoch=40",
              "--checkpoint_every_steps=4"]
    reference = run_cli(*flags(digits_dir, tmp_path / "reference", *longer))
    assert reference.returncode == 0, reference.stderr[-2000:]
    best_reference = json.loads((tmp_path / "reference" / "summary.json").read_text())[
        "best_val_top1"]

    logdir = tmp_path / "killed"
    rng = random.Random(11)
    walls, kills, during_save = [], 0, 0
    # The run trains for about 14 s; each attempt is killed 0-3 s after it has put
    # itself on the bill (a process killed before it could write anything cannot
    # bill itself), or in the middle of one of its checkpoint writes, then resumed.
    attempt = 0
    while (kills < 5 or during_save < 2) and attempt < 14:
        attempt += 1
        began = time.time()
        process = start(flags(digits_dir, logdir, *longer))
        saving = False
        wait_until_billed(logdir, process.pid)  # from here on, the attempt is on the bill
        if attempt % 3 == 0:  # kill while this process writes a checkpoint
            staging = f".tmp-{process.pid}"
            deadline = time.time() + 60
            while time.time() < deadline and process.poll() is None and not saving:
                folder = logdir / "checkpoints"
                saving = folder.exists() and any(n.endswith(staging) for n in os.listdir(folder))
                time.sleep(0.001)
        else:  # at a random moment: in a step or in an evaluation
            time.sleep(rng.uniform(0.0, 3.0))
        if process.poll() is not None:
            walls.append(time.time() - began)
            break  # it finished before the kill
        process.kill()
        process.communicate()
        walls.append(time.time() - began)
        kills += 1
        during_save += saving
    assert kills >= 5 and during_save >= 2
    began = time.time()
    done = run_cli(*flags(digits_dir, logdir, *longer))
    walls.append(time.time() - began)
    assert done.returncode == 0, done.stderr[-2000:]

    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["epochs_completed"] == epochs and summary["status"] == "completed"
    assert [r["epoch"] for r in read_metrics(str(logdir))] == list(range(1, epochs + 1))
    assert epoch_points(logdir / "validation", "accuracy/epoch_top1") == list(range(1, epochs + 1))
    # Billing covers every attempt: at most a heartbeat (2 s) lost per kill.
    assert len(summary["attempts"]) == len(walls)
    assert sum(walls) - 2.5 * kills - 2 <= summary["billed_seconds"] <= sum(walls) + 2
    assert summary["cost_usd"] == pytest.approx(
        summary["billed_seconds"] / 3600 * summary["price_per_hour_usd"], rel=1e-3)
    assert abs(summary["best_val_top1"] - best_reference) <= 0.15
