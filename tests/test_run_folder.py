"""A run folder belongs to one run: held by one live process, resumed only by the same
run on the same data, never made worse by a rerun, and its loss is an error.
Real processes, real signals, real files."""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

from conftest import PATIENCE_SECONDS, error_lines, tiny_flags
from image_files import write_folder_dataset
from processes import MAIN, billed, env_for, killed_at, run, snapshot, start, until

from callbacks.records.metrics_file import read_metrics


def longer(digits_dir, logdir, *extra):
    """A digits run of about 20 s: long enough to be caught alive."""
    return tiny_flags(digits_dir, logdir, "--epochs=4", "--steps_per_epoch=12",
                      "--checkpoint_every_steps=4", "--seed=2", *extra)


def test_a_second_run_on_a_live_folder_is_refused_and_the_lock_dies_with_a_kill(
        digits_dir, tmp_path):
    logdir = tmp_path / "run"
    first = start(longer(digits_dir, logdir))
    until(first, lambda: billed(logdir, first.pid), "the run in billing.json")
    second = run(longer(digits_dir, logdir))
    errors = error_lines(second.stderr)
    assert second.returncode == 2 and len(errors) == 1, second.stderr[-2000:]
    assert f"is in use by a live run (pid {first.pid})" in errors[0]
    assert "Traceback" not in second.stderr
    assert first.poll() is None  # the first run goes on, unharmed
    first.send_signal(signal.SIGKILL)
    first.communicate()
    third = run(longer(digits_dir, logdir))  # the kill released the folder
    assert third.returncode == 0, third.stderr[-2000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert [a.get("pid") for a in summary["attempts"]] == [first.pid, summary["attempts"][1]["pid"]]
    assert [r["epoch"] for r in read_metrics(str(logdir))] == [1, 2, 3, 4]


def test_two_runs_started_together_one_trains_the_other_is_refused(digits_dir, tmp_path):
    logdir = tmp_path / "race"
    both = [start(tiny_flags(digits_dir, logdir)) for _ in range(2)]
    ended = [(p.communicate(timeout=PATIENCE_SECONDS)[1], p) for p in both]
    results = sorted((p.returncode, stderr) for stderr, p in ended)
    assert [code for code, _ in results] == [0, 2], [e[-1500:] for _, e in results]
    assert "is in use by a live run (pid " in error_lines(results[1][1])[0]
    summary = json.loads((logdir / "summary.json").read_text())
    assert len(summary["attempts"]) == 1 and summary["status"] == "completed"
    assert [r["epoch"] for r in read_metrics(str(logdir))] == [1, 2]


def test_rerunning_a_finished_run_says_it_is_complete_and_changes_nothing(digits_dir, tmp_path):
    logdir = tmp_path / "done"
    first = run(tiny_flags(digits_dir, logdir))
    assert first.returncode == 0
    before = snapshot(logdir)
    again = run(tiny_flags(digits_dir, logdir, "--verbose=2"))  # a resumable flag may differ
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"run is complete: {logdir}" in again.stdout
    # Its results again: the closing lines the run printed when it finished.
    closing = first.stdout[first.stdout.index("status: "):]
    assert again.stdout.endswith(closing) and "throughput: " in closing
    assert snapshot(logdir) == before
    assert json.loads((logdir / "summary.json").read_text())["images_per_sec"] > 0


def folder_flags(root, logdir):
    return [f"--dataset=folder:{root}", f"--logdir={logdir}", "--image_size=16",
            "--global_batch_size=8", "--epochs=5", "--validation_steps=1", "--seed=1",
            "--verbose=0"]


def test_resuming_on_data_of_another_size_is_refused_in_one_line(tmp_path):
    root, logdir = tmp_path / "sixty", tmp_path / "run"
    write_folder_dataset(str(root), per_class=20, corrupt=0)  # 60 images, 7 steps of 8
    killed_at(folder_flags(root, logdir), "checkpoint_committed", 2)
    for label in os.listdir(root / "train"):  # 36 images go
        for name in sorted(os.listdir(root / "train" / label))[8:]:
            os.remove(root / "train" / label / name)
    before = snapshot(logdir)
    done = run(folder_flags(root, logdir))
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert "started on other data (train_examples 60->24, steps_per_epoch 7->3)" in errors[0]
    assert "Traceback" not in done.stderr
    assert snapshot(logdir) == before


def test_a_class_added_or_config_keys_deleted_are_refused_in_one_line(tmp_path):
    root, logdir = tmp_path / "animals", tmp_path / "run"
    write_folder_dataset(str(root), classes=("cat", "dog"), corrupt=0)
    killed_at(folder_flags(root, logdir), "checkpoint_committed", 1)
    shutil.copytree(root / "train" / "dog", root / "train" / "emu")
    before = snapshot(logdir)
    done = run(folder_flags(root, logdir))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "num_classes 2->3" in error_lines(done.stderr)[0]
    shutil.rmtree(root / "train" / "emu")
    saved = json.loads((logdir / "config.json").read_text())
    del saved["epochs"], saved["global_batch_size"]  # a hand-edited config.json
    (logdir / "config.json").write_text(json.dumps(saved))
    before = snapshot(logdir)
    changed = run(folder_flags(root, logdir)[:-1] + ["--epochs=9"])
    assert changed.returncode == 2, changed.stderr[-2000:]
    assert "another config (--epochs missing, --global_batch_size missing)" in error_lines(
        changed.stderr)[0]
    assert snapshot(logdir) == before


def test_a_run_folder_deleted_mid_run_is_an_error_in_one_line(digits_dir, tmp_path):
    logdir = tmp_path / "gone"
    process = start(longer(digits_dir, logdir))
    until(process, lambda: read_metrics(str(logdir)), "the first epoch in metrics.jsonl")
    while logdir.exists():
        shutil.rmtree(logdir, ignore_errors=True)
    stdout, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    errors = error_lines(stderr)
    assert process.returncode == 74 and len(errors) == 1, stderr[-2000:]
    assert f"the run folder {logdir} was deleted or replaced during the run" in errors[0]
    assert "status: completed" not in stdout and not logdir.exists()


def test_without_logdir_rerunning_the_same_command_resumes_the_same_folder(digits_dir,
                                                                         tmp_path):
    command = [f"--data_dir={digits_dir}", "--image_size=8", "--epochs=2",
               "--steps_per_epoch=4", "--validation_steps=1", "--seed=5", "--verbose=0"]
    killed_at(command, "checkpoint_committed", 1, cwd=tmp_path)
    done = run(command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    folders = os.listdir(tmp_path / "runs")
    assert len(folders) == 1 and "resuming from runs/" in done.stdout
    summary = json.loads((tmp_path / "runs" / folders[0] / "summary.json").read_text())
    assert len(summary["attempts"]) == 2 and summary["epochs_completed"] == 2


def test_a_batch_past_the_address_space_limit_is_one_line(tmp_path):
    """Within the host's memory but past RLIMIT_AS: once an allocator's SIGABRT, no line."""
    limit = 8 << 30

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    logdir = tmp_path / "run"
    done = subprocess.run(  # 4,096 x 512 x 512 x 3 floats: 12 GiB
        [sys.executable, MAIN, "--dataset=synthetic", "--image_size=512",
         "--global_batch_size=4096", "--steps_per_epoch=2", f"--logdir={logdir}"],
        env=env_for(), capture_output=True, text=True, timeout=PATIENCE_SECONDS,
        preexec_fn=limited)
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0] == ("error: one batch of 4,096 images of 512x512 needs at least 12 GiB, "
                         "more than this process's address-space limit (RLIMIT_AS) of 8.00 "
                         "GiB; use a smaller --global_batch_size")
    assert "Traceback" not in done.stderr and not logdir.exists()


def test_a_training_step_past_what_the_process_may_still_take_is_one_line(tmp_path):
    """ResNet-50 at batch 256 and 224 px under a 6 GB address-space cap:
    its input (154 MB) passed the batch check, and 2 minutes in an allocator killed the
    run (SIGABRT, no line). The step's lower bound (what its layers keep for the
    gradient, 11 GiB; app/models/memory.py) is checked, at the door, against what the
    process may still take: the cap less what it maps already."""
    limit = 6 << 30

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    logdir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, MAIN, "--model=resnet50", "--dataset=synthetic", "--image_size=224",
         "--global_batch_size=256", "--steps_per_epoch=2", "--epochs=1", f"--logdir={logdir}"],
        env=env_for(), capture_output=True, text=True, timeout=PATIENCE_SECONDS,
        preexec_fn=limited)
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    line = re.fullmatch(
        r"error: a training step of --model=resnet50 on 256 images of 224x224 needs at least "
        r"11 GiB \(what its layers keep for the gradient, and its weights, gradients and "
        r"optimizer state\), more than the (\d\.\d\d) GiB this process may still take: its "
        r"address-space limit \(RLIMIT_AS\) of 6\.00 GiB less the (\d\.\d\d) GiB it maps "
        r"already; at most --global_batch_size=(\d+) can fit", errors[0])
    assert line, errors[0]
    room, mapped, batch = float(line[1]) * 2**30, float(line[2]), int(line[3])
    assert abs(room / 2**30 + mapped - 6.0) < 0.015 and 1 < mapped < 5  # TF, Keras: GBs
    # What ResNet-50 keeps an image at 4 bytes (its convolutions' and its logits' outputs,
    # 11.1 M values, tests/app/models/test_memory.py), beside 3 float32 copies of its
    # 25.6 M weights: the largest batch, a power of two, within the room (to the line's
    # rounding).
    per_image, weights = 4 * 11_114_984, 3 * 4 * 25_610_152
    assert batch & (batch - 1) == 0
    assert batch * per_image + weights <= room + 2**24 < 2 * batch * per_image + weights
    assert "Traceback" not in done.stderr and not logdir.exists()


# The figures a rebuilt summary.json has as the first one did: the run's sums the final
# checkpoint carries, its top-1 history and the ledger's bill.
REBUILT_FIGURES = ("status", "epochs_completed", "val_top1", "best_val_top1",
                   "val_top1_by_epoch", "images_per_sec", "step_time_ms", "eval_images_per_sec",
                   "billed_seconds", "cost_usd", "projected_cost_usd", "wall_seconds",
                   "attempts", "seed", "train_flops_per_image", "mfu", "steps_per_epoch")


def test_a_finished_run_whose_summary_is_gone_or_damaged_is_rebuilt_not_billed_again(
        digits_dir, tmp_path):
    logdir = tmp_path / "done"
    first = run(tiny_flags(digits_dir, logdir))
    assert first.returncode == 0, first.stderr[-2000:]
    summary = json.loads((logdir / "summary.json").read_text())
    ledger = (logdir / "billing.json").read_text()
    top1_line = next(line for line in first.stdout.splitlines() if line.startswith("top-1:"))
    for damage in (None, '{"status": "completed", "epochs_compl', '{"status": "completed", '
                   '"epochs_completed": 2}'):  # gone; torn; its figures missing
        if damage is None:
            (logdir / "summary.json").unlink()
        else:
            (logdir / "summary.json").write_text(damage)
        again = run(tiny_flags(digits_dir, logdir))
        assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-2000:]
        was = "missing" if damage is None else "damaged (kept as summary.json.damaged-"
        assert f"run is complete: {logdir}'s summary.json was {was}" in again.stdout
        assert "rebuilt from its records" in again.stdout and "status: completed" in again.stdout
        assert top1_line in again.stdout.splitlines()
        rebuilt = json.loads((logdir / "summary.json").read_text())
        assert {k: rebuilt[k] for k in REBUILT_FIGURES} == \
            {k: summary[k] for k in REBUILT_FIGURES}
        assert (logdir / "billing.json").read_text() == ledger  # no attempt, no second bill
        assert [r["epoch"] for r in read_metrics(str(logdir))] == [1, 2]
        if damage is not None:  # kept aside as it was, not overwritten
            kept = sorted(n for n in os.listdir(logdir) if n.startswith("summary.json.damaged-"))
            assert (logdir / kept[-1]).read_text() == damage
    before = snapshot(logdir)  # and now it is whole: kept as it is
    assert "(kept as it is)" in run(tiny_flags(digits_dir, logdir)).stdout
    assert snapshot(logdir) == before


def test_a_resumed_run_keeps_the_steps_the_first_attempt_traced_and_reads_its_session(
        digits_dir, tmp_path):
    """--profile_steps=2,3 traced in attempt 1, killed after epoch
    1's checkpoint, resumed to the end: the closing lines said "profile: steps 7-7
    traced" (the resumed attempt traced its own first step, compile included). And a
    session planted beside the run's, sorting after it (a clock skewed forward), was the
    one the breakdown read: "no step breakdown". The run names its session and reads it."""
    logdir = tmp_path / "traced"
    args = tiny_flags(digits_dir, logdir, "--steps_per_epoch=6", "--profile_steps=2,3",
                      "--checkpoint_every_steps=0", "--seed=3")
    killed_at(args, "checkpoint_committed", 1)  # epoch 1's: the trace stopped at step 3
    profile = logdir / "plugins" / "profile"
    (session,) = os.listdir(profile)
    planted = profile / "9999_12_31_23_59_59"
    planted.mkdir()
    (planted / "host.xplane.pb").write_bytes(os.urandom(4096))
    done = run(args)
    assert done.returncode == 0 and "no step breakdown" not in done.stderr, done.stderr[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["profile"]["steps"] == [2, 3] and summary["profile"]["session"] == session
    assert summary["profile"]["breakdown"]["traced"] == [2, 3]
    assert summary["profile"]["breakdown"]["step_ms"] > 0
    assert sorted(os.listdir(profile)) == sorted([session, planted.name])  # none traced again
    lines = done.stdout.splitlines()
    assert any(line.startswith("profile: steps 2-3 traced to ") for line in lines), done.stdout
    assert any(line.startswith("breakdown: step ") for line in lines), done.stdout
