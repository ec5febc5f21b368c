"""Helpers for tests that run `python app/main.py` as real processes and hurt them:
start, wait for a signal the app writes, kill at an exact point
(callbacks/records/faults.py), compare folders, read JSON strictly.

No test waits a fixed time for the app to get somewhere: it polls what the app writes
when it gets there (billing.json, metrics.jsonl, a checkpoint, a line on stdout, the
signal handler it installs), up to PATIENCE_SECONDS, and a wait also ends when the
process does. A slow or loaded machine makes a test slower, never red; a run that
hangs still fails, with its stderr."""

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time

from conftest import PATIENCE_SECONDS, ROOT

MAIN = os.path.join(ROOT, "app", "main.py")


def env_for(extra=None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    return {**env, "PYTHONUNBUFFERED": "1", **(extra or {})}


def read_terminal(process: subprocess.Popen, leader: int, watch=None) -> bytes:
    """What `process` wrote to the pseudo-terminal whose `leader` end is given, read until
    the terminal closes; `watch(process, output so far)` after each read. Closes `leader`."""
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        output += chunk
        if watch is not None:
            watch(process, output)
    os.close(leader)
    return output


def start(args, env=None, cwd=ROOT) -> subprocess.Popen:
    """`python app/main.py ARGS` in the background (stdout and stderr captured)."""
    return subprocess.Popen([sys.executable, MAIN, *args], cwd=cwd, env=env_for(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def background(args, env=None, cwd=ROOT):
    """`start(args)` for the length of a `with`: a process still running when the
    block ends (a failed assertion) is killed, not left behind."""
    process = start(args, env=env, cwd=cwd)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def run(args, env=None, cwd=ROOT, timeout=PATIENCE_SECONDS) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, MAIN, *args], cwd=cwd, env=env_for(env),
                          capture_output=True, text=True, timeout=timeout)


def killed_at(args, point: str, nth: int = 1, **kwargs) -> subprocess.CompletedProcess:
    """Runs the command and SIGKILLs it the `nth` time it reaches `point`."""
    done = run(args, env={"BENCH_KILL_AT": f"{point}:{nth}"}, **kwargs)
    assert done.returncode == -9, (done.returncode, done.stderr[-2000:])
    return done


def wait_for(predicate, timeout=PATIENCE_SECONDS, every=0.05, process=None) -> bool:
    """Polls `predicate` until it holds (True), or `process` (a Popen) has ended or
    `timeout` seconds have passed without it holding (False)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        if process is not None and process.poll() is not None:
            return bool(predicate())  # what it wrote just before it ended
        time.sleep(every)
    return bool(predicate())


def until(process, predicate, what: str, every=0.05, timeout=PATIENCE_SECONDS) -> None:
    """Waits for `predicate` (a sign of progress the app writes) while `process` runs;
    fails the test with the process's exit code and stderr if it ended first, or
    after `timeout` seconds (then killing it)."""
    if wait_for(predicate, timeout, every, process):
        return
    if process.poll() is None:
        process.kill()
        why = f"not within {timeout:.0f} s"
    else:
        why = f"the process ended first (exit {process.returncode})"
    stderr = process.communicate()[1] or ""
    raise AssertionError(f"waited for {what}: {why}\n{stderr[-3000:]}")


def handles(pid, number) -> bool:
    """Whether process `pid` has installed a handler for signal `number` (its
    /proc/PID/status SigCgt mask: what app/run/signals.install() sets first thing)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(line for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) >> (int(number) - 1) & 1)


def billed(logdir, pid) -> bool:
    """Whether process `pid` has recorded its attempt in logdir/billing.json."""
    try:
        attempts = json.loads((logdir / "billing.json").read_text())["attempts"]
        return any(a.get("pid") == pid for a in attempts)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def snapshot(folder) -> dict:
    """{relative path: (sha256, mtime)} of every file under `folder`."""
    found = {}
    for base, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = (hashlib.sha256(f.read()).hexdigest(),
                                                         os.stat(path).st_mtime_ns)
    return found


def _no_constants(name):
    raise ValueError(f"not strict JSON: {name}")


def strict_loads(text: str):
    """JSON text parsed refusing NaN and Infinity, as any strict reader would."""
    return json.loads(text, parse_constant=_no_constants)


def strict_json(path):
    with open(path) as f:
        return strict_loads(f.read())
