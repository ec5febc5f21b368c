"""`--benchmark=probe` (app/modes/probe.py) in-process: the timed steps' budget and the
machine's state (NVML through a stand-in with pynvml's functions). A real probe's
figures, against the test's own clock and by hand, and its rerun: tests/test_decide.py,
whose end-to-end decision runs the probes (one probe process fewer for CI).
"""

import os
import types

import pytest

from app.modes import probe

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


def test_the_machine_snapshot_reads_each_gpu_through_nvml():
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
    state = probe.machine_snapshot([0, 3], nvml=fake)
    assert state["cpu_cores"] == len(os.sched_getaffinity(0))
    assert state["gpus"] == [
        {"index": 0, "temperature_c": 41, "sm_clock_mhz": 1755, "max_sm_clock_mhz": 1980,
         "power_limit_w": 700.0, "other_processes": 1},
        {"index": 3, "temperature_c": 44, "sm_clock_mhz": 1755, "max_sm_clock_mhz": 1980,
         "other_processes": 1}]
    broken = types.SimpleNamespace(nvmlInit=refused)
    assert "gpus" not in probe.machine_snapshot([0], nvml=broken)
    assert "gpus" not in probe.machine_snapshot(None)
