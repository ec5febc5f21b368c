"""The process environment a run sets before Keras (and TensorFlow or JAX) starts.

What the frameworks read once, when they start: the Keras backend, TensorFlow's C++
log level, the platforms JAX looks at, XLA's flags (host devices, the GPU scheduler),
the threads of XLA's CPU client and CUDA's hardware queues. `set_before_keras` sets
them; app/engine/distribute.py's `prepare_backend` calls it. The host's GPU and TPU
device files, which some of these settings and the device checks read, are listed
here too. Nothing here imports a framework.
"""

from __future__ import annotations

import glob
import logging
import os
import sys


def set_before_keras(config) -> None:
    """Sets the environment variables the run's flags need before Keras is imported.
    Idempotent; a setting of the user's (XLA_FLAGS, CUDA_DEVICE_MAX_CONNECTIONS) stays."""
    os.environ["KERAS_BACKEND"] = config.backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TF's C++ banner quiet
    # JAX tries every platform it knows and logs each miss ("Unable to initialize
    # backend 'tpu'"); a CPU run looks at the CPU only, and the others stay quiet.
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    # Keras imports matplotlib (keras.src.visualization), which on a fresh machine builds
    # its font cache and says so at INFO, through absl's handler, before the banner
    # ("font_manager.py:1848] generated new fontManager").
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    if config.accelerator == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    elif os.environ.get("JAX_PLATFORMS") == "cpu":  # the flag decides, not an old setting
        del os.environ["JAX_PLATFORMS"]
    if config.backend == "jax" and config.accelerator == "cpu" and config.num_devices > 1:
        # JAX makes N host devices only when told before it starts.
        if "jax" not in sys.modules:
            flags = os.environ.get("XLA_FLAGS", "")
            flag = f"--xla_force_host_platform_device_count={config.num_devices}"
            if "xla_force_host_platform_device_count" not in flags:
                os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
            os.environ["PJRT_NPROC"] = str(cpu_client_threads(config.num_devices))
    if config.backend == "jax" and config.accelerator == "gpu":
        # CUDA runs every stream's work through CUDA_DEVICE_MAX_CONNECTIONS hardware
        # queues (8 by default); streams beyond that share one, and work on a shared
        # queue waits behind everything queued before it. nvJPEG decodes (the gpu
        # input pipeline) on streams of its own, so with 8 its kernels waited behind
        # whole training steps queued by XLA: on an H200 the JPEG engines delivered
        # 3,900 img/s beside a training-sized GPU load, 15,000 with 32 queues, and the
        # pipeline went from 0.74 to 0.93 of synthetic data's images/sec, synthetic
        # data unchanged (benchmarks/results/2026-12-01-h200-nvjpeg.json at 35cc76c). Read when
        # the CUDA context is made, so set here, before JAX starts; a user's setting stays.
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
        # Let XLA overlap collectives with compute in data-parallel steps. One GPU in one
        # process has no collective to overlap, and the scheduler still costs its
        # compile: on one H200 the small ResNet's training step compiled in 10.0 s
        # without it, 12.3 s with it (cold, 2026-12-03-h200-fashion-mnist-c6d3e37-xla.json).
        flags = os.environ.get("XLA_FLAGS", "")
        if config.profile_steps and "xla_gpu_enable_command_buffer" not in flags:
            # A profiled run runs its kernels outside XLA's command buffers (CUDA
            # graphs): in a graph a kernel is traced under the graph's name, not its HLO
            # op's, and the step breakdown could not say what it computes
            # (callbacks/profiling/breakdown.py). A profiled step dispatches synchronously
            # anyway (callbacks/profiler.py): it shows where time goes, not the speed.
            flags = f"{flags} --xla_gpu_enable_command_buffer=".strip()
            os.environ["XLA_FLAGS"] = flags
        if "xla_gpu_enable_latency_hiding_scheduler" not in flags and not _one_gpu(config):
            os.environ["XLA_FLAGS"] = (
                f"{flags} --xla_gpu_enable_latency_hiding_scheduler=true").strip()


def _one_gpu(config) -> bool:
    """Whether this run trains on exactly one NVIDIA GPU in one process: --num_devices=1,
    or one GPU visible (CUDA_VISIBLE_DEVICES, else the host's /dev/nvidiaN files)."""
    if config.num_processes > 1:
        return False
    if config.num_devices == 1:
        return True
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()]) == 1
    return len(nvidia_gpu_files()) == 1


def nvidia_gpu_files() -> list[str]:
    """The host's NVIDIA GPU device files, one per GPU (/dev/nvidia0, /dev/nvidia1, ...)."""
    return glob.glob("/dev/nvidia[0-9]*")


def tpu_device_files() -> list[str]:
    """A Cloud TPU VM's TPU device files, the ones libtpu opens: /dev/accel0, ... (TPU
    v2 to v4), /dev/vfio/0, ... (v5e and later)."""
    return glob.glob("/dev/accel[0-9]*") + glob.glob("/dev/vfio/[0-9]*")


def cpu_client_threads(num_devices: int) -> int:
    """Threads XLA's CPU client needs so that N host devices never deadlock.

    The client (xla/pjrt/cpu/cpu_client.cc) runs every step on one thread pool of
    max(PJRT_NPROC or the cores, N) threads, "enough for one collective": each of
    the N devices' step blocks a thread until all N reach the all-reduce. But with
    asynchronous dispatch the launches of later steps, one per device, wait in the
    same pool for a free slot of the device's in-flight limit, holding up to N more
    threads. With fewer than 2N threads (4 devices on 2 cores: 4) the last device's
    step never gets one: "Expected 4 threads to join the rendezvous, but only 3 of
    them arrived", then SIGABRT. So 2N, and never fewer than the cores.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    requested = int(os.environ.get("PJRT_NPROC") or 0)
    return max(cores, 2 * num_devices, requested)
