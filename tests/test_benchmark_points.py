"""A benchmark point as a user meets it (sweep and ladder, real processes on the CPU):
--repeats' windows with their median and spread, computed again by hand from their
step series; progress while a point would be silent, to a pipe and on a terminal; a
rerun after a SIGKILL that writes nothing twice; a point on other data refused in one
line; edited sweep.json rows measured again, with no traceback; and the effort ladder
not building on a rung that loses.

The model sleeps a fixed time a step (tests/sleepy_model.py), so its figures are known
beforehand and a point costs about a second past its compile.
"""

import json
import os
import pty
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import PATIENCE_SECONDS, ROOT, error_lines
from processes import MAIN, background, env_for, read_terminal, run, strict_json
from tensorboard_server import hparams_sessions

from callbacks.records import events

NO_TF = os.path.join(os.path.dirname(__file__), "no_tensorflow")
SLEEPY = "--model=tests/sleepy_model.py:make_model"
COMMON = ["--backend=jax", SLEEPY, "--dataset=synthetic", "--image_size=8"]
STEP_SECONDS = 0.05  # tests/sleepy_model.py's SECONDS


def stamped(args, env=None) -> tuple[int, list, str]:
    """Runs the app with stdout a pipe; (exit code, [(arrival time, line)], stderr)."""
    with tempfile.TemporaryFile("w+") as err:  # not a pipe: nobody reads it meanwhile
        process = subprocess.Popen([sys.executable, MAIN, *args], cwd=ROOT,
                                   env=env_for({"PYTHONPATH": NO_TF, **(env or {})}),
                                   stdout=subprocess.PIPE, stderr=err, text=True)
        lines = [(time.monotonic(), line.rstrip("\n")) for line in process.stdout]
        code = process.wait(timeout=PATIENCE_SECONDS)
        err.seek(0)
        return code, lines, err.read()


def test_repeats_give_windows_whose_median_and_spread_are_their_step_series_by_hand(
        tmp_path):
    """--repeats=3: three timed windows a point, each with its step series; each
    window's images/sec is its batch over its mean step time, the point's is their
    median and its spread their min-max (by hand, here), in sweep.json, the table,
    the point's line and its HParams columns. With progress lines every second to a
    pipe, no gap between two lines of the sweep is long (30 s by default)."""
    logdir = tmp_path / "repeats"
    code, lines, stderr = stamped([*COMMON, "--sweep_batch_sizes=16", "--steps_per_epoch=6",
                                   "--repeats=3", f"--logdir={logdir}"],
                                  env={"BENCH_PROGRESS_LINE_SECONDS": "1"})
    assert code == 0, stderr[-3000:]
    text = "\n".join(line for _, line in lines)
    result = strict_json(logdir / "sweep.json")
    assert result["repeats"] == 3 and result["spread"] == "min-max"
    for row in result["sweep"]:
        batch = row["global_batch_size"]
        assert row["status"] == "ok" and row["repeats"] == 3 and len(row["windows"]) == 3
        by_hand = []
        for window in row["windows"]:
            assert window["steps_per_call"] == 1 and len(window["step_ms"]) >= 2
            rate = batch * 1e3 / (sum(window["step_ms"]) / len(window["step_ms"]))
            assert rate == pytest.approx(window["images_per_sec"], rel=1e-3)
            assert 0.5 * batch / STEP_SECONDS < rate < 1.05 * batch / STEP_SECONDS
            by_hand.append(rate)
        by_hand.sort()
        assert row["images_per_sec"] == pytest.approx(by_hand[1], rel=1e-3)
        assert row["images_per_sec_min"] == pytest.approx(by_hand[0], rel=1e-3)
        assert row["images_per_sec_max"] == pytest.approx(by_hand[2], rel=1e-3)
        assert (f"[sweep] global batch {batch}: {row['images_per_sec']:,.1f} images/sec "
                f"(median of 3, min-max {row['images_per_sec_min']:,.1f}-"
                f"{row['images_per_sec_max']:,.1f} (") in text
        assert re.search(rf"^ +{batch} +{batch} +{row['images_per_sec']:,.1f} +"
                         rf"{row['images_per_sec_min']:,.1f}-{row['images_per_sec_max']:,.1f} ",
                         text, re.MULTILINE), text
        _, metrics = hparams_sessions(logdir)[f"points/{row['point']}"]
        for key in ("images_per_sec", "images_per_sec_min", "images_per_sec_max"):
            assert metrics[f"run/{key}"] == pytest.approx(row[key])
    header = next(line for _, line in lines if line.startswith("global batch"))
    assert header.count("per device") == 1  # it was there twice
    assert "global batch per device  images/sec     min-max" in header
    assert "each point's median of 3 timed windows (each after a fresh compile)" in text
    # progress: the phases were said, and the sweep was never silent for long
    assert re.search(r"^\[sweep\] global batch \d+: (compiling|timing window) \d/3", text,
                     re.MULTILINE), text
    times = [t for t, line in lines]
    first = next(i for i, (_, line) in enumerate(lines) if line.startswith("[sweep] tests/"))
    last = next(i for i, (_, line) in enumerate(lines) if "global batch per device" in line)
    gaps = [b - a for a, b in zip(times[first:last], times[first + 1:last + 1])]
    assert max(gaps) < 10, (max(gaps), text)


def on_a_terminal(args, env=None) -> tuple[int, str]:
    """The app with stdout on a pseudo-terminal (stderr to a pipe); its exit code and
    what the terminal received."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, MAIN, *args], cwd=ROOT, stdout=follower,
                               stderr=subprocess.DEVNULL,
                               env=env_for({"PYTHONPATH": NO_TF, **(env or {})}))
    os.close(follower)
    output = read_terminal(process, leader)
    return process.wait(timeout=PATIENCE_SECONDS), output.decode()


def test_a_point_on_a_terminal_redraws_its_line_then_its_result_takes_its_place(tmp_path):
    code, text = on_a_terminal([*COMMON, "--sweep_batch_sizes=8", "--steps_per_epoch=40",
                                "--verbose=auto", f"--logdir={tmp_path / 'tty'}"])
    assert code == 0, text[-3000:]
    assert re.search(r"\r\[sweep\] global batch 8: timing window, step \d+/40, \d+ s", text), (
        text[-3000:])
    # the line is cleared and the point's result is written in its place
    assert re.search(r"\r +\r\[sweep\] global batch 8: [\d,.]+ images/sec", text), text[-3000:]


def breakdown_points(folder) -> list:
    """(tag, step) of every step_breakdown scalar in a point's folder, as read back."""
    return [(v.tag, e.step) for where, _, _ in os.walk(folder)
            for path in events.event_files(where)
            for e in events.read_events(path) for v in e.summary.value
            if v.tag.startswith("step_breakdown/")]


def test_a_sigkill_after_a_point_printed_writes_nothing_twice_and_edited_rows_are_redone(
        tmp_path):
    """SIGKILL just after the first point printed its result (its row
    not kept yet), then the same command: the point is measured again into an empty
    folder, so its step breakdown is there once at step 3, not twice. Then the rows
    of the finished sweep edited (an images/sec that is text with markup, another
    1e308 with no step time), then the same command: one warning each, both measured
    again, no traceback."""
    logdir = tmp_path / "killed"
    args = [*COMMON, "--sweep_batch_sizes=4,8", "--steps_per_epoch=4", f"--logdir={logdir}"]
    traced = {"PYTHONPATH": NO_TF, "BENCH_POINT_TRACE_STEPS": "3"}  # the app's default
    killed = run(args, env={**traced, "BENCH_KILL_AT": "point_printed:1"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert "[sweep] global batch 4: " in killed.stdout
    assert breakdown_points(logdir / "points" / "global_batch_size=4")  # written, unkept
    done = run(args, env=traced)
    assert done.returncode == 0, done.stderr[-3000:]
    for size in (4, 8):
        found = breakdown_points(logdir / "points" / f"global_batch_size={size}")
        assert found and len(found) == len(set(found)), found
        assert {step for _, step in found} == {3}

    record = strict_json(logdir / "sweep.json")
    record["sweep"][0]["images_per_sec"] = "<b>fast</b>"
    record["sweep"][1]["images_per_sec"] = 1e308
    del record["sweep"][1]["step_time_ms"]
    (logdir / "sweep.json").write_text(json.dumps(record))
    again = run(args, env={"PYTHONPATH": NO_TF})
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Traceback" not in again.stderr
    warnings = [line for line in again.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2 and all("it is measured again" in w for w in warnings), warnings
    assert "'images_per_sec' holds str '<b>fast</b>'; accepted: number" in warnings[0]
    assert "[sweep] global batch 4: " in again.stdout and "[sweep] global batch 8: " in \
        again.stdout
    rows = strict_json(logdir / "sweep.json")["sweep"]
    assert all(isinstance(r["images_per_sec"], float) and r["images_per_sec"] < 1e6
               for r in rows)


def test_a_class_added_between_two_attempts_of_a_sweep_is_refused_in_one_line(tmp_path):
    """A sweep on a folder dataset stopped (Ctrl-C) once its first
    point is done; a class is added to the folder; the same command refuses to measure
    the second point on other data than the first's, in one line, and keeps sweep.json."""
    from image_files import class_image, encode, write_folder_dataset

    data = tmp_path / "photos"
    write_folder_dataset(str(data), classes=("cat", "dog", "fox"), per_class=6, corrupt=0)
    logdir = tmp_path / "sweep"
    args = ["--backend=jax", SLEEPY, f"--dataset=folder:{data}", "--image_size=8",
            "--sweep_batch_sizes=4,8", "--steps_per_epoch=4", f"--logdir={logdir}"]
    with background(args, env={"PYTHONPATH": NO_TF}) as first:
        for line in first.stdout:  # the first point's result, then Ctrl-C
            if line.startswith("[sweep] global batch 4: ") and " images/sec" in line:
                first.send_signal(signal.SIGINT)
                break
        assert first.wait(timeout=PATIENCE_SECONDS) == 75
    kept = strict_json(logdir / "sweep.json")
    assert [r["point"] for r in kept["sweep"]] == ["global_batch_size=4"]
    for split in ("train", "validation"):
        (data / split / "elk").mkdir()
        for i in range(4):
            (data / split / "elk" / f"elk_{i}.jpg").write_bytes(encode(class_image("n9", i)))
    refused = run(args, env={"PYTHONPATH": NO_TF})
    assert refused.returncode == 2, refused.stderr[-2000:]
    (line,) = error_lines(refused.stderr)
    assert line == (f"error: --logdir={logdir} holds points measured on other data: 1 class "
                    "folder differs: train/elk (new) (point global_batch_size=4 against "
                    "global_batch_size=8 now); restore that data to resume, or pass --fresh "
                    "to measure every point again"), line
    assert strict_json(logdir / "sweep.json")["sweep"] == kept["sweep"]
    assert kept["sweep"][0]["data_fingerprint"]["kind"] == "files"  # what it checked


@pytest.mark.slow
def test_the_ladder_does_not_build_on_a_rung_that_loses(tmp_path):
    """A model four times slower in mixed bfloat16 (as on a CPU): that
    rung is reported, marked not built on, and the next rung starts from float32; the
    largest batch kept is the fastest one tried; the total is the best rung's."""
    logdir = tmp_path / "ladder"
    done = run(["--backend=jax", "--model=tests/sleepy_model.py:make_model_slow_in_bfloat16",
                "--dataset=synthetic", "--image_size=8", "--benchmark=ladder",
                "--global_batch_size=4", "--steps_per_epoch=8", f"--logdir={logdir}"],
               env={"PYTHONPATH": NO_TF})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["rung"]: r for r in strict_json(logdir / "ladder.json")["ladder"]}
    start, bf16, batch = rows["float32"], rows["mixed_bfloat16"], rows["largest_batch"]
    assert bf16["images_per_sec"] < 0.5 * start["images_per_sec"]  # 0.2 s a step, not 0.05
    assert bf16["kept"] is False and bf16["built_on"] == "float32"
    assert "slower than float32: not built on" in done.stdout
    assert batch["built_on"] == "float32" and batch["settings"]["precision"] == "float32"
    fastest = max(batch["tried"], key=lambda t: (t["images_per_sec"], t["global_batch_size"]))
    assert batch["settings"]["global_batch_size"] == fastest["global_batch_size"]
    assert batch["gain_over_previous"] == round(batch["images_per_sec"] /
                                                start["images_per_sec"], 3)
    best = max((r for r in rows.values() if r.get("kept")), key=lambda r: r["images_per_sec"])
    result = strict_json(logdir / "ladder.json")
    assert result["best_rung"] == best["rung"]
    assert result["total_gain"] == best["gain_over_first"]


def test_the_input_benchmark_times_pipeline_and_model_repeats_times(digits_dir, tmp_path):
    """--benchmark=input --repeats=2: the pipeline and the model each timed twice (the
    model after a fresh compile each time), each figure the median with its min-max."""
    done = run(["--benchmark=input", "--backend=jax", SLEEPY, "--dataset=digits",
                f"--data_dir={digits_dir}", "--input_pipeline=grain", "--image_size=8",
                "--global_batch_size=16", "--steps_per_epoch=5", "--repeats=2",
                f"--logdir={tmp_path / 'input'}"], env={"PYTHONPATH": NO_TF})
    assert done.returncode == 0, done.stderr[-3000:]
    result = strict_json(tmp_path / "input" / "input_benchmark.json")
    assert result["repeats"] == 2 and len(result["model_windows"]) == 2
    for key in ("input", "model"):
        low, middle, high = (result[f"{key}_images_per_sec{end}"] for end in
                             ("_min", "", "_max"))
        assert low <= middle <= high
    rates = sorted(w["images_per_sec"] for w in result["model_windows"])
    assert result["model_images_per_sec"] == pytest.approx(sum(rates) / 2, rel=1e-2)
    assert "(median of 2, min-max " in done.stdout
