"""A Ctrl-C before the run starts: from the moment main.py's handlers are
in, one line, exit 130, nothing written; before them (Python's own start-up) never a
traceback of the app, and a Ctrl-C lost there is told apart by the run's own clock.
Real processes, real SIGINTs."""

import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, error_lines
from processes import MAIN, background, env_for, handles, start, strict_json, until, wait_for


# ------------------------------------------------------------------ Ctrl-C before the run
INTERRUPTED = "error: interrupted (SIGINT) before the run started; nothing was written"
# How long a first Ctrl-C may take to end the run before the test takes it as lost in
# Python's start-up and presses a second (the app ends within a second of one it got)
SWALLOWED_AFTER_SECONDS = 30


def interrupted(process, logdir):
    """Sends SIGINT now; asserts one line, exit 130, no traceback, no run folder."""
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, (process.returncode, stderr[-2000:])
    assert error_lines(stderr) == [INTERRUPTED] and "Traceback" not in stderr, stderr[-2000:]
    assert not logdir.exists()


@pytest.mark.parametrize("after", [0.0, 0.3, 1.0])
def test_ctrl_c_once_the_handler_is_in_is_one_line_and_exit_130(tmp_path, after):
    """Moments after app/run/signals.py's handlers are in (seen in /proc, as
    tests/test_stops.py does): importing absl and Keras, checking the data."""
    logdir = tmp_path / "run"
    with background(["--dataset=synthetic", "--image_size=8", "--epochs=1",
                     "--steps_per_epoch=2", f"--logdir={logdir}"], cwd=tmp_path) as process:
        until(process, lambda: handles(process.pid, signal.SIGTERM), "the handlers",
              every=0.005)
        time.sleep(after)
        interrupted(process, logdir)


def test_ctrl_c_in_the_first_milliseconds_never_shows_the_apps_traceback(tmp_path):
    """From launch: before main.py's first line (Python's own start-up, its `site`
    imports) a KeyboardInterrupt cannot be caught by the app, and its traceback names
    no line of the app; from main.py's first line on, it is the one line and 130.

    Python's start-up can also lose it: a KeyboardInterrupt inside a class's
    `__set_name__` while `site` runs a .pth file's import line (the editable install's
    finder imports pathlib, urllib, ipaddress) comes out as a RuntimeError that `site`
    prints ("Error processing line 1 of ...pth") and goes on from, and the run starts;
    one in Python's check of main.py as a zip archive is printed as "Failed checking if
    argv[0] is an import path entry", and the same follows.
    A first Ctrl-C that does not end the process is then taken as lost only if it was
    sent before main.py's handler was in: before the run's own start time (billing.json,
    main.py's STARTED_AT, set just after the handler; the same clock as this test's).
    A user's second Ctrl-C then stops the run as the first would have once started: one
    line (saved, exit 75)."""
    outcomes = []
    for after in (0.02, 0.04, 0.06, 0.1, 0.2):
        logdir = tmp_path / f"run-{after}"
        process = start(["--dataset=synthetic", f"--logdir={logdir}"], cwd=tmp_path)
        time.sleep(after)
        sent_at = time.time()
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=SWALLOWED_AFTER_SECONDS)
        except subprocess.TimeoutExpired:  # still running: the first Ctrl-C was lost
            until(process, lambda: (logdir / "billing.json").exists(), "the run's ledger")
            process.send_signal(signal.SIGINT)  # the user's second Ctrl-C
            _, stderr = process.communicate(timeout=60)
            started_at = strict_json(logdir / "billing.json")["attempts"][0]["started_at"]
            assert sent_at < started_at, (
                f"a SIGINT sent {sent_at - started_at:.3f} s after main.py's handler was in "
                f"was lost: {stderr[-2000:]}")
            assert process.returncode == 75, (process.returncode, stderr[-2000:])
            assert len(error_lines(stderr)) == 1, stderr[-2000:]
            outcomes.append("lost in Python's start-up")
            continue
        if process.returncode == 130:
            assert error_lines(stderr) == [INTERRUPTED] and "Traceback" not in stderr
            outcomes.append("app")
        else:  # Python's start-up (killed before its own handler, or inside `site`)
            assert process.returncode in (-signal.SIGINT, 1), (process.returncode, stderr)
            # (a signal taken during start-up is raised at main.py's "line 0", before
            # its first statement)
            # (the app's own code: the repository's .venv is not it)
            own = rf'File "{re.escape(ROOT)}/(app|callbacks|flags|preprocessing)/.*line [1-9]'
            assert not re.search(own, stderr), stderr
            assert not error_lines(stderr), stderr[-2000:]
            outcomes.append("python")
        assert not logdir.exists()
    # (which moments fall in Python's start-up depends on the machine's load: the app's
    # side is asserted at moments after its handlers are in, by the test above)


def test_a_ctrl_c_lost_before_mains_handler_is_told_apart_by_the_clocks(tmp_path):
    """The branch above, made certain: a process started with SIGINT ignored (as a shell
    script's `cmd &` starts it) ignores a Ctrl-C until main.py's handler is in. One sent
    as the shell execs Python is lost, the run starts, and its ledger's start time is
    after the moment it was sent; a second Ctrl-C is the app's: saved, one line, exit 75.
    (Through sh, not preexec_fn: a fork from this multithreaded process may deadlock.)"""
    for attempt in range(3):
        logdir = tmp_path / f"run{attempt}"
        process = subprocess.Popen(
            ["/bin/sh", "-c", 'trap "" INT; echo ignoring; exec "$0" "$@"', sys.executable,
             MAIN, "--dataset=synthetic", f"--logdir={logdir}"], cwd=tmp_path, env=env_for(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert process.stdout.readline() == "ignoring\n"
            sent_at = time.time()
            process.send_signal(signal.SIGINT)
            if not wait_for(lambda: (logdir / "billing.json").exists(), process=process):
                # (this process was held up past main.py's start: the app took it)
                _, stderr = process.communicate(timeout=60)
                assert process.returncode == 130 and error_lines(stderr) == [INTERRUPTED]
                continue
            started_at = strict_json(logdir / "billing.json")["attempts"][0]["started_at"]
            assert sent_at < started_at
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 75, (process.returncode, stderr[-2000:])
        assert error_lines(stderr)[0].startswith("error: preempted (SIGINT) ")
        return
    pytest.fail("every Ctrl-C reached the app: the test could not send one early enough")
