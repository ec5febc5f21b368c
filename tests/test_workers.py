"""grain's decoding workers end with the run, however it ends: a SIGKILLed run leaves
none, a SIGTERM stops them and a resumed run ends without multiprocessing's late
tracebacks, and stopped (SIGSTOP) workers do not hold a stop past the grace. Real
processes, real signals; the workers are found as the run's descendants in /proc
(preprocessing/host/_children.py)."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import PATIENCE_SECONDS
from image_files import encode, write_folder_dataset
from processes import MAIN, background, env_for, until

from app.run.signals import EXIT_PREEMPTED, EXIT_STALLED, GRACE_SECONDS
from preprocessing.host import _children, grain_stream
from preprocessing.host import images as host_images


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children of any of its threads, recursively)."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(child) for child in f.read().split()]
    except OSError:  # gone meanwhile
        pass
    return found + [below for child in found for below in descendants(child)]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def workers_of(pid: int) -> list[int]:
    """The grain workers among `pid`'s descendants (spawned multiprocessing children;
    multiprocessing's resource tracker is not one)."""
    return [p for p in descendants(pid) if "multiprocessing.spawn" in _cmdline(p)]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def gone_within(pids, seconds: float) -> list[int]:
    """The `pids` still alive after up to `seconds`."""
    deadline = time.time() + seconds
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos") / "folder"
    write_folder_dataset(str(root), corrupt=0)
    return root


def grain_flags(root, logdir, *extra):
    # The standard preprocessing decodes in worker processes (one per core, capped).
    return ["--backend=jax", "--input_pipeline=grain", f"--dataset=folder:{root}",
            "--preprocessing=standard", f"--logdir={logdir}", "--image_size=16",
            "--global_batch_size=8", "--seed=1", "--verbose=0",
            "--checkpoint_every_steps=2", *extra]


def _checkpointed(logdir):
    """True once a checkpoint exists: steps have run, so the workers are past their
    start (and their request to die with the run)."""
    folder = logdir / "checkpoints"
    return lambda: folder.is_dir() and any(folder.iterdir())


def _running_workers(process, logdir) -> list[int]:
    until(process, _checkpointed(logdir), "a first checkpoint")
    expected = grain_stream.default_workers()
    until(process, lambda: len(workers_of(process.pid)) >= expected,
          f"{expected} grain workers")
    return workers_of(process.pid)


def _kill_left(pids) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_sigkilled_run_leaves_no_worker(folder, tmp_path):
    logdir = tmp_path / "killed"
    with background(grain_flags(folder, logdir, "--epochs=1000")) as process:
        workers = _running_workers(process, logdir)
        below = descendants(process.pid)  # the workers and multiprocessing's tracker
        try:
            process.kill()
            process.wait(PATIENCE_SECONDS)
            assert gone_within(below, 5) == [], [_cmdline(p) for p in below]
        finally:
            _kill_left(below)
    assert workers


@pytest.mark.slow
def test_sigterm_stops_the_workers_and_a_resumed_run_ends_without_tracebacks(folder,
                                                                             tmp_path):
    logdir = tmp_path / "stopped"
    flags = grain_flags(folder, logdir, "--epochs=2", "--steps_per_epoch=20")
    with background(flags) as process:
        workers = _running_workers(process, logdir)
        try:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
            assert process.returncode == EXIT_PREEMPTED, stderr[-3000:]
            assert gone_within(workers, 2) == []
        finally:
            _kill_left(workers)
    with background(flags) as resumed:
        stdout, stderr = resumed.communicate(timeout=PATIENCE_SECONDS)
    assert resumed.returncode == 0, stderr[-3000:]
    assert "resuming from" in stdout and "status: completed" in stdout
    # Before, four "OSError: handle is closed" tracebacks followed the closing lines.
    assert "Traceback" not in stderr and "handle is closed" not in stderr, stderr[-3000:]


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_ends_the_run_without_worker_tracebacks(folder, tmp_path):
    """A terminal's Ctrl-C goes to the whole process group, grain's
    workers too; each printed a KeyboardInterrupt traceback (grain's ipc/queue.py).
    They ignore SIGINT and leave when the run closes them (preprocessing/host/_children.py)."""
    logdir = tmp_path / "ctrl-c"
    process = subprocess.Popen([sys.executable, MAIN, *grain_flags(folder, logdir, "--epochs=1000")],
                               env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # its own group, as a shell's job
    try:
        workers = _running_workers(process, logdir)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
        assert process.returncode == EXIT_PREEMPTED, stderr[-3000:]
        assert "KeyboardInterrupt" not in stderr and "Traceback" not in stderr, stderr[-3000:]
        assert [line for line in stderr.splitlines() if line.startswith("error:")][0].startswith(
            "error: preempted (SIGINT) at step")
        assert gone_within(workers, 2) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        _kill_left(workers_of(process.pid))


def test_a_worker_the_app_spawns_ignores_ctrl_c_from_its_first_line():
    """Before grain's worker_init_fn runs, a spawned worker imports the app's main
    module as __mp_main__ (seconds of imports after it): Ctrl-C is ignored from there."""
    code = ("import runpy, signal; runpy.run_path(%r, run_name='__mp_main__'); "
            "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)" % MAIN)
    done = subprocess.run([sys.executable, "-c", code], env=env_for(), capture_output=True,
                          text=True, timeout=PATIENCE_SECONDS)
    assert done.returncode == 0 and done.stdout.split() == ["True"], done.stderr[-2000:]


@pytest.mark.slow
def test_a_run_whose_workers_are_stopped_still_ends_within_the_grace(folder, tmp_path):
    logdir = tmp_path / "frozen"
    with background(grain_flags(folder, logdir, "--epochs=1000")) as process:
        workers = _running_workers(process, logdir)
        try:
            for pid in workers:
                os.kill(pid, signal.SIGSTOP)
            sent = time.time()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
            took = time.time() - sent
            assert process.returncode == EXIT_PREEMPTED, stderr[-3000:]
            assert took < GRACE_SECONDS + 5, f"{took:.1f} s"  # 35-53 s before
            assert gone_within(workers, 2) == []
        finally:
            _kill_left(workers)


@pytest.mark.slow
def test_a_run_ended_by_the_stall_watchdog_leaves_no_worker(folder, tmp_path):
    """Stopped workers stall the run; the watchdog ends it in os._exit (no exit
    handler runs): the workers still go with it."""
    logdir = tmp_path / "stalled"
    with background(grain_flags(folder, logdir, "--epochs=1000"),
                    # far above a compile on a loaded machine (it counts as a stall)
                    env={"BENCH_STALL_SECONDS": "30"}) as process:
        workers = _running_workers(process, logdir)
        try:
            for pid in workers:
                os.kill(pid, signal.SIGSTOP)
            _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
            assert process.returncode == EXIT_STALLED, stderr[-3000:]
            assert gone_within(workers, 5) == []
        finally:
            _kill_left(workers)


def test_closing_a_stream_ends_its_stopped_workers_within_seconds(tmp_path):
    """In-process: a train stream whose workers were SIGSTOPped closes within
    STOP_SECONDS, none left (grain's own close waited for them until killed)."""
    records = []
    for i in range(16):
        path = tmp_path / f"{i}.jpg"
        path.write_bytes(encode(np.full((20, 16, 3), 10 * i, np.uint8)))
        records.append((str(path), i))
    # (workers of streams other in-process tests left open are not this stream's)
    before = set(workers_of(os.getpid()))
    stream = grain_stream.train_stream(grain_stream.FileSource(records), 4,
                                       host_images.train_transform("standard", 8), 0,
                                       workers=2)
    next(stream)
    workers = [pid for pid in workers_of(os.getpid()) if pid not in before]
    assert len(workers) == 2
    try:
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        # In a thread: grain's own close waited for them forever (until killed).
        closing = threading.Thread(target=stream.close, daemon=True)
        closing.start()
        closing.join(_children.STOP_SECONDS)
        assert not closing.is_alive(), f"close() took over {_children.STOP_SECONDS} s"
        assert gone_within(workers, 1) == []
    finally:
        _kill_left(workers)
