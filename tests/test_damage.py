"""Damaged run folders: what a resume meets is reported and kept aside, never silently
dropped, and everything still good is used; the run's own records are read back as
untrusted, and what the folder holds elsewhere is rebuilt.

One run is killed right after its fourth checkpoint commits (the end of epoch 2);
each test damages a copy of that folder in one way and resumes it for real."""

import json
import math
import os
import re
import shutil
import struct
import time

import pytest
from conftest import error_lines, tiny_flags, tmpfs
from processes import killed_at, run

from app.run.ledger import read_ledger
from callbacks.records import durable, events
from callbacks.records.checkpoint_files import file_crc, latest_checkpoint
from callbacks.records.metrics_file import read_metrics


def flags(digits_dir, logdir):
    return [f"--data_dir={digits_dir}", f"--logdir={logdir}", "--image_size=8",
            "--epochs=3", "--steps_per_epoch=6", "--checkpoint_every_steps=3",
            "--validation_steps=1", "--global_batch_size=32", "--seed=4", "--verbose=0"]


@pytest.fixture(scope="module")
def killed_run(digits_dir, tmp_path_factory):
    """A run SIGKILLed right after checkpoint 12 (end of epoch 2) committed."""
    logdir = tmp_path_factory.mktemp("killed") / "run"
    killed_at(flags(digits_dir, logdir), "checkpoint_committed", 4)
    assert sorted(os.listdir(logdir / "checkpoints")) == [  # killed before the pruning
        "ckpt-0000000006", "ckpt-0000000009", "ckpt-0000000012"]
    return logdir


@pytest.fixture
def copy(killed_run, tmp_path):
    shutil.copytree(killed_run, tmp_path / "run")
    return tmp_path / "run"


def warnings_of(stderr):
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_a_corrupt_newest_checkpoint_is_set_aside_and_the_one_before_is_used(
        digits_dir, copy):
    newest = copy / "checkpoints" / "ckpt-0000000012"
    weights = newest / "model.weights.h5"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    done = run(flags(digits_dir, copy))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resuming from {copy}/checkpoints/ckpt-0000000009" in done.stdout
    (warning,) = [w for w in warnings_of(done.stderr) if "cannot be loaded" in w]
    assert f"checkpoint {newest} cannot be loaded" in warning and "CRC" in warning
    aside = [n for n in os.listdir(copy / "checkpoints") if ".unloadable-" in n]
    assert len(aside) == 1  # kept, renamed
    assert os.path.getsize(copy / "checkpoints" / aside[0] / "model.weights.h5") == 1000
    assert [r["epoch"] for r in read_metrics(str(copy))] == [1, 2, 3]


def test_garbage_billing_and_a_bad_metrics_line_are_kept_aside_and_lose_nothing_good(
        digits_dir, copy):
    _, checkpoint = latest_checkpoint(str(copy))
    lines = (copy / "metrics.jsonl").read_text().splitlines()
    (copy / "metrics.jsonl").write_text("{not json\n" + lines[1] + "\n")  # epoch 1 broken
    (copy / "billing.json").write_bytes(b"\x00\x13garbage")
    done = run(flags(digits_dir, copy))
    assert done.returncode == 0, done.stderr[-2000:]
    shown = "\n".join(warnings_of(done.stderr))
    assert f"{copy}/billing.json is damaged (not JSON" in shown and "; kept as" in shown
    assert f"{copy}/metrics.jsonl: line(s) 1 cannot be read" in shown
    assert f"{copy}/metrics.jsonl lacked epoch(s) 1 that the checkpoint covers; epoch(s) 1 " \
           "rebuilt from the TensorBoard event files" in shown
    kept = {n.split(".damaged-")[0]: n for n in os.listdir(copy) if ".damaged-" in n}
    assert (copy / kept["billing.json"]).read_bytes() == b"\x00\x13garbage"
    assert (copy / kept["metrics.jsonl"]).read_text().startswith("{not json")
    # Every good line stays, as it was; the damaged one is rebuilt; the bill never goes down.
    assert (copy / "metrics.jsonl").read_text().splitlines()[1] == lines[1]
    rebuilt = read_metrics(str(copy))
    assert [r["epoch"] for r in rebuilt] == [1, 2, 3]
    assert rebuilt[0] == {k: pytest.approx(v, rel=1e-6) for k, v in json.loads(lines[0]).items()}
    summary = json.loads((copy / "summary.json").read_text())
    assert summary["billed_seconds"] >= checkpoint["billed_seconds"] + summary["wall_seconds"] - 1
    assert summary["attempts"][0]["status"] == "recovered from the checkpoint"


def test_a_torn_ledger_gives_back_every_attempt_it_still_holds(tmp_path):
    now = time.time()  # times before 2020 would be dropped (read as untrusted)
    attempts = [{"started_at": now - 50, "last_seen": now - 40, "resumed_from": {"epoch": 0}},
                {"started_at": now - 30, "last_seen": now - 15, "resumed_from": {"epoch": 1}}]
    text = json.dumps({"attempts": attempts})
    (tmp_path / "billing.json").write_text(text[:text.rindex("{") + 5])  # torn mid-attempt
    recovered, intact = read_ledger(str(tmp_path))
    assert recovered == attempts[:1] and not intact
    assert [n for n in os.listdir(tmp_path) if n.startswith("billing.json.damaged-")]


def test_a_damaged_state_json_and_event_file_are_set_aside_not_tracebacks(digits_dir, copy):
    (copy / "checkpoints" / "ckpt-0000000012" / "state.json").write_text("{}")
    (path,) = events.event_files(str(copy / "train"))  # the training scalars
    data = bytearray(open(path, "rb").read())
    first_length = struct.unpack_from("<Q", data, 0)[0]
    second = 12 + first_length + 4
    struct.pack_into("<Q", data, second, 7)  # a bad record length, mid-file
    open(path, "wb").write(bytes(data))
    done = run(flags(digits_dir, copy))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"resuming from {copy}/checkpoints/ckpt-0000000009" in done.stdout
    shown = "\n".join(warnings_of(done.stderr))
    assert "state.json lacks epoch, step_in_epoch, global_step, images_seen" in shown
    assert f"{path}: bad record length at byte {second}" in shown
    assert os.path.exists(os.path.join(copy, "train", "damaged." + os.path.basename(path).replace(
        "events.out.tfevents.", "events.")))
    _, state = latest_checkpoint(str(copy))
    assert file_crc(os.path.join(copy, "checkpoints", f"ckpt-{state['global_step']:010d}",
                                 "model.weights.h5")) == (state["weights_bytes"],
                                                          state["weights_crc32"])
    assert error_lines(done.stderr) == []


def figures(logdir, run_name, prefix):
    """{tag: {step: value}} of the scalars of logdir/run_name whose tag starts `prefix`."""
    from tensorboard.util import tensor_util

    found = {}
    for path in events.event_files(str(logdir / run_name)):
        for event in events.read_events(path):
            for value in event.summary.value:
                if value.tag.startswith(prefix):
                    found.setdefault(value.tag, {})[event.step] = float(
                        tensor_util.make_ndarray(value.tensor))
    return found


@pytest.mark.slow
def test_an_infinite_or_ancient_attempt_is_dropped_and_deleted_epochs_rebuilt(
        digits_dir, killed_run, copy):
    """Before, billing.json with last_seen = 1e400 printed "$inf" and left five cost tags
    without points, an attempt "started" 31,000 years ago was billed ($54 M), and with
    metrics.jsonl deleted epochs 1-2 were silently missing afterwards."""
    _, checkpoint = latest_checkpoint(str(copy))
    before = read_metrics(str(killed_run))
    assert [r["epoch"] for r in before] == [1, 2]
    (attempt,) = json.loads((copy / "billing.json").read_text())["attempts"]
    ancient = {"started_at": time.time() - 31_000 * 365.25 * 86400,
               "last_seen": time.time() - 60, "pid": 1}
    text = json.dumps({"attempts": [attempt, ancient]})
    text = re.sub(r'"last_seen": [0-9.e+]+', '"last_seen": 1e400', text, count=1)
    (copy / "billing.json").write_text(text)
    os.remove(copy / "metrics.jsonl")
    done = run(flags(digits_dir, copy))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    shown = warnings_of(done.stderr)
    (billing,) = [w for w in shown if "billing.json" in w]
    assert f"{copy}/billing.json is damaged (the number 1e400 is not finite" in billing
    assert "0 attempt(s) recovered" in billing  # the ancient one fails its check too
    (rebuilt,) = [w for w in shown if "metrics.jsonl" in w]
    assert rebuilt == (f"warning: {copy}/metrics.jsonl lacked epoch(s) 1, 2 that the "
                       "checkpoint covers; epoch(s) 1, 2 rebuilt from the TensorBoard event "
                       "files")
    # The bill: finite, what the checkpoint had billed plus this attempt.
    (cost_line,) = [line for line in done.stdout.splitlines() if line.startswith("cost: ")]
    dollars = float(re.match(r"cost: \$([0-9,.]+) ", cost_line).group(1).replace(",", ""))
    assert math.isfinite(dollars) and 0 < dollars < 1, cost_line
    summary = json.loads((copy / "summary.json").read_text())
    assert math.isfinite(summary["billed_seconds"]) and summary["cost_usd"] is not None
    assert summary["attempts"][0] == {"started_at": 0.0, "last_seen": pytest.approx(
        checkpoint["billed_seconds"]), "status": "recovered from the checkpoint"}
    assert len(summary["attempts"]) == 2
    # Every cost tag has its points, all finite (epoch 3 included).
    cost = figures(copy, "train", "cost/")
    assert {"cost/epoch_cost_usd", "cost/epoch_billed_hours"} <= set(cost)
    assert all(math.isfinite(v) for points in cost.values() for v in points.values())
    assert 3 in cost["cost/epoch_cost_usd"]
    # Every epoch once, the rebuilt ones as they were (the events keep float32).
    after = read_metrics(str(copy))
    assert [r["epoch"] for r in after] == [1, 2, 3]
    for old, new in zip(before, after[:2]):
        assert set(new) == set(old)
        assert new == {k: pytest.approx(v, rel=1e-6) for k, v in old.items()}


@pytest.mark.slow
def test_a_hostile_state_json_is_an_unloadable_checkpoint_not_a_traceback(digits_dir, copy):
    """Before, a state.json nested 100,000 deep ended the resume in a RecursionError."""
    newest = copy / "checkpoints" / "ckpt-0000000012"
    state = json.loads((newest / "state.json").read_text())
    text = json.dumps({**state, "run_figures": "HOLE"})
    (newest / "state.json").write_text(text.replace('"HOLE"', "[" * 100_000 + "]" * 100_000))
    done = run(flags(digits_dir, copy))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"resuming from {copy}/checkpoints/ckpt-0000000009" in done.stdout
    (warning,) = [w for w in warnings_of(done.stderr) if "cannot be loaded" in w]
    assert f"checkpoint {newest} cannot be loaded (nested deeper than 64 levels)" in warning
    assert [n for n in os.listdir(copy / "checkpoints") if n.startswith(
        "ckpt-0000000012.unloadable-")]
    assert [r["epoch"] for r in read_metrics(str(copy))] == [1, 2, 3]
    assert error_lines(done.stderr) == []


@pytest.fixture
def small_disk(tmp_path):
    """A real tmpfs of 3 MiB: too small for the first checkpoint of a 1,000-class model."""
    with tmpfs(tmp_path / "disk", "3m") as mount:
        yield mount


@pytest.mark.slow
def test_a_full_disk_before_any_checkpoint_says_none_was_saved(small_disk):
    """Before, it said "the last good checkpoint is kept (None)"."""
    logdir = small_disk / "run"
    done = run(["--dataset=synthetic", "--image_size=32", "--global_batch_size=16",
                "--epochs=1", "--steps_per_epoch=2", "--validation_steps=1", "--seed=1",
                f"--logdir={logdir}", "--verbose=0"])
    assert done.returncode == 74, done.stderr[-2000:]
    (line,) = error_lines(done.stderr)
    assert "cannot write checkpoint" in line and "No space left on device" in line
    assert line.endswith("; no checkpoint was saved before it"), line
    assert "None" not in line and "Traceback" not in done.stderr


def test_a_write_killed_before_its_rename_leaves_a_temporary_that_is_then_removed(
        digits_dir, tmp_path):
    """After 20 SIGKILLs at random moments a `.tmp-*` file was left behind. A kill
    between write_atomic's sync and its rename leaves one; remove_temporaries (called
    once the run holds the folder's lock) removes it, and a checkpoint's staging
    folder, and nothing else."""
    logdir = tmp_path / "run"
    killed_at(tiny_flags(digits_dir, logdir), "atomic_write", 2)
    (temporary,) = [n for n in os.listdir(logdir) if n.startswith(".tmp-")]
    staging = logdir / "checkpoints" / "ckpt-0000000004.tmp-99999"  # a killed save's
    os.makedirs(staging)
    (staging / "model.weights.h5").write_bytes(b"half")
    kept = sorted(os.path.relpath(os.path.join(base, name), logdir)
                  for base, _, names in os.walk(logdir) for name in names
                  if ".tmp-" not in os.path.join(base, name))
    assert kept  # what the killed run had written stays
    removed = durable.remove_temporaries(str(logdir))
    assert sorted(removed) == sorted([str(logdir / temporary), str(staging)])
    assert sorted(os.path.relpath(os.path.join(base, name), logdir)
                  for base, _, names in os.walk(logdir) for name in names) == kept
    assert durable.remove_temporaries(str(logdir)) == []
