"""Flags and files at the door (and --list_machines): every number
flag has a range, flagfiles are text without cycles, a user's model is built before
the run folder exists, and each mistake is one `error:` line, exit 2, nothing written.
Real processes where the door is the process. (A Ctrl-C before the run:
tests/test_ctrl_c_at_start.py.)"""

import os
import time

import pytest
from conftest import error_lines
from processes import run

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
    """Written bare in a flagfile, as --help shows it, it took the next
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
    """--pricing=spot on the CPU, whose catalog row sells on-demand only,
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
