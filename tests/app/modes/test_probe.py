"""`--benchmark=probe` (app/modes/probe.py) in-process: the timed steps' budget and the
machine's state (NVML through a stand-in with pynvml's functions). A real probe's
figures, against the test's own clock and by hand, and its rerun: tests/test_decide.py,
whose end-to-end decision runs the probes (one probe process fewer for CI).
"""

import os
import types

import pytest

from app.modes import probe

@pytest.mark.parametrize("step_seconds, spe, asked, windows, steps", [
    (None, 1, 0, 1, probe.MIN_EXECUTIONS),  # no step timed: the fewest calls
    (0.1, 1, 0, 1, 300),  # 30 s of 0.1 s steps
    (0.1, 4, 0, 1, 300),  # 75 calls of 4
    (0.1, 1, 0, 3, 100),  # three windows share the 30 s
    (0.1, 1, 0, 10, 80),  # ten: each at least its floor of 8 s
    (20.0, 1, 0, 1, probe.MIN_EXECUTIONS),  # a slow step: still 4 calls
    (1e-6, 2, 0, 1, probe.MAX_STEPS),  # a fast one: at most MAX_STEPS
    (0.1, 1, 90, 3, 90),  # --steps_per_epoch, where fewer than the share
    (0.1, 1, 500, 3, 100),  # a job's long epoch: the probe's share of its minute
    (0.1, 1, 12, 3, 80),  # a 50-step probe read 1.5x its job's rate: the floor wins
])
def test_the_timed_steps_fill_the_budget_in_whole_calls(step_seconds, spe, asked, windows,
                                                        steps):
    assert probe.timed_steps(step_seconds, spe, asked, windows) == steps
    assert steps % spe == 0


@pytest.mark.parametrize("cache, fresh, cold, said", [
    ("cold", None, 10.0, "measured"),  # its own start was cold: as measured
    ("none", 4.0, 10.0, "measured"),  # TensorFlow keeps no compiled step
    # warm: 10 s less its 1 s of compiles read from the cache plus 5 s compiled afresh
    ("warm", 5.0, 14.0, "estimated: the warm start-up less its compiles read from the cache "
     "(1.0 s) plus the same compiled afresh (5.0 s)"),
    ("warm", None, None, "unknown: the cache was warm and no window compiled afresh "
     "(--repeats=1)"),
])
def test_the_cold_start_up_is_measured_or_estimated_by_hand(cache, fresh, cold, said):
    out = probe.cold_startup(10.0, cache, 1.0, fresh)
    assert out == {"compile_cache": cache, "startup_cold_seconds": cold,
                   "startup_cold_from": said}


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
