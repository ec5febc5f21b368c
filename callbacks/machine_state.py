"""The machine's state through the timed window: clocks, power, heat, throttling, neighbours.

The same model and command gave 27% apart on two H100s of one kind (XLA's autotuner's
kernel choice, as it turned out: benchmarks/results/2026-12-06-h100-autotune-spread.json); a
reader of the figure must be able to tell a slow machine from a slow program. So
each GPU's SM and memory clocks, board power, temperature, NVML's clock throttle
reasons and the other processes on it are sampled by a background thread a few
times a second through each epoch, and the samples inside the throughput's window
(callbacks/figures/window.py: after the warm-up, to the epoch's last step; no
evaluation) are summed. The thread calls NVML (host-side driver queries, no device
sync); the batch hook only appends a mark. `summary()` gives, per device, the
clocks' mean and lowest, power's mean and highest, temperature's, each throttle
reason's share of the samples and the other processes seen.

The readers are plain functions (`read_sample`): `nvml_sampler` makes them from
NVML (nvidia-ml-py), as callbacks/energy.py does; tests hand in a fake NVML.
"""

from __future__ import annotations

import os
import threading
import time

import keras

from callbacks.figures.window import steady_window
from callbacks.sampling import Sampler
from callbacks.records.state_records import THROTTLE_REASONS

FIGURES = ("sm_clock_mhz", "memory_clock_mhz", "power_watts", "temperature_c")


def reason_names(mask: int) -> list[str]:
    """The names of the reasons set in an NVML throttle-reason bitmask (unknown bits
    as "bit_0x..")."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return names


class _Device:
    """One device's sums over the samples kept: they add up across epochs."""

    def __init__(self):
        self.samples = 0
        self.sums = {name: 0.0 for name in FIGURES}
        self.read = {name: 0 for name in FIGURES}  # samples in which each figure was read
        self.low = {name: None for name in FIGURES}
        self.high = {name: None for name in FIGURES}
        self.reasons: dict[str, int] = {}
        self.reasons_read = 0
        self.others: set[int] = set()

    def add(self, sample: dict) -> None:
        self.samples += 1
        for name in FIGURES:
            value = sample.get(name)
            if value is None:
                continue
            self.sums[name] += value
            self.read[name] += 1
            self.low[name] = value if self.low[name] is None else min(self.low[name], value)
            self.high[name] = value if self.high[name] is None else max(self.high[name], value)
        mask = sample.get("throttle_reasons")
        if mask is not None:
            self.reasons_read += 1
            for name in reason_names(mask):
                self.reasons[name] = self.reasons.get(name, 0) + 1
        self.others.update(sample.get("other_processes") or ())

    def summary(self) -> dict:
        out = {"samples": self.samples}
        for name in FIGURES:
            if self.read[name]:
                out[name] = {"mean": round(self.sums[name] / self.read[name], 2),
                             "min": self.low[name], "max": self.high[name]}
        if self.reasons_read:
            out["throttle_share"] = {name: round(count / self.reasons_read, 4)
                                     for name, count in sorted(self.reasons.items())}
        out["other_processes"] = sorted(self.others)
        return out


class MachineState(keras.callbacks.Callback):
    """Samples each device's state through every epoch; keeps the timed window's.

    Public attributes: `devices` (one _Device of sums each), `windows` (the epochs
    sampled: epoch, start_unix, end_unix, seconds, samples), `sample_seconds` (the
    readers' own time, all samples: what the thread spent), `summary()` for
    summary.json.

    Args:
        read_sample: fn() -> one dict per device: sm_clock_mhz, memory_clock_mhz,
            power_watts, temperature_c, throttle_reasons (NVML's bitmask) and
            other_processes (pids), each None where unread, e.g. `nvml_sampler()`.
        interval_seconds: time between samples.
        warmup_steps: steps of the first epoch left out; 0 = automatic (as the
            throughput callback).
    """

    async_safe = True

    def __init__(self, read_sample, interval_seconds: float = 0.25, warmup_steps: int = 0):
        super().__init__()
        self._sampler = Sampler(read_sample, interval_seconds, "machine-state", "read_sample")
        self.read_sample = read_sample
        self.interval_seconds = interval_seconds
        self.warmup_steps = warmup_steps
        self.devices: list[_Device] = []
        self.windows: list[dict] = []
        self._marks = []
        self._lock = threading.Lock()
        self._first_epoch = True
        self._steps_per_call = 1
        self._unix_offset = time.time() - time.perf_counter()

    @property
    def sample_seconds(self) -> float:
        return self._sampler.seconds

    @property
    def error(self) -> str | None:
        """Why sampling stopped, if a reader failed."""
        return self._sampler.error

    def on_train_begin(self, logs=None):
        self._first_epoch = True
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        self._marks = []
        self._sampler.start()

    def on_train_batch_end(self, batch, logs=None):
        mark = (batch, time.perf_counter())
        with self._lock:  # batch hooks may run in Keras's worker threads
            self._marks.append(mark)

    def _halt(self):
        self._sampler.stop()

    def on_epoch_end(self, epoch, logs=None):
        self._halt()
        with self._lock:
            window = steady_window(self._marks, (self.params or {}).get("steps"),
                                   self._steps_per_call, self._first_epoch, self.warmup_steps)
        self._first_epoch = False
        if len(window) < 2:
            return
        start, end = window[0][1], window[-1][1]
        inside = [sample for _, sample in self._sampler.samples(start, end)]
        for sample in inside:
            for index, device in enumerate(sample or ()):
                while len(self.devices) <= index:
                    self.devices.append(_Device())
                self.devices[index].add(device or {})
        self.windows.append({"epoch": epoch + 1, "start_unix": self._unix_offset + start,
                             "end_unix": self._unix_offset + end,
                             "seconds": round(end - start, 4), "samples": len(inside)})

    def on_train_end(self, logs=None):
        self._halt()

    def summary(self) -> dict:
        """What the timed windows saw, per device (see the class docstring)."""
        samples = sum(w["samples"] for w in self.windows)
        return {"interval_seconds": self.interval_seconds, "samples": samples,
                "seconds": round(sum(w["seconds"] for w in self.windows), 3),
                "sample_seconds": round(self.sample_seconds, 4),
                "sampling_stopped": self.error,
                "devices": [device.summary() for device in self.devices]}


# ------------------------------------------------------------------------------- NVML
def nvml_sampler(device_indices, nvml=None):
    """(read_sample, facts) for the given GPUs through NVML, or None without NVML or
    without those GPUs. `facts()` gives what does not change in a run: each GPU's name,
    driver, CUDA driver version, maximum clocks, power limit, ECC mode.

    Args:
        device_indices: NVML's indices of the GPUs (callbacks.energy.visible_gpu_indices).
        nvml: a module with pynvml's functions (tests hand in a fake); None: pynvml.
    """
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in device_indices]
    except Exception:  # noqa: BLE001 - no library, no driver, no such GPU: no state
        return None
    if not handles:
        return None
    me = os.getpid()

    def read(call, *args, scale=1.0):
        try:
            return call(*args) * scale
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin: unread
            return None

    throttle = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)  # (renamed in NVML 12)

    def processes(handle):
        try:
            running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception:  # noqa: BLE001
            return None
        return sorted({p.pid for p in running if p.pid != me})

    def read_sample():
        return [{"sm_clock_mhz": read(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
                 "memory_clock_mhz": read(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM),
                 "power_watts": read(nvml.nvmlDeviceGetPowerUsage, h, scale=1e-3),
                 "temperature_c": read(nvml.nvmlDeviceGetTemperature, h,
                                       nvml.NVML_TEMPERATURE_GPU),
                 "throttle_reasons": read(throttle, h, scale=1) if throttle else None,
                 "other_processes": processes(h)} for h in handles]

    def text(call, *args):
        try:
            value = call(*args)
        except Exception:  # noqa: BLE001
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def facts():
        cuda = read(nvml.nvmlSystemGetCudaDriverVersion_v2) if hasattr(
            nvml, "nvmlSystemGetCudaDriverVersion_v2") else None
        devices = []
        for index, h in zip(device_indices, handles):
            ecc = read(lambda: nvml.nvmlDeviceGetEccMode(h)[0])
            devices.append({
                "index": index, "name": text(nvml.nvmlDeviceGetName, h),
                "max_sm_clock_mhz": read(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM),
                "max_memory_clock_mhz": read(nvml.nvmlDeviceGetMaxClockInfo, h,
                                             nvml.NVML_CLOCK_MEM),
                "power_limit_watts": read(nvml.nvmlDeviceGetEnforcedPowerLimit, h, scale=1e-3),
                "ecc": None if ecc is None else ("on" if ecc else "off"),
                "other_processes_at_start": processes(h)})
        return {"driver": text(nvml.nvmlSystemGetDriverVersion),
                "cuda_driver": None if cuda is None else f"{int(cuda) // 1000}."
                                                         f"{int(cuda) % 1000 // 10}",
                "devices": devices}

    return read_sample, facts
