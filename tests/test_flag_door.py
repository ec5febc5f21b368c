"""Flags and files at the door (issue 38; --list_machines of issue 41): every number
flag has a range, flagfiles are text without cycles, a user's model is built before
the run folder exists, a Ctrl-C before the run is one line, and each mistake is one
`error:` line, exit 2, nothing written. Real processes where the door is the process."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, error_lines
from processes import (MAIN, background, env_for, handles, run, start, strict_json, until,
                       wait_for)

from flags.config import Config, ConfigError
from flags.ranges import FLOAT_RANGES, INT_RANGES


def one_error(done, code=2):
    """The single `error:` line of a process expected to end with `code`."""
    errors = error_lines(done.stderr)
    assert done.returncode == code and len(errors) == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    return errors[0]


# ------------------------------------------------------------------ number ranges
def config(**values):
    """A Config that fails, if at all, for `values` (multi-host settings allowed)."""
    return Config(backend="jax", coordinator_address="host:1234", **values)


@pytest.mark.parametrize("name", sorted(INT_RANGES))
def test_every_integer_flag_refuses_values_past_its_range(name):
    low, high = INT_RANGES[name]
    for value in (high + 1, 10**20):
        with pytest.raises(ConfigError) as error:
            config(**{name: value})
        assert str(error.value).startswith(f"--{name}={value} "), str(error.value)
    with pytest.raises(ConfigError, match=f"^--{name}={low - 1} "):
        config(**{name: low - 1})
    config(**{name: high, **({"num_processes": high + 1} if name == "process_id" else {}),
              **({"benchmark": "ladder", "dataset": "synthetic"} if name == "repeats" else {})})


@pytest.mark.parametrize("name", sorted(FLOAT_RANGES))
def test_every_float_flag_refuses_values_past_its_range(name):
    low, high = FLOAT_RANGES[name]
    with pytest.raises(ConfigError) as error:
        config(**{name: high * 2 + 1})
    assert str(error.value).startswith(f"--{name}={high * 2 + 1} "), str(error.value)
    with pytest.raises(ConfigError, match=f"^--{name}="):
        config(**{name: low - 1})


def test_a_huge_number_on_the_command_line_is_one_line(tmp_path):
    done = run(["--epochs=99999999999999999999", f"--logdir={tmp_path / 'run'}"])
    assert one_error(done) == ("error: --epochs=99999999999999999999 is out of range; "
                               "accepted: 1..1000000")
    done = run(["--price_per_hour_usd=1e300", f"--logdir={tmp_path / 'run'}"])
    assert one_error(done) == ("error: --price_per_hour_usd=1e+300 is out of range; "
                               "accepted: 0..1000000")
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ --list_machines
NO_FRAMEWORKS = {"PYTHONPATH": os.pathsep.join(
    os.path.join(os.path.dirname(__file__), name) for name in ("no_tensorflow", "no_jax"))}


def test_list_machines_prints_the_catalog_and_exits_0_without_a_framework(tmp_path):
    began = time.time()
    done = run(["--list_machines"], env=NO_FRAMEWORKS, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["machine", "devices", "$/device-h", "on_demand"]
    assert any(line.startswith("gcp-tpu-v4 ") for line in lines)
    assert any(line.startswith("gcp-a3-ultragpu-8g ") for line in lines)
    done = run(["--list_machines=h200"], env=NO_FRAMEWORKS, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines()[1:]
            if not line.startswith(("US dollars", "* read"))]  # the legend and the stale mark
    assert rows and all("H200" in row for row in rows)
    assert not any(line.startswith("gcp-tpu-v4 ") for line in done.stdout.splitlines())
    assert time.time() - began < 30  # two processes; no framework is imported
    assert os.listdir(tmp_path) == []  # nothing written (no runs/ folder)


def test_list_machines_with_a_pattern_that_matches_nothing_is_one_line():
    done = run(["--list_machines=no-such-machine"], env=NO_FRAMEWORKS)
    assert one_error(done) == (
        "error: no machine in the price catalog matches 'no-such-machine'; accepted: part of "
        "a machine, accelerator, device or provider name, or a regular expression "
        "(--list_machines lists every row)")
    assert done.stdout == ""


def test_list_machines_bare_in_a_flagfile_is_the_whole_catalog(tmp_path):
    """Issue 51 item 8: written bare in a flagfile, as --help shows it, it took the next
    flag as its pattern ("no machine in the price catalog matches '--logdir=...'")."""
    (tmp_path / "catalog.flags").write_text("--list_machines\n--logdir=runs/x\n")
    (tmp_path / "last.flags").write_text("# the action last\n--list_machines\n")
    for args in (["--flagfile=catalog.flags"], ["--flagfile=last.flags", "--epochs=2"],
                 ["--flagfile", "last.flags", "--logdir=runs/y"]):
        done = run(args, env=NO_FRAMEWORKS, cwd=tmp_path)
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr[-2000:])
        lines = done.stdout.splitlines()
        header = lines[0].split()
        assert header[:2] == ["machine", "devices"] and "on_demand" in header, args
        assert any(line.startswith("gcp-tpu-v4 ") for line in lines), args
    assert sorted(os.listdir(tmp_path)) == ["catalog.flags", "last.flags"]  # no runs/


def test_refusals_that_a_user_waited_for_come_before_any_framework_loads(tmp_path):
    """Issue 51 item 12: --pricing=spot on the CPU, whose catalog row sells on-demand only,
    was refused 15.4 s in (once the devices were found); a folder too small for the batch
    28.9 s in (once the data was built). Both come now with the other flag errors: with
    neither TensorFlow nor JAX importable, the same line, in about a second."""
    from image_files import write_folder_dataset

    write_folder_dataset(str(tmp_path / "pets"), per_class=4, corrupt=0)  # 12 training images
    cases = [
        (["--pricing=spot"], "error: --pricing=spot has no price for --machine=auto (catalog "
         "row gcp-n2-standard-4, for 'cpu') in the catalog; accepted: on_demand, or "
         "--price_per_hour_usd"),
        ([f"--dataset=folder:{tmp_path / 'pets'}", "--global_batch_size=64"],
         f"error: --global_batch_size=64 is more than the 12 training images of folder:"
         f"{tmp_path / 'pets'}; accepted: at most 12 images a call (e.g. "
         "--global_batch_size=8), or --steps_per_epoch to repeat the images"),
    ]
    for args, line in cases:
        began = time.time()
        done = run([*args, f"--logdir={tmp_path / 'run'}"], env=NO_FRAMEWORKS)
        assert one_error(done) == line, args
        assert time.time() - began < 20, args  # ~1 s here; a generous bound for a loaded host
        assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ flagfiles
ACCEPTED = "accepted: a UTF-8 text file of flags, one per line"


def flagfile_cases(tmp):
    """(--flagfile value, the error line expected); written under `tmp` (the cwd)."""
    (tmp / "garbage.flags").write_bytes(b"--epochs=1\n\xff\xfe\x00\x9c binary")
    (tmp / "nul.flags").write_bytes(b"--epochs=1\n\x00\x00")
    (tmp / "self.flags").write_text("--epochs=1\n--flagfile=self.flags\n")
    (tmp / "a.flags").write_text("--flagfile=b.flags\n")
    (tmp / "b.flags").write_text("# b\n--flagfile=./a.flags\n")
    (tmp / "outer.flags").write_text("--flagfile=garbage.flags\n")
    (tmp / "big.flags").write_text("# padding\n" * 200_000)
    os.mkfifo(tmp / "fifo.flags")
    (tmp / "dir.flags").mkdir()
    for depth in range(12):  # d0 -> d1 -> ... -> d11
        (tmp / f"d{depth}.flags").write_text(f"--flagfile=d{depth + 1}.flags\n")
    (tmp / "d12.flags").write_text("--epochs=1\n")
    return [
        ("garbage.flags", f"error: --flagfile=garbage.flags is not UTF-8 text (byte 0xff at "
                          f"offset 11); {ACCEPTED}"),
        ("nul.flags", "error: --flagfile=nul.flags is not a text file of flags (a NUL byte "
                      f"at offset 11); {ACCEPTED}"),
        ("self.flags", "error: --flagfile=self.flags includes itself (self.flags -> "
                       "self.flags); accepted: flagfiles that include others without a cycle"),
        ("a.flags", "error: --flagfile=a.flags includes itself (a.flags -> b.flags -> "
                    "./a.flags); accepted: flagfiles that include others without a cycle"),
        ("outer.flags", "error: --flagfile=garbage.flags (included by outer.flags) is not "
                        f"UTF-8 text (byte 0xff at offset 11); {ACCEPTED}"),
        ("big.flags", f"error: --flagfile=big.flags is 2,000,000 bytes; {ACCEPTED}, up to "
                      "1,048,576 bytes"),
        ("fifo.flags", f"error: --flagfile=fifo.flags is not a regular file; {ACCEPTED}"),
        ("dir.flags", f"error: --flagfile=dir.flags is a folder; {ACCEPTED}"),
        ("d0.flags", "error: --flagfile=d0.flags nests flagfiles over 8 deep (d0.flags -> "
                     + " -> ".join(f"d{i}.flags" for i in range(1, 9))
                     + "); accepted: at most 8"),
        ("missing.flags", "error: --flagfile=missing.flags cannot be read (No such file or "
                          f"directory); {ACCEPTED}"),
    ]


def test_flagfiles_that_are_not_text_or_include_themselves_are_one_line(tmp_path):
    """Unit: each case's message, without a process."""
    from flags.parse import check_flagfiles

    here = os.getcwd()
    os.chdir(tmp_path)  # absl reads relative flagfile paths from the working directory
    try:
        for value, expected in flagfile_cases(tmp_path):
            with pytest.raises(ConfigError) as error:
                check_flagfiles(["main", f"--flagfile={value}"])
            assert f"error: {error.value}" == expected
        check_flagfiles(["main", "--flagfile", "d5.flags"])  # 7 deep: accepted
    finally:
        os.chdir(here)


@pytest.mark.parametrize("value", ["garbage.flags", "self.flags", "a.flags", "fifo.flags",
                                   "dir.flags"])
def test_a_bad_flagfile_ends_the_process_in_one_line_before_anything(tmp_path, value):
    data = tmp_path / "data"
    data.mkdir()
    expected = dict(flagfile_cases(data))[value]
    done = run([f"--flagfile={value}", f"--logdir={tmp_path / 'run'}"], cwd=data, timeout=60)
    assert one_error(done) == expected
    assert "Warning" not in done.stderr  # absl's "circular flagfile dependency"
    assert not (tmp_path / "run").exists() and not (data / "runs").exists()


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


# ------------------------------------------------------------------ true messages
def test_a_stop_says_a_checkpoint_is_kept_only_where_one_was_saved(tmp_path, monkeypatch):
    from app.run import signals
    from callbacks.records import checkpoint_files
    from callbacks.records.checkpoint_files import kept_line

    none = "no checkpoint was saved before it"
    assert kept_line(None) == none
    assert kept_line(str(tmp_path / "not made")) == none
    (tmp_path / "checkpoints" / "ckpt-0000000004").mkdir(parents=True)  # no state.json
    assert kept_line(str(tmp_path), "the last good checkpoint") == none
    monkeypatch.setattr(signals, "_RUN_FOLDER", [])
    assert signals._kept() == none  # before the run started
    signals._RUN_FOLDER.append(str(tmp_path))
    assert signals._kept("the last one") == none
    monkeypatch.setattr(checkpoint_files, "latest_checkpoint", lambda logdir: ("p", {}))
    assert kept_line(str(tmp_path), "the last good checkpoint") == \
        "the last good checkpoint is kept"
    assert signals._kept() == "the last checkpoint is kept"


# ------------------------------------------------------------------ a user's model
USER_MODELS = '''import keras


def _check(image_size):
    if image_size != 16:
        raise ValueError(f"this model takes 16x16 images, not {image_size}")


def build(num_classes, image_size):
    _check(image_size)
    inputs = keras.Input((image_size, image_size, 3))
    x = keras.layers.GlobalAveragePooling2D()(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


def not_a_model(num_classes, image_size):
    return [num_classes, image_size]


def divides(num_classes, image_size):
    return keras.Model(num_classes / 0)
'''


@pytest.fixture(scope="module")
def user_models(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "mine.py"
    path.write_text(USER_MODELS)
    return path


@pytest.mark.parametrize("function, flags, expected", [
    ("build", ["--dataset=synthetic", "--image_size=32"],
     "raised ValueError at mine.py:6: this model takes 16x16 images, not 32"),
    ("divides", ["--image_size=16"], "raised ZeroDivisionError at mine.py:21: division by zero"),
    ("not_a_model", ["--image_size=16"], "returned list; accepted: a keras.Model"),
])
def test_a_users_model_that_fails_to_build_is_one_line_before_the_run_folder(
        user_models, digits_dir, tmp_path, function, flags, expected):
    logdir = tmp_path / "run"
    done = run([f"--model={user_models}:{function}", f"--data_dir={digits_dir}",
                f"--logdir={logdir}", "--epochs=1", "--steps_per_epoch=2", *flags])
    assert one_error(done) == f"error: --model={user_models}:{function} {expected}"
    assert not logdir.exists()


def test_a_users_model_is_built_for_a_folders_classes_and_size_at_the_door(
        user_models, tmp_path):
    """The folder's classes (3, counted from its folders) and its images' own size: a
    model refusing that size fails at the door; with --image_size=16 it trains."""
    from image_files import write_folder_dataset

    from preprocessing.datasets import known_shape
    from preprocessing.spec import InputSpec

    root = tmp_path / "pets"
    write_folder_dataset(str(root), corrupt=0)
    assert known_shape(f"folder:{root}", InputSpec(str(tmp_path), image_size=16)) == (3, 16)
    assert known_shape("digits", InputSpec(str(tmp_path), image_size=0)) == (10, 16)
    assert known_shape("tfds:mnist", InputSpec(str(tmp_path), image_size=0)) is None
    done = run([f"--model={user_models}:build", f"--dataset=folder:{root}",
                f"--logdir={tmp_path / 'run'}", "--epochs=1", "--steps_per_epoch=1"])
    line = one_error(done)
    assert line.startswith(f"error: --model={user_models}:build raised ValueError at "
                           "mine.py:6: this model takes 16x16 images, not "), line
    assert not (tmp_path / "run").exists()
