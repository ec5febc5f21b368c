"""What a run ran on and with: the devices, their driver and the libraries' versions.

One command gave 27% apart on two H100s of one kind (XLA's autotuner's kernel choice,
benchmarks/results/2026-12-06-h100-autotune-spread.json). Each run records what
could differ between two machines of a kind, so that a report of two runs can name
it: the device's name; the NVIDIA driver and the CUDA version it supports; the CUDA
runtime, cuDNN and cuBLAS the framework loaded; jaxlib (which carries XLA, its
`xla_extension_version`) and JAX, or TensorFlow with the CUDA and cuDNN it was built
for; the host's CPU. The GPUs' clocks, power, temperature and throttling through the
timed window are callbacks/machine_state.py's (`sampler` here makes it), and their
fixed facts (maximum clocks, power limit, ECC) come from NVML with it.

A TPU's runtime gives no clocks or throttle reasons to a program; its libtpu version
and the device's kind are what is recorded.

Only what is already imported is asked: recording never imports a framework.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys


def software_versions(backend: str) -> dict:
    """The framework's versions and the GPU libraries it loaded (None: not known)."""
    versions = {"python": platform.python_version()}
    keras = sys.modules.get("keras")
    versions["keras"] = getattr(keras, "__version__", None)
    if backend == "jax":
        versions.update(_jax_versions())
    else:
        versions.update(_tensorflow_versions())
    return versions


def _jax_versions() -> dict:
    jax = sys.modules.get("jax")
    out = {"jax": getattr(jax, "__version__", None), "jaxlib": None,
           "xla_extension_version": None, "cuda_runtime": None, "cudnn": None,
           "cublas": None, "libtpu": _distribution_version("libtpu")}
    if jax is None:
        return out
    try:
        from jax._src import lib

        out["jaxlib"] = getattr(lib, "version_str", None)
        # XLA has no release of its own: jaxlib's build of it is numbered thus.
        out["xla_extension_version"] = getattr(lib, "jaxlib_extension_version", None)
        cuda = getattr(lib, "cuda_versions", None)
    except Exception:  # noqa: BLE001 - a JAX without these internals: versions unknown
        return out
    if cuda is not None:  # jax_cuda13_plugin._versions (or cuda12's)
        out["cuda_runtime"] = _dotted(_call(cuda, "cuda_runtime_get_version"), "cuda")
        out["cudnn"] = _dotted(_call(cuda, "cudnn_get_version"), "cudnn")
        out["cublas"] = _call(cuda, "cublas_get_version")
    return out


def _tensorflow_versions() -> dict:
    tf = sys.modules.get("tensorflow")
    out = {"tensorflow": getattr(tf, "__version__", None), "cuda_build": None,
           "cudnn_build": None}
    if tf is None:
        return out
    try:
        info = tf.sysconfig.get_build_info()
    except Exception:  # noqa: BLE001
        return out
    out["cuda_build"] = info.get("cuda_version")
    out["cudnn_build"] = info.get("cudnn_version")
    return out


def _call(module, name: str):
    function = getattr(module, name, None)
    try:
        return function() if function is not None else None
    except Exception:  # noqa: BLE001 - no GPU, no library: unknown
        return None


def _dotted(number, kind: str) -> str | None:
    """CUDA's 12080 -> "12.8"; cuDNN's 91100 -> "9.11.0" (cuDNN 9 numbers
    major*10000 + minor*100 + patch; cuDNN 8 major*1000 + minor*100 + patch)."""
    if not isinstance(number, int) or number <= 0:
        return None
    if kind == "cuda":
        return f"{number // 1000}.{number % 1000 // 10}"
    if number >= 90000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def host() -> dict:
    """The host's CPU model and cores (the device of a CPU run; the feeder of a GPU's)."""
    model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {"cpu": model or platform.processor() or None, "cores": cores}


def sampler(accelerator: str, devices_per_process: int, interval_seconds: float = 0.25,
            warmup_steps: int = 0):
    """(MachineState callback, facts function) for this process's GPUs through NVML, or
    None where there is nothing to sample (not a GPU run, or no NVML)."""
    if accelerator != "gpu":
        return None
    from callbacks.energy import visible_gpu_indices
    from callbacks.machine_state import MachineState, nvml_sampler

    made = nvml_sampler(visible_gpu_indices(devices_per_process))
    if made is None:
        return None
    read_sample, facts = made
    return MachineState(read_sample, interval_seconds, warmup_steps), facts
