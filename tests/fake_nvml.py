"""A fake NVML (pynvml's functions) whose GPUs' state the test sets: clocks, power,
temperature, throttle reasons and processes, each changed at a moment the test picks;
callbacks/machine_state.py's `nvml_sampler` reads it as it reads the real one."""

import threading
import types

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
POWER_CAP, HW_SLOWDOWN, IDLE = 0x4, 0x8, 0x1  # NVML's throttle reason bits


class FakeGpu:
    def __init__(self, index, name="NVIDIA H100 80GB HBM3", max_sm=1980, max_mem=2619,
                 limit_watts=700.0):
        self.index, self.name = index, name
        self.max_sm, self.max_mem, self.limit_watts = max_sm, max_mem, limit_watts
        self.sm, self.mem, self.watts, self.celsius = max_sm, max_mem, 500.0, 60
        self.reasons, self.pids = 0, []
        self.reads = 0  # samples taken of this GPU


class FakeNvml:
    """pynvml's surface, as much as nvml_sampler calls. `set(index, **state)` changes a
    GPU's state from now on (thread-safe: the sampler reads from its own thread)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = NVML_CLOCK_SM, NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU

    def __init__(self, gpus=1, driver="580.95.05", cuda=13000):
        self.gpus = [FakeGpu(i) for i in range(gpus)]
        self.driver, self.cuda = driver, cuda
        self._lock = threading.Lock()

    def set(self, index, **state):
        with self._lock:
            for name, value in state.items():
                setattr(self.gpus[index], name, value)

    # --- pynvml's functions
    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.gpus[index]

    def nvmlDeviceGetClockInfo(self, gpu, clock):
        with self._lock:
            gpu.reads += clock == NVML_CLOCK_SM
            return gpu.sm if clock == NVML_CLOCK_SM else gpu.mem

    def nvmlDeviceGetMaxClockInfo(self, gpu, clock):
        return gpu.max_sm if clock == NVML_CLOCK_SM else gpu.max_mem

    def nvmlDeviceGetPowerUsage(self, gpu):
        with self._lock:
            return int(gpu.watts * 1000)  # milliwatts

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu):
        return int(gpu.limit_watts * 1000)

    def nvmlDeviceGetTemperature(self, gpu, sensor):
        with self._lock:
            return gpu.celsius

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, gpu):
        with self._lock:
            return gpu.reasons

    def nvmlDeviceGetComputeRunningProcesses(self, gpu):
        with self._lock:
            return [types.SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in gpu.pids]

    def nvmlDeviceGetName(self, gpu):
        return gpu.name

    def nvmlDeviceGetEccMode(self, gpu):
        return [1, 1]

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.cuda
