"""Where one line is promised, one line comes, and what the app writes is strict JSON
and honest figures. Real processes, real files."""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys

import pytest

from conftest import PATIENCE_SECONDS, ROOT, error_lines, tiny_flags
from image_files import write_folder_dataset
from processes import run, strict_json, strict_loads

from callbacks.records.durable import dumps, write_json_atomic


def one_error(done, code=2):
    """The single `error:` line of a run that was expected to end with `code`."""
    errors = error_lines(done.stderr)
    assert done.returncode == code and len(errors) == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "FATAL" not in done.stderr
    return errors[0]


def test_torn_tfds_metadata_and_a_huge_batch_are_one_line(tmp_path):
    info = tmp_path / "data" / "tiny_shapes" / "1.0.0"
    info.mkdir(parents=True)
    (info / "dataset_info.json").write_text('{"name": "tiny_sh')  # torn
    done = run(["--dataset=tfds:tiny_shapes", f"--data_dir={tmp_path / 'data'}",
                f"--logdir={tmp_path / 'a'}"])
    assert f"{info}: its dataset metadata cannot be read" in one_error(done)
    done = run(["--dataset=synthetic", "--image_size=32", "--global_batch_size=1000000000",
                "--steps_per_epoch=5", f"--logdir={tmp_path / 'b'}"])
    assert "one batch of 1,000,000,000 images of 32x32 needs at least" in one_error(done)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def report(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"), *args],
                          capture_output=True, text=True, timeout=PATIENCE_SECONDS)


def test_the_report_says_in_one_line_when_out_is_a_file_or_a_summary_is_not_one(tmp_path):
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    (run_folder / "summary.json").write_text(json.dumps({"backend": "jax"}))
    (tmp_path / "a_file").write_text("x")
    done = report(str(run_folder), "--out", str(tmp_path / "a_file"))
    assert f"--out={tmp_path / 'a_file'} is a file" in one_error(done)
    (run_folder / "summary.json").write_text("[]")
    done = report(str(run_folder), "--out", str(tmp_path / "out"))
    assert "no run to report: the 1 folder(s) given were skipped" in one_error(done)
    assert f"warning: skipped {run_folder}: summary.json holds a list, not an object" in (
        done.stderr)


def test_absl_flag_errors_are_one_error_line_and_exit_2(tmp_path):
    flagfile = tmp_path / "run.flags"
    flagfile.write_text("--epochs=1\n--no_such_flag=3\n")
    cases = [([f"--flagfile={tmp_path / 'missing.flags'}"], "missing.flags"),
             ([f"--flagfile={flagfile}"], "no_such_flag"),
             (["--verbose=3"], "--verbose")]
    for args, named in cases:
        assert named in one_error(run(args + [f"--logdir={tmp_path / 'x'}"]))
    assert not (tmp_path / "x").exists()


def test_an_infinite_price_is_refused_and_every_json_written_is_strict(digits_dir, tmp_path):
    done = run(tiny_flags(digits_dir, tmp_path / "inf", "--price_per_hour_usd=inf"))
    assert "--price_per_hour_usd=inf must be a finite number" in one_error(done)
    assert dumps({"a": math.inf, "b": [math.nan, 1.5]}) == '{"a": null, "b": [null, 1.5]}'
    write_json_atomic(str(tmp_path / "x.json"), {"cost_usd": math.inf})
    assert strict_json(tmp_path / "x.json") == {"cost_usd": None}
    logdir = tmp_path / "run"
    assert run(tiny_flags(digits_dir, logdir, "--peak_tflops_per_device=1e-12")).returncode == 0
    written = [os.path.join(base, name) for base, _, names in os.walk(logdir)
               for name in names if name.endswith(".json")]
    assert len(written) >= 5  # config, summary, billing, two checkpoints' state
    for path in written:
        strict_json(path)
    for line in open(logdir / "metrics.jsonl"):
        strict_loads(line)


def test_corrupt_images_are_counted_once_each_and_an_unreadable_validation_has_no_top1(
        tmp_path):
    root = tmp_path / "animals"
    write_folder_dataset(str(root), corrupt=15)  # 15 files with the same broken bytes
    os.symlink(tmp_path / "nowhere.jpg", root / "train" / "cat" / "dangling.jpg")
    (root / "train" / "dog" / "a_folder.jpg").mkdir()
    for folder, _, names in os.walk(root / "validation"):  # 12 images, none decodes
        for name in names:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(b"not an image")
    logdir = tmp_path / "run"
    done = run([f"--dataset=folder:{root}", f"--logdir={logdir}", "--image_size=16",
                "--global_batch_size=8", "--epochs=3", "--seed=1", "--verbose=0"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert (f"warning: {root}/validation: none of its 12 image files decodes; top-1 is not "
            "measured") in done.stderr
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["corrupt_images_skipped"] == 15 + 2 + 12
    assert summary["val_top1"] is None and summary["best_val_top1"] is None
    assert "top-1: no validation" in done.stdout
    # tf.data's libjpeg says "Input file read error" with no file name
    # for each; the user reads one warning that points at the closing line naming them.
    assert not re.search(r"^(Input file read error|Premature end of JPEG)", done.stderr,
                         re.MULTILINE), done.stderr[-2000:]
    assert done.stderr.count("warning: libjpeg: ") == 1, done.stderr[-2000:]
    assert "the closing lines name the images skipped" in done.stderr
    assert "skipped 29 images that could not be read or decoded: " in done.stdout


def test_a_nan_before_any_checkpoint_says_so_and_a_profile_past_the_end_is_warned(
        digits_dir, tmp_path):
    logdir = tmp_path / "nan"
    done = run(tiny_flags(digits_dir, logdir, "--base_learning_rate=1e37",
                          "--steps_per_epoch=12", "--profile_steps=900,901"))
    line = one_error(done, code=76)
    assert line.endswith("; stopped, no checkpoint was saved before it"), line
    assert ("warning: --profile_steps=900,901 starts after the run's last step (24); no "
            "trace will be written") in done.stderr
    assert not (logdir / "checkpoints").exists() or not os.listdir(logdir / "checkpoints")


def test_a_batch_larger_than_the_folder_names_the_flags_the_user_set(tmp_path):
    """The automatic steps per execution (0) is not named as if the
    user had set it; the line says what fits. Then a batch that trains one step an
    epoch and leaves images unused says so up front, with a batch that would not."""
    root = tmp_path / "small"
    write_folder_dataset(str(root), per_class=3, corrupt=0)  # 9 training images
    done = run([f"--dataset=folder:{root}", f"--logdir={tmp_path / 'a'}",
                "--global_batch_size=64", "--image_size=16"])
    assert one_error(done) == (
        f"error: --global_batch_size=64 is more than the 9 training images of folder:{root}; "
        "accepted: at most 9 images a call (e.g. --global_batch_size=8), or "
        "--steps_per_epoch to repeat the images")
    assert not (tmp_path / "a").exists()
    # with 4 steps a call set by the user, the batch suggested fits 4 steps of it
    from app.engine import data
    from flags import Config

    config = Config(dataset=f"folder:{root}", global_batch_size=64, steps_per_execution=4,
                    logdir="x")
    with pytest.raises(data.DataError) as error:
        data.steps_for(config, 9)
    assert str(error.value).startswith(
        "--global_batch_size=64 x --steps_per_execution=4 (256 images a call) is more than "
        "the 9 training images"), error.value
    assert "(e.g. --global_batch_size=2)" in str(error.value)
    assert data.steps_for(dataclasses.replace(config, global_batch_size=2), 9) == 4
    root = tmp_path / "larger"
    write_folder_dataset(str(root), per_class=12, corrupt=0)  # 36 training images
    done = run([f"--dataset=folder:{root}", f"--logdir={tmp_path / 'b'}",
                "--global_batch_size=32", "--image_size=16", "--epochs=1", "--verbose=0"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("note: --global_batch_size=32 trains 1 step(s) an epoch on 32 of the 36 "
            "training images (4 unused each epoch); --global_batch_size=4 would take 9 "
            "steps and leave 0") in done.stderr.splitlines()
