"""Energy: joules per image, board power and kWh per epoch, over the steady state.

The 2018 study left energy for later. The window is the throughput's
(callbacks/figures/window.py): from the end of the warm-up to each epoch's last training
step, so compile, idle time and evaluation are left out. Through NVIDIA's NVML
(nvidia-ml-py), two ways, the first preferred:
- `energy_counter`: each GPU's total-energy counter
  (nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver loaded,
  Volta and newer), read at every step mark and differenced between the window's
  first and last mark: the joules of exactly those steps, no sampling.
- `power_samples`, only where the counter is unsupported: board power
  (nvmlDeviceGetPowerUsage, which the driver averages over a trailing period, so
  it lags a change of load) sampled a few times a second; the samples taken
  inside the window, times its length.
`method` says which was used. Elsewhere (CPUs, TPUs) the figures are absent,
never zero.
"""

from __future__ import annotations

import threading
import time

import keras

from callbacks.figures.steps import Position
from callbacks.figures.window import steady_window
from callbacks.sampling import Sampler


def visible_gpu_indices(count: int) -> list[int]:
    """NVML indices of the first `count` GPUs this process sees.

    NVML numbers GPUs physically and ignores CUDA_VISIBLE_DEVICES, so map through it.
    """
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible.strip() and all(part.strip().isdigit() for part in visible.split(",")):
        return [int(part) for part in visible.split(",")][:count]
    return list(range(count))


def _nvml_handles(device_indices):
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        return [pynvml.nvmlDeviceGetHandleByIndex(i)
                for i in (device_indices if device_indices is not None else range(count))]
    except Exception:  # no library, no driver, no GPU: no energy figures
        return []


def nvml_energy_reader(device_indices=None):
    """fn() -> joules the given GPUs used since their driver loaded, or None without
    NVML or without the energy counter (GPUs older than Volta)."""
    handles = _nvml_handles(device_indices)
    if not handles:
        return None
    import pynvml

    def read():
        return sum(pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles) / 1000.0

    try:
        read()
    except Exception:  # NVMLError_NotSupported
        return None
    return read


def nvml_power_reader(device_indices=None):
    """fn() -> total board power in watts of the given GPUs, or None without NVML."""
    handles = _nvml_handles(device_indices)
    if not handles:
        return None
    import pynvml

    def read():
        return sum(pynvml.nvmlDeviceGetPowerUsage(h) for h in handles) / 1000.0

    return read


class EnergyMeter(keras.callbacks.Callback):
    """Energy of the steady-state steps, by epoch and for the run.

    Publishes into epoch `logs`, this epoch's window: `epoch_power_watts`,
    `epoch_joules_per_image` and `epoch_kwh` (a full epoch's images at that energy
    per image). Public attributes, over every window of the run (earlier attempts
    included): `power_watts`, `joules_per_image`, `kwh_per_epoch`; `method`;
    `windows` (one dict per epoch: epoch, start_unix, end_unix, joules, images), for
    checking against another meter; `state()` for a checkpoint.

    Args:
        read_energy: fn() -> joules used so far by the devices metered (a counter),
            e.g. `nvml_energy_reader()`; preferred.
        read_power: fn() -> watts of those devices, e.g. `nvml_power_reader()`;
            used only without `read_energy`.
        position: the run's Position (callbacks/figures/steps.py): its per-process
            batch is the images a step gives the devices metered (each process meters
            its own), its epoch's steps make the kWh per epoch; or, for a fit of its
            own, the images per step (then no kWh per epoch).
        interval_seconds: time between power samples.
        warmup_steps: steps of the first epoch left out; 0 = automatic (as the
            throughput callback).
        carried: `state()` of the checkpoint a resumed attempt starts from, or None.
    """

    async_safe = True

    def __init__(self, read_energy=None, read_power=None, position: Position | int = 1,
                 interval_seconds: float = 0.2, warmup_steps: int = 0,
                 carried: dict | None = None):
        super().__init__()
        if read_energy is None and read_power is None:
            raise ValueError("read_energy or read_power must be a callable, received None")
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be > 0, received {interval_seconds}")
        self.read_energy, self.read_power = read_energy, read_power
        self.method = "energy_counter" if read_energy is not None else "power_samples"
        self.position = Position.of(position)
        self.interval_seconds = interval_seconds
        self.warmup_steps = warmup_steps
        self.images_per_epoch = self.position.process_images(self.position.steps_per_epoch)
        self.power_watts = self.joules_per_image = self.kwh_per_epoch = None
        carried = carried or {}
        self.windows = list(carried.get("windows", []))
        self._totals = list(carried.get("totals", [0.0, 0.0, 0]))  # joules, seconds, images
        if self._totals[2]:
            self.power_watts, self.joules_per_image, self.kwh_per_epoch = self._figures(
                *self._totals)
        self._marks = []
        self._power = Sampler(read_power, interval_seconds, "power") if read_power else None
        self._first_epoch = True
        self._steps_per_call = 1
        self._unix_offset = time.time() - time.perf_counter()
        self._lock = threading.Lock()

    def on_train_begin(self, logs=None):
        self._first_epoch = True
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        self._marks = []
        if self.read_energy is None:
            self._power.start()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        joules = None
        if self.read_energy is not None:
            try:
                joules = self.read_energy()
            except Exception:  # a failing meter leaves this epoch without figures
                pass
        with self._lock:  # batch hooks may run in Keras's worker threads
            self._marks.append((batch, now, joules))

    def _halt(self):
        if self._power is not None:
            self._power.stop()

    def on_epoch_end(self, epoch, logs=None):
        self._halt()
        with self._lock:
            window = steady_window(self._marks, (self.params or {}).get("steps"),
                                   self._steps_per_call, self._first_epoch, self.warmup_steps)
        self._first_epoch = False
        if len(window) < 2:
            return
        (first_step, start, start_joules), (last_step, end, end_joules) = window[0], window[-1]
        seconds, images = end - start, self.position.process_images(last_step - first_step)
        if self.read_energy is not None:
            if start_joules is None or end_joules is None:
                return
            joules = end_joules - start_joules
        else:
            inside = [watts for _, watts in self._power.samples(start, end)]
            if not inside:
                return
            joules = sum(inside) / len(inside) * seconds
        if seconds <= 0 or images <= 0:
            return
        self.windows.append({"epoch": epoch + 1, "start_unix": self._unix_offset + start,
                             "end_unix": self._unix_offset + end, "joules": joules,
                             "images": images})
        self._totals = [self._totals[0] + joules, self._totals[1] + seconds,
                        self._totals[2] + images]
        self.power_watts, self.joules_per_image, self.kwh_per_epoch = self._figures(
            *self._totals)
        if logs is not None:
            for key, value in zip(("epoch_power_watts", "epoch_joules_per_image", "epoch_kwh"),
                                  self._figures(joules, seconds, images)):
                if value is not None:
                    logs[key] = value

    def state(self) -> dict:
        """The run's energy up to the last epoch's end, as JSON (for a checkpoint)."""
        return {"totals": list(self._totals), "windows": list(self.windows)}

    def _figures(self, joules, seconds, images):
        per_image = joules / images
        kwh = per_image * self.images_per_epoch / 3.6e6 if self.images_per_epoch else None
        return joules / seconds, per_image, kwh

    def on_train_end(self, logs=None):
        self._halt()


def gpu_energy_readers(accelerator: str, devices_per_process: int) -> dict | None:
    """EnergyMeter's readers of this process's GPUs: the energy counter where the
    GPUs have one, else their power; None where there is neither (not a GPU, no NVML)."""
    if accelerator != "gpu":
        return None
    indices = visible_gpu_indices(devices_per_process)
    read_energy = nvml_energy_reader(indices)
    if read_energy is not None:
        return {"read_energy": read_energy}
    read_power = nvml_power_reader(indices)
    return {"read_power": read_power} if read_power is not None else None
