"""Every way a run can be stopped ends in one line and a known exit code: signals at
any moment (also while the input hangs), a stream that yields nothing, a disk that
fills up or turns read-only. Real processes, real signals, a real size-limited tmpfs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import PATIENCE_SECONDS, error_lines, tmpfs
from image_files import write_folder_dataset
from processes import MAIN, env_for, handles, run, start, until

from callbacks.records.checkpoint_files import file_crc, latest_checkpoint
from callbacks.records.metrics_file import read_metrics


def flags(digits_dir, logdir, *extra):
    return [f"--data_dir={digits_dir}", f"--logdir={logdir}", "--image_size=8",
            "--epochs=4", "--steps_per_epoch=12", "--checkpoint_every_steps=4",
            "--validation_steps=1", "--global_batch_size=32", "--seed=6", "--verbose=0",
            *extra]


def signalled(digits_dir, logdir, signals, gap=0.05):
    """Starts a run, sends `signals` once its first epoch is logged; (code, stderr)."""
    process = start(flags(digits_dir, logdir))
    until(process, lambda: read_metrics(str(logdir)), "the first epoch in metrics.jsonl")
    for number in signals:
        process.send_signal(number)
        time.sleep(gap)
    _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    return process.returncode, stderr


def test_ctrl_c_checkpoints_and_exits_75_and_twice_stops_at_once(digits_dir, tmp_path):
    code, stderr = signalled(digits_dir, tmp_path / "int", [signal.SIGINT])
    assert code == 75 and "Traceback" not in stderr, stderr[-2000:]
    (line,) = error_lines(stderr)
    assert "preempted (SIGINT) at step" in line
    step = int(line.split("at step ")[1].split(";")[0])
    assert latest_checkpoint(str(tmp_path / "int"))[1]["global_step"] == step
    code, stderr = signalled(digits_dir, tmp_path / "twice", [signal.SIGINT] * 2, gap=0.01)
    assert code == 130 and "Traceback" not in stderr, stderr[-2000:]
    assert error_lines(stderr) == ["error: interrupted twice (SIGINT): stopped at once; "
                                   "the last checkpoint is kept"]


def test_sigterm_three_times_or_at_start_up_still_exits_75(digits_dir, tmp_path):
    code, stderr = signalled(digits_dir, tmp_path / "thrice", [signal.SIGTERM] * 3)
    assert code == 75 and "preempted (SIGTERM) at step" in error_lines(stderr)[0], stderr
    early = start(flags(digits_dir, tmp_path / "early"))
    # Once app/main.py's first lines have installed its handlers (the SIGTERM one is
    # seen in /proc; the wake-up pipe follows within microseconds), while it is still
    # importing: no Keras, no callbacks yet. A fixed 0.5 s from the start could fall
    # before the handler on a loaded machine.
    until(early, lambda: handles(early.pid, signal.SIGTERM), "the SIGTERM handler",
          every=0.01)
    time.sleep(0.5)
    early.send_signal(signal.SIGTERM)
    _, stderr = early.communicate(timeout=PATIENCE_SECONDS)
    assert early.returncode == 75, stderr[-2000:]
    (line,) = error_lines(stderr)
    assert line.startswith("error: preempted (SIGTERM) before training started; no "
                           "checkpoint yet; resume with: ")
    assert f"app/main.py --data_dir={digits_dir} --logdir={tmp_path / 'early'} " in line


@pytest.fixture
def hanging_folder(tmp_path):
    """A folder dataset whose storage will hang: see `hang`."""
    root = tmp_path / "hangs"
    write_folder_dataset(str(root), corrupt=0)
    return root


def hang(root, logdir, process):
    """Once the run has checked its data and made its folder (config.json), every
    training image becomes a FIFO nobody writes to: the input stream then blocks
    inside TensorFlow on its first read, as on a hung network mount. (The data door
    opens only regular files, so a FIFO there from the start would be skipped.)"""
    until(process, (logdir / "config.json").exists, "the run folder (config.json)")
    for folder, _, names in os.walk(root / "train"):
        for name in names:
            os.unlink(os.path.join(folder, name))
            os.mkfifo(os.path.join(folder, name))


def hanging_flags(root, logdir):
    return [f"--dataset=folder:{root}", f"--logdir={logdir}", "--image_size=16",
            "--global_batch_size=8", "--epochs=2", "--seed=1", "--verbose=0"]


@pytest.mark.slow
def test_sigterm_ends_a_run_whose_input_hangs_within_the_grace_period(hanging_folder,
                                                                      tmp_path):
    logdir = tmp_path / "run"
    process = start(hanging_flags(hanging_folder, logdir))
    hang(hanging_folder, logdir, process)
    # metrics.jsonl is opened by fit's on_train_begin; the first step's hooks follow
    # within milliseconds, then fit waits for a first batch that never comes.
    until(process, (logdir / "metrics.jsonl").exists, "fit to begin (metrics.jsonl)")
    time.sleep(2)
    sent = time.time()
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("SIGTERM did not end a run blocked on its input")
    assert process.returncode == 75 and time.time() - sent < 40, stderr[-2000:]
    (line,) = error_lines(stderr)
    assert "preempted (SIGTERM) but no step boundary came within 25 s" in line


def test_an_input_stream_that_yields_nothing_ends_in_one_line(hanging_folder, tmp_path):
    logdir = tmp_path / "run"
    process = start(hanging_flags(hanging_folder, logdir), env={"BENCH_STALL_SECONDS": "6"})
    hang(hanging_folder, logdir, process)
    _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    assert process.returncode == 69, stderr[-2000:]
    assert error_lines(stderr) == [
        "error: no training step finished for 6 s: the input stream yields nothing (are its "
        "images all undecodable, or is its storage hung?); stopped, no checkpoint was saved "
        "before it"]


def test_a_training_split_with_no_decodable_image_is_one_line_before_training(tmp_path):
    root = tmp_path / "broken"
    write_folder_dataset(str(root), per_class=2, corrupt=0)
    for folder, _, names in os.walk(root / "train"):
        for name in names:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(b"\xff\xd8\xff\xe0 not a JPEG at all")
    done = run(hanging_flags(root, tmp_path / "run"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert error_lines(done.stderr) == [
        f"error: {root}/train: none of its 6 image files can be read and decoded; nothing "
        "to train on"]
    assert not (tmp_path / "run").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A real tmpfs of 10 MiB (room for two checkpoints of the small ResNet, not three)."""
    with tmpfs(tmp_path / "disk", "10m") as mount:
        yield mount


def intact(logdir):
    path, state = latest_checkpoint(str(logdir))
    return file_crc(os.path.join(path, "model.weights.h5")) == (state["weights_bytes"],
                                                                state["weights_crc32"])


def test_a_full_disk_is_one_line_exit_74_with_the_last_checkpoint_and_the_summary(
        small_disk):
    """The issue's F: 1,000 classes make 3.4 MiB checkpoints; the third does not fit."""
    logdir = small_disk / "run"
    done = run(["--dataset=synthetic", "--image_size=32", "--global_batch_size=16",
                "--epochs=4", "--steps_per_epoch=5", "--validation_steps=2", "--seed=1",
                f"--logdir={logdir}", "--verbose=0"])
    assert done.returncode == 74, done.stderr[-2000:]
    (line,) = error_lines(done.stderr)
    assert "cannot write checkpoint" in line and "No space left on device" in line
    assert "Traceback" not in done.stderr
    assert sorted(os.listdir(logdir / "checkpoints")) == ["ckpt-0000000005",
                                                          "ckpt-0000000010"]
    assert intact(logdir)
    assert json.loads((logdir / "summary.json").read_text())["status"] == "failed"


def test_a_run_folder_turned_read_only_mid_run_is_one_line_exit_74(digits_dir, tmp_path):
    """Its checkpoints/ folder is re-mounted read-only between two saves (a whole
    folder cannot be while the run holds files in it open for writing)."""
    logdir = tmp_path / "run"
    process = start(flags(digits_dir, logdir, "--checkpoint_every_steps=0"))
    until(process, lambda: latest_checkpoint(str(logdir)), "the first checkpoint")
    folder = str(logdir / "checkpoints")
    made = subprocess.run(["mount", "--bind", folder, folder], capture_output=True)
    if made.returncode:
        process.kill()
        pytest.skip(f"cannot bind-mount here: {made.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", folder], check=True)
        _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    finally:
        subprocess.run(["umount", "-l", folder])
    assert process.returncode == 74 and "Traceback" not in stderr, stderr[-2000:]
    (line,) = error_lines(stderr)
    assert "cannot write checkpoint" in line and "Read-only file system" in line
    assert intact(logdir)
    assert json.loads((logdir / "summary.json").read_text())["status"] == "failed"


def test_a_run_folder_whose_permissions_are_taken_away_mid_run_is_one_line_exit_74(
        digits_dir, tmp_path):
    """`chmod -R a-w` on the run folder once the run has opened its
    files. The metrics writer, making validation/ at the first epoch's end, died in a
    PermissionError traceback (exit 1); every errno the app cannot write through is
    one line, exit 74 (callbacks/stops.py's STORAGE_ERRNOS)."""
    prefix = []
    if os.geteuid() == 0:  # root writes through permissions: the run drops that power
        if not shutil.which("setpriv"):
            pytest.skip("root, and no setpriv to drop CAP_DAC_OVERRIDE with")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                  "--inh-caps=-dac_override,-dac_read_search"]
    logdir = tmp_path / "run"
    process = subprocess.Popen(
        [*prefix, sys.executable, MAIN, *flags(digits_dir, logdir, "--checkpoint_every_steps=0")],
        env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # metrics.jsonl is opened as training begins, seconds before the first epoch ends.
        until(process, (logdir / "metrics.jsonl").exists, "metrics.jsonl")
        subprocess.run(["chmod", "-R", "a-w", str(logdir)], check=True)
        _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
        subprocess.run(["chmod", "-R", "u+w", str(logdir)])
    assert process.returncode == 74 and "Traceback" not in stderr, stderr[-3000:]
    assert error_lines(stderr) == [f"error: cannot write {logdir}/validation: Permission "
                                   "denied; stopped, no checkpoint was saved before it"]
