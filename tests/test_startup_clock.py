"""The start-up timeline of a real run, against clocks of the test's own.

The app's parts (summary.json's `startup`) run from its process's start to the end of
its first training call. The test reads the child's start from outside
(/proc/<pid>/stat, while it runs, against the parent's clock just before it spawned
it) and the first call's end from another writer (the TensorBoard event the metrics
sink writes for the first training step, --log_every_steps=1): the parts add up to
the time between the two within 5%, on both backends."""

import json
import os
import subprocess
import sys
import time

import pytest

from callbacks.records import events
from conftest import PATIENCE_SECONDS, ROOT, tiny_flags
from step_events import step_times

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")
# JAX's backend starts while Keras imports (cut devices_beside_keras); TensorFlow's
# devices are found first, and no step is compiled beside the start.
JAX_PARTS = ["interpreter", "app_imports_and_flags", "checks", "framework_import",
             "devices_and_keras_import", "model_check_and_price", "mode_imports", "data",
             "run_folder", "model_build", "steps_trace_and_lower", "flop_count",
             "resume_and_callbacks", "compile_wait", "fit_setup", "first_step"]
TENSORFLOW_PARTS = ["interpreter", "app_imports_and_flags", "checks", "framework_import",
                    "devices", "keras_import", "model_check_and_price", "mode_imports",
                    "data", "run_folder", "model_build", "flop_count",
                    "resume_and_callbacks", "fit_setup", "first_step"]


def _started_at(pid: int) -> float:
    """The process's start by this test's clock: /proc's start in ticks since boot."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        after_name = f.read().rsplit(b")", 1)[1].split()
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - since_boot + int(after_name[19]) / os.sysconf("SC_CLK_TCK")


def _first_step_event(logdir: str) -> float:
    """Wall time of the metrics sink's event for the run's first training step."""
    return min(step_times(logdir).items())[1]


def _timed_run(backend: str, digits_dir, tmp_path) -> tuple[dict, float, float, str]:
    logdir = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla")}  # cold: every program compiles
    env.pop("KERAS_BACKEND", None)
    if backend == "jax":
        env["PYTHONPATH"] = NO_TF
    spawned = time.time()
    child = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "app", "main.py"), f"--backend={backend}",
         *tiny_flags(digits_dir, logdir, "--log_every_steps=1", "--input_pipeline=device")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    started = _started_at(child.pid)
    stdout, stderr = child.communicate(timeout=PATIENCE_SECONDS)
    assert child.returncode == 0, stderr[-3000:]
    assert spawned - 0.011 <= started <= spawned + 1.0  # /proc: 10 ms ticks, rounded down
    summary = json.loads((logdir / "summary.json").read_text())
    return summary, started, _first_step_event(str(logdir)), stdout


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_the_timeline_adds_up_to_the_first_step_by_the_processs_own_clock(
        backend, digits_dir, tmp_path):
    summary, started, first_step, stdout = _timed_run(backend, digits_dir, tmp_path)
    block = summary["startup"]
    to_first_step = first_step - started
    total = sum(part["seconds"] for part in block["parts"])
    assert abs(total - to_first_step) <= 0.05 * to_first_step, (total, to_first_step, block)
    assert block["seconds_to_first_step"] == pytest.approx(total, abs=0.005)
    assert block["from"] == "process start (/proc/self/stat)"
    assert abs(block["process_started_at"] - started) < 0.02
    names = [part["part"] for part in block["parts"]]
    assert len(names) == len(set(names)) and all(p["seconds"] >= 0 for p in block["parts"])
    assert block["share_of_run"] == pytest.approx(to_first_step / block["run_seconds"], abs=0.05)
    assert ("start-up: " in stdout) == (block["share_of_run"] > 0.5)
    card = [v for path in events.event_files(os.path.join(summary["logdir"], "train"))
            for e in events.read_events(path) for v in e.summary.value if v.tag == "startup"]
    assert len(card) == 1 and b"to the first step" in card[0].tensor.string_val[0]
    if backend == "tensorflow":
        assert names == TENSORFLOW_PARTS
        assert block["programs"] == [] and "first_step holds" in block["note"]
        return
    assert names == JAX_PARTS
    for part in block["parts"]:  # JAX's own clock: the main thread's share of each part
        assert 0 <= part["program_seconds"] <= part["seconds"] + 0.001, part
    programs = {p["program"]: p for p in block["programs"]}
    for step in ("train_step", "test_step"):  # compiled beside the start, from cold, once
        assert programs[step]["compiles"] == 1 and programs[step]["traces"] == 1, programs
        assert [t for t in programs[step]["threads"] if t.startswith("precompile-")], programs
    assert block["programs_compiled"] >= 2 and block["compile_seconds"] > 0


def test_an_unknown_cut_is_one_line_before_anything_is_touched(tmp_path):
    from conftest import error_lines, run_cli

    done = run_cli("--epochs=1", f"--logdir={tmp_path / 'run'}",
                   env={"BENCH_STARTUP_CUTS": "all,-no_such_cut"})
    assert done.returncode == 2
    (line,) = error_lines(done.stderr)
    assert line.startswith("error: BENCH_STARTUP_CUTS='all,-no_such_cut': 'no_such_cut' is "
                           "not a start-up cut; accepted: all, none, and NAME or -NAME")
    assert "fit_takes_compiled_steps" in line and not (tmp_path / "run").exists()
