"""`--benchmark=probe` (app/modes/probe.py): a real `python app/main.py` on the digits,
its figures checked against the test's own clock and by hand; the timed steps' budget
and the machine's state (NVML through a stand-in with pynvml's functions) in-process.
"""

import json
import os
import subprocess
import sys
import time
import types

import pytest
from conftest import PATIENCE_SECONDS, ROOT

from app.modes import probe

FLAGS = ("--image_size=8", "--epochs=2", "--steps_per_epoch=8", "--seed=3")


@pytest.fixture(scope="module")
def probed(digits_dir, tmp_path_factory):
    """One probe, its lines stamped by the test's clock as they arrive."""
    logdir = tmp_path_factory.mktemp("probe") / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("KERAS_BACKEND", None)
    began = time.time()
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "app", "main.py"),
                                "--benchmark=probe", f"--data_dir={digits_dir}",
                                f"--logdir={logdir}", *FLAGS], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stamped = [(time.time() - began, line.rstrip("\n")) for line in process.stdout]
    stderr = process.stderr.read()
    assert process.wait(timeout=PATIENCE_SECONDS) == 0, stderr[-3000:]
    wall = time.time() - began
    summary = json.loads((logdir / "probe.json").read_text())
    return stamped, wall, summary, logdir


def test_the_probe_writes_what_it_measured(probed):
    _, _, summary, logdir = probed
    assert json.loads((logdir / "summary.json").read_text()) == summary
    assert summary["mode"] == "probe" and summary["status"] == "completed"
    assert (summary["model"], summary["dataset"], summary["image_size"],
            summary["global_batch_size"], summary["precision"]) == (
        "small_resnet", "digits", 8, 64, "float32")
    assert summary["timed_steps"] == 8  # --steps_per_epoch: the steps timed
    assert summary["steps_per_epoch"] == 8 and summary["train_examples"] > 1000
    assert summary["images_per_sec"] > 0 and summary["step_time_ms"] > 0
    parts = summary["breakdown"]["parts"]
    assert summary["breakdown"]["step_ms"] > 0 and parts
    assert os.listdir(logdir / "plugins" / "profile")  # the trace, for TensorBoard


def test_its_times_agree_with_the_tests_clock(probed):
    """Start-up runs from the process's start to the compiled step: after the first
    line (printed before the model is built), before the process ended; the start-up
    and the measuring fit in the process's wall time; the timed images at the rate
    take no longer than the measuring did."""
    stamped, wall, summary, _ = probed
    first = next(t for t, line in stamped if line.startswith("[probe] small_resnet on digits"))
    assert first < summary["startup_seconds"] < wall
    assert summary["startup_seconds"] == pytest.approx(
        summary["before_compile_seconds"] + summary["compile_and_warmup_seconds"], abs=0.02)
    assert summary["startup_seconds"] + summary["measuring_seconds"] < wall
    timed = summary["timed_steps"] * summary["global_batch_size"] / summary["images_per_sec"]
    assert timed < summary["measuring_seconds"]
    assert summary["billed_seconds"] < wall


def test_its_lines_and_price_by_hand(probed):
    stamped, _, summary, _ = probed
    lines = [line for _, line in stamped]
    rate = summary["images_per_sec"]
    assert f"probe: {rate:,.1f} images/sec ({rate:,.1f} per device x 1) over 8 timed steps " \
           "at global batch 64" in lines
    assert (f"start-up: {summary['startup_seconds']:,.1f} s from the process's start to the "
            f"compiled step ({summary['compile_and_warmup_seconds']:,.1f} s of it compiling "
            "and warming up)") in lines
    price = summary["price_per_hour_usd"]
    assert summary["machine"] == "gcp-n2-standard-4" and price == pytest.approx(0.194236)
    assert summary["cost_usd"] == pytest.approx(summary["billed_seconds"] / 3600 * price,
                                                abs=1e-6)
    assert f"price: gcp-n2-standard-4: $0.1942/h on demand; this probe " \
           f"${summary['cost_usd']:,.4f}" in lines
    state = summary["machine_state"]
    assert state["before"]["cpu_cores"] == len(os.sched_getaffinity(0))
    assert 0 <= state["after"]["load_average_1m"] < 1e4 and "gpus" not in state["after"]
    assert any(line.startswith("breakdown: step ") for line in lines)
    assert any(line.startswith("decide: ") and "--target=TOP1" in line for line in lines)


def test_the_same_command_again_says_it_is_complete(probed, digits_dir):
    stamped, _, summary, logdir = probed
    done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "main.py"),
                           "--benchmark=probe", f"--data_dir={digits_dir}",
                           f"--logdir={logdir}", *FLAGS], cwd=ROOT, capture_output=True,
                          text=True, timeout=PATIENCE_SECONDS)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"probe is complete: {logdir} holds its probe.json")
    assert lines[1:] == probe.closing_lines(summary).splitlines()
    assert json.loads((logdir / "probe.json").read_text()) == summary  # kept as it is


@pytest.mark.parametrize("step_seconds, spe, asked, steps", [
    (None, 1, 0, probe.MIN_EXECUTIONS),  # no step timed: the fewest calls
    (0.1, 1, 0, 300),  # 30 s of 0.1 s steps
    (0.1, 4, 0, 300),  # 75 calls of 4
    (20.0, 1, 0, probe.MIN_EXECUTIONS),  # a slow step: still 4 calls
    (1e-6, 2, 0, probe.MAX_STEPS),  # a fast one: at most MAX_STEPS
    (0.1, 1, 12, 12),  # --steps_per_epoch wins
])
def test_the_timed_steps_fill_the_budget_in_whole_calls(step_seconds, spe, asked, steps):
    assert probe.timed_steps(step_seconds, spe, asked) == steps
    assert steps % spe == 0


def test_the_machine_state_reads_each_gpu_through_nvml():
    """A stand-in with pynvml's functions: each GPU's temperature, clocks, power limit
    and the processes that are not this one; a figure NVML refuses is left out."""
    def refused(*_):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetTemperature=lambda h, _: 41 + h,
        nvmlDeviceGetClockInfo=lambda h, _: 1755,
        nvmlDeviceGetMaxClockInfo=lambda h, _: 1980,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000 if h == 0 else refused(),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            types.SimpleNamespace(pid=os.getpid()), types.SimpleNamespace(pid=1)])
    state = probe.machine_state([0, 3], nvml=fake)
    assert state["cpu_cores"] == len(os.sched_getaffinity(0))
    assert state["gpus"] == [
        {"index": 0, "temperature_c": 41, "sm_clock_mhz": 1755, "max_sm_clock_mhz": 1980,
         "power_limit_w": 700.0, "other_processes": 1},
        {"index": 3, "temperature_c": 44, "sm_clock_mhz": 1755, "max_sm_clock_mhz": 1980,
         "other_processes": 1}]
    broken = types.SimpleNamespace(nvmlInit=refused)
    assert "gpus" not in probe.machine_state([0], nvml=broken)
    assert "gpus" not in probe.machine_state(None)
