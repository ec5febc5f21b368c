"""Damaged run folders: what a resume meets is reported and kept aside, never silently
dropped, and everything still good is used (issue 15, items 2, 5, 14).

One run is killed right after its fourth checkpoint commits (the end of epoch 2);
each test damages a copy of that folder in one way and resumes it for real."""

import json
import os
import shutil
import struct

import pytest
from conftest import error_lines
from processes import killed_at, run

from app.run.ledger import read_ledger
from callbacks.records import events
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
    assert f"{copy}/billing.json is damaged; kept as" in shown
    assert f"{copy}/metrics.jsonl: line(s) 1 cannot be read" in shown
    kept = {n.split(".damaged-")[0]: n for n in os.listdir(copy) if ".damaged-" in n}
    assert (copy / kept["billing.json"]).read_bytes() == b"\x00\x13garbage"
    assert (copy / kept["metrics.jsonl"]).read_text().startswith("{not json")
    # Every good line stays, as it was; the bill never goes down.
    assert (copy / "metrics.jsonl").read_text().splitlines()[0] == lines[1]
    assert [r["epoch"] for r in read_metrics(str(copy))] == [2, 3]
    summary = json.loads((copy / "summary.json").read_text())
    assert summary["billed_seconds"] >= checkpoint["billed_seconds"] + summary["wall_seconds"] - 1
    assert summary["attempts"][0]["status"] == "recovered from the checkpoint"


def test_a_torn_ledger_gives_back_every_attempt_it_still_holds(tmp_path):
    attempts = [{"started_at": 10.0, "last_seen": 20.0, "resumed_from": {"epoch": 0}},
                {"started_at": 30.0, "last_seen": 45.0, "resumed_from": {"epoch": 1}}]
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
