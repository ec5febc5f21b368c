"""Energy: board power during the steady state, as joules per image and kWh per epoch.

The 2018 study left energy for later. Where NVIDIA's NVML is available
(nvidia-ml-py), a background thread samples the board power of the devices in use
a few times a second during each epoch's steady state: from the end of the warm-up
steps (the same window as the throughput callback: compile and the first
execution of an epoch are left out, since the devices idle then) to the epoch's
last step. So the figures sit next to the dollars. Elsewhere (CPUs, TPUs) the
figures are simply absent, never zero.
"""

from __future__ import annotations

import threading

import keras

from callbacks.throughput import steady_state_begins


def visible_gpu_indices(count: int) -> list[int]:
    """NVML indices of the first `count` GPUs this process sees.

    NVML numbers GPUs physically and ignores CUDA_VISIBLE_DEVICES, so map through it.
    """
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible.strip() and all(part.strip().isdigit() for part in visible.split(",")):
        return [int(part) for part in visible.split(",")][:count]
    return list(range(count))


def nvml_power_reader(device_indices=None):
    """fn() -> total board power in watts of the given GPUs, or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in (device_indices if device_indices is not None else range(count))]
    except Exception:  # no library, no driver, no GPU: no energy figures
        return None
    if not handles:
        return None

    def read():
        return sum(pynvml.nvmlDeviceGetPowerUsage(h) for h in handles) / 1000.0

    return read


class EnergyMeter(keras.callbacks.Callback):
    """Publishes into epoch `logs`: `power_watts` (mean over the steady state),
    `joules_per_image` (needs `images_per_sec` from the throughput callback) and
    `kwh_per_epoch` (a full epoch's images at that energy per image). Public
    attributes hold the last values.

    Args:
        read_power: fn() -> watts of all devices in use (e.g. `nvml_power_reader()`).
        interval_seconds: time between samples.
        warmup_steps: steps of the first epoch left out; 0 = automatic (as the
            throughput callback).
        images_per_epoch: training images of a full epoch, for kWh per epoch.
    """

    async_safe = True

    def __init__(self, read_power, interval_seconds: float = 0.2, warmup_steps: int = 0,
                 images_per_epoch: int = 0):
        super().__init__()
        if read_power is None:
            raise ValueError("read_power must be a callable returning watts, received None")
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be > 0, received {interval_seconds}")
        self.read_power = read_power
        self.interval_seconds = interval_seconds
        self.warmup_steps = warmup_steps
        self.images_per_epoch = images_per_epoch
        self.power_watts = self.joules_per_image = self.kwh_per_epoch = None
        self._samples = []
        self._stop = threading.Event()
        self._thread = None
        self._sampling = False
        self._calls = 0
        self._first_epoch = True
        self._steps_per_call = 1
        self._lock = threading.Lock()

    def _sample(self):
        while not self._stop.is_set():
            try:
                self._samples.append(self.read_power())
            except Exception:
                return
            self._stop.wait(self.interval_seconds)

    def on_train_begin(self, logs=None):
        self._first_epoch = True
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        self._samples, self._sampling, self._calls = [], False, 0
        self._stop.clear()

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:  # batch hooks may run in Keras's worker threads
            self._calls += 1
            if self._sampling:
                return
            if steady_state_begins(batch, self._calls, (self.params or {}).get("steps"),
                                   self._steps_per_call, self._first_epoch, self.warmup_steps):
                self._sampling = True
                self._thread = threading.Thread(target=self._sample, daemon=True,
                                                name="power")
                self._thread.start()

    def _halt(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def on_epoch_end(self, epoch, logs=None):
        self._halt()
        self._first_epoch = False
        if not self._samples:
            return
        self.power_watts = sum(self._samples) / len(self._samples)
        if logs is None:
            return
        logs["power_watts"] = self.power_watts
        if logs.get("images_per_sec"):
            self.joules_per_image = self.power_watts / logs["images_per_sec"]
            logs["joules_per_image"] = self.joules_per_image
            if self.images_per_epoch:
                self.kwh_per_epoch = self.joules_per_image * self.images_per_epoch / 3.6e6
                logs["kwh_per_epoch"] = self.kwh_per_epoch

    def on_train_end(self, logs=None):
        self._halt()
