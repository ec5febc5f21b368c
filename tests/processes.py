"""Helpers for tests that run `python app/main.py` as real processes and hurt them:
start, wait for a moment, kill at an exact point (callbacks/records/faults.py), compare
folders, read JSON strictly."""

import hashlib
import json
import os
import subprocess
import sys
import time

from conftest import ROOT

MAIN = os.path.join(ROOT, "app", "main.py")


def env_for(extra=None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    return {**env, "PYTHONUNBUFFERED": "1", **(extra or {})}


def start(args, env=None, cwd=ROOT) -> subprocess.Popen:
    """`python app/main.py ARGS` in the background (stdout and stderr captured)."""
    return subprocess.Popen([sys.executable, MAIN, *args], cwd=cwd, env=env_for(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(args, env=None, cwd=ROOT, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, MAIN, *args], cwd=cwd, env=env_for(env),
                          capture_output=True, text=True, timeout=timeout)


def killed_at(args, point: str, nth: int = 1, **kwargs) -> subprocess.CompletedProcess:
    """Runs the command and SIGKILLs it the `nth` time it reaches `point`."""
    done = run(args, env={"BENCH_KILL_AT": f"{point}:{nth}"}, **kwargs)
    assert done.returncode == -9, (done.returncode, done.stderr[-2000:])
    return done


def wait_for(predicate, timeout=120, every=0.05) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


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
