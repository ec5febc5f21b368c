"""The one place that chooses the Keras backend and how training is distributed.

Two steps, in this order:

1. `prepare_backend(config)` sets the environment variables that must exist before
   Keras (and with it TensorFlow or JAX) is first imported (which ones, and why:
   app/engine/environment.py).
2. `make_topology(config)` finds the devices, checks them against the flags, and
   returns a `Topology` (app/engine/topology.py): a TensorFlow `tf.distribute`
   strategy (default, MirroredStrategy or TPUStrategy), or a
   `keras.distribution.DataParallel` on JAX,
   plus the facts the summary records (processes, devices, device kind). On the
   way it applies the cold-start measures (app/engine/cold_start.py).

Nothing else in the app knows these APIs. Every failure is a `TopologyError` with a
one-line message naming what was asked for and what exists; there is never a
silent fallback to another device.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

from app.engine import cold_start, environment, native_stderr, startup
from app.engine.startup import TIMELINE
from app.engine.topology import Topology, TopologyError  # noqa: F401 (read as distribute's too)

# How to get each framework, for the error when it is missing.
INSTALL = {
    "tensorflow": 'pip install "tensorflow==2.21.0" (or use --backend=jax)',
    "jax": 'pip install -U jax (CPU), "jax[cuda13]" (NVIDIA GPU) or "jax[tpu]" (Cloud TPU VM)',
    "keras": 'pip install "keras==3.15.1"',
}
GPU_INSTALL = {
    "jax": 'for NVIDIA GPUs install JAX with CUDA: pip install -U "jax[cuda13]" (or '
           '"jax[cuda12]" for CUDA 12 drivers)',
    "tensorflow": 'TensorFlow 2.21 needs CUDA 12 libraries for GPUs: pip install '
                  '"tensorflow[and-cuda]==2.21.0", or use --backend=jax with pip install '
                  '-U "jax[cuda13]"',
}
TPU_INSTALL = {
    "jax": 'on a Cloud TPU VM install JAX for TPUs: pip install -U "jax[tpu]"',
    "tensorflow": "on a Cloud TPU VM TensorFlow needs its TPU build (BUILD.md, TPU)",
}


def prepare_backend(config) -> None:
    """Sets what must be set before Keras is imported. Idempotent.

    Raises:
        TopologyError: if Keras was already imported with another backend.
    """
    keras_module = sys.modules.get("keras")
    if keras_module is not None and keras_module.backend.backend() != config.backend:
        raise TopologyError(
            f"--backend={config.backend} but Keras was already imported with the "
            f"{keras_module.backend.backend()} backend in this process")
    environment.set_before_keras(config)


def make_topology(config) -> Topology:
    """Finds and checks the devices; returns the Topology to train on, with its batch
    (`Topology.batch`: --global_batch_size shared out over them).

    Raises:
        TopologyError: for missing devices, unreachable TPUs or coordinators, or a
            global batch that the replicas cannot share evenly.
    """
    _check_gpu_present(config)
    _check_local_tpu_present(config)
    framework = _import(config.backend, config)
    if config.backend == "jax":
        startup.watch_jax(framework)  # before JAX compiles anything
    TIMELINE.mark("framework_import")
    if config.backend == "tensorflow":
        topology = _tensorflow_topology(config)
        TIMELINE.mark("devices")
    else:
        topology = _jax_topology(config)  # marks devices and keras_import itself
    # A batch the replicas cannot share is refused now, before Keras imports; the run
    # context makes and holds the shape (app/run/context.py's `batch`).
    topology.batch_shape(config.global_batch_size)
    _import("keras", config)  # after the devices: importing it takes seconds
    if config.backend == "tensorflow":
        TIMELINE.mark("keras_import")
    native_stderr.release()
    return topology


def _check_gpu_present(config) -> None:
    """--accelerator=gpu on a host with no GPU device files fails here, in a blink:
    found by importing the framework, it took TensorFlow 27-35 s (CUDA's failed
    initialization) and a screen of its log lines before the one-line error.

    Raises:
        TopologyError: no NVIDIA (/dev/nvidia*) or AMD (/dev/kfd) GPU device exists,
            or CUDA_VISIBLE_DEVICES hides them all.
    """
    if config.accelerator != "gpu":
        return
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        raise TopologyError("--accelerator=gpu but CUDA_VISIBLE_DEVICES="
                            f"{os.environ['CUDA_VISIBLE_DEVICES']!r} hides every GPU from "
                            "this process")
    if not (environment.nvidia_gpu_files() or os.path.exists("/dev/kfd")):
        raise TopologyError("--accelerator=gpu but this host has no GPU (no /dev/nvidia* "
                            "or /dev/kfd device); use --accelerator=cpu")


def _check_local_tpu_present(config) -> None:
    """--accelerator=tpu --tpu=local on TensorFlow, on a host with no TPU device files,
    fails here, before TensorFlow is imported: found by TPUClusterResolver, it took
    the import (9-12 s on a 2-core host) and left 7 of TensorFlow's log lines after the
    one-line error. (JAX finds no TPU in its own import, 2-3 s, and says so in one
    line; a named --tpu is another host's, found only by asking for it.)

    Raises:
        TopologyError: no /dev/accel* or /dev/vfio/* device exists.
    """
    if (config.accelerator != "tpu" or config.backend != "tensorflow" or config.tpu != "local"
            or environment.tpu_device_files()):
        return
    raise TopologyError("--accelerator=tpu --tpu=local: no TPU reachable (this host has no "
                        "TPU device: no /dev/accel* or /dev/vfio/*); use --accelerator=cpu, "
                        "or --tpu=NAME for a TPU node")


def _import(module: str, config):
    """Imports a framework, or says in one line how to install it."""
    try:
        with cold_start.without_unused_imports(module):
            return importlib.import_module(module)
    except ImportError as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise TopologyError(f"--backend={config.backend} needs {module}, which does not "
                            f"import here ({first}): {INSTALL[module]}") from None


def _wanted(config, available: int, what: str) -> int:
    """Devices per process to use: --num_devices, or all that are visible."""
    if available == 0:
        hints = {"gpu": GPU_INSTALL, "tpu": TPU_INSTALL}.get(config.accelerator, {})
        hint = f"; {hints[config.backend]}" if config.backend in hints else ""
        raise TopologyError(f"--accelerator={config.accelerator} but no {what} is visible "
                            f"to this process{hint}")
    wanted = config.num_devices or available
    if wanted > available:
        raise TopologyError(f"--num_devices={config.num_devices} but only {available} "
                            f"{what}(s) are visible")
    return wanted


# --------------------------------------------------------------------- TensorFlow
def _tensorflow_topology(config) -> Topology:
    import tensorflow as tf

    kind = "cpu"
    if config.accelerator == "tpu":
        strategy, replicas, kind = _tpu_strategy(config, tf)
    elif config.accelerator == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        replicas = _wanted(config, len(gpus), "GPU")
        details = tf.config.experimental.get_device_details(gpus[0])
        kind = details.get("device_name", "GPU")
        if replicas > 1:
            strategy = tf.distribute.MirroredStrategy(
                devices=[f"/gpu:{i}" for i in range(replicas)])
        else:
            strategy = tf.distribute.OneDeviceStrategy("/gpu:0")
    else:
        replicas = config.num_devices or 1
        _ensure_logical_cpus(tf, replicas)
        if replicas > 1:
            # Reduce on the host: NCCL, the GPU default, has no CPU kernels.
            strategy = tf.distribute.MirroredStrategy(
                devices=[f"/cpu:{i}" for i in range(replicas)],
                cross_device_ops=tf.distribute.ReductionToOneDevice())
        else:
            strategy = tf.distribute.get_strategy()
    jit_compile = "auto"
    if replicas > 1 and config.steps_per_execution > 1 and config.accelerator != "tpu":
        # Keras 3.15 + TF 2.21: fit under MirroredStrategy with steps_per_execution
        # > 1 fails inside multi_step_on_iterator ("You must feed a value for
        # placeholder tensor") when the step is XLA-compiled; without XLA it trains
        # correctly (both seen in tests/app/engine/test_distribute.py).
        jit_compile = False
    return Topology("tensorflow", config.accelerator, 1, 0, replicas, kind, strategy=strategy,
                    jit_compile=jit_compile)


def _ensure_logical_cpus(tf, count: int) -> None:
    """Splits the host CPU into `count` logical devices (once, before TF starts)."""
    cpus = tf.config.list_physical_devices("CPU")
    existing = tf.config.get_logical_device_configuration(cpus[0]) or [None]
    if len(existing) >= count:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        raise TopologyError(
            f"--num_devices={count}: TensorFlow already started in this process with "
            f"{len(existing)} CPU device(s); start a new process") from None


def _tpu_strategy(config, tf):
    """Connects to the TPU named by --tpu and returns (strategy, replicas, kind)."""
    name = "" if config.tpu == "local" else config.tpu
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name or "local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, OSError, tf.errors.OpError) as error:  # OSError: no metadata server
        first = str(error).strip().split(". ")[0].splitlines()[0] if str(error).strip() \
            else type(error).__name__
        raise TopologyError(f"--accelerator=tpu --tpu={config.tpu}: no TPU reachable "
                            f"({first}); {TPU_INSTALL['tensorflow']}")
    strategy = tf.distribute.TPUStrategy(resolver)
    available = strategy.num_replicas_in_sync
    if config.num_devices and config.num_devices != available:
        raise TopologyError(f"--num_devices={config.num_devices} but the TPU has "
                            f"{available} cores; TPUStrategy uses them all")
    kind = "TPU " + os.environ.get("TPU_ACCELERATOR_TYPE", "unknown").split("-")[0]
    return strategy, available, kind


# ---------------------------------------------------------------------------- JAX
def _jax_topology(config) -> Topology:
    import jax

    cache = cold_start.persistent_compilation_cache(jax)
    if config.num_processes > 1:
        _initialize_multi_host(config)
    platform = config.accelerator
    what = {"cpu": "CPU device", "gpu": "GPU", "tpu": "TPU device"}[platform]
    if config.num_processes == 1 and cold_start.cut_on("devices_beside_keras"):
        # The backend starts (a GPU's driver and context: seconds) while Keras imports.
        started = {}
        starting = threading.Thread(target=_start_backend, args=(jax, config, what, started),
                                    name="start-backend", daemon=True)
        starting.start()
        keras = _import("keras", config)
        starting.join()
        if "error" in started:
            raise started["error"]
        local, per_process = started["local"], started["per_process"]
        TIMELINE.mark("devices_and_keras_import")
    else:
        local = _local_devices(jax, platform)
        per_process = _wanted(config, len(local), what)
        TIMELINE.mark("devices")
        reserving = None
        if platform == "gpu":  # the GPUs' memory is reserved while Keras imports
            reserving = threading.Thread(target=cold_start.reserve_memory,
                                         args=(jax, local[:per_process]),
                                         name="reserve-gpu-memory", daemon=True)
            reserving.start()
        keras = _import("keras", config)
        if reserving is not None:
            reserving.join()
        TIMELINE.mark("keras_import")

    distribution = None
    num_processes = jax.process_count()
    if per_process * num_processes > 1:
        # Every process lists the same global devices, ordered by process.
        devices = [d for d in jax.devices() if d.platform == platform]
        chosen = [d for p in range(num_processes)
                  for d in [x for x in devices if x.process_index == p][:per_process]]
        # Each process feeds its own shard; we shard the input ourselves.
        distribution = keras.distribution.DataParallel(
            devices=chosen, auto_shard_dataset=False)
        keras.distribution.set_distribution(distribution)
    kind = local[0].device_kind if platform != "cpu" else "cpu"
    return Topology("jax", config.accelerator, num_processes, jax.process_index(),
                    per_process, kind, distribution=distribution, compilation_cache_dir=cache)


def _local_devices(jax, platform: str) -> list:
    """This process's devices of `platform` (none where JAX has no such backend)."""
    try:
        return [d for d in jax.local_devices() if d.platform == platform]
    except RuntimeError:
        return []


def _start_backend(jax, config, what: str, started: dict) -> None:
    """In a thread beside Keras's import: JAX's backend started and its devices found
    and checked (`started`'s local and per_process, or its error), then a GPU's memory
    reserved (cold_start.reserve_memory)."""
    try:
        started["local"] = _local_devices(jax, config.accelerator)
        started["per_process"] = _wanted(config, len(started["local"]), what)
        if config.accelerator == "gpu":
            cold_start.reserve_memory(jax, started["local"][:started["per_process"]])
    except BaseException as error:  # noqa: BLE001 - raised again on the main thread
        started["error"] = error


def _initialize_multi_host(config) -> None:
    """Starts JAX's distributed runtime through keras.distribution.initialize.

    The wait for the other processes is bounded by --coordinator_timeout_seconds:
    a watchdog ends the process with one line if they never come.
    """
    import jax
    import keras

    if config.accelerator == "cpu":
        # CPU collectives across processes need an implementation; gloo ships with jaxlib.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    done = threading.Event()

    def watchdog():
        if not done.wait(config.coordinator_timeout_seconds):
            sys.stderr.write(
                f"error: process {config.process_id} of {config.num_processes} could not "
                f"reach the coordinator at {config.coordinator_address} within "
                f"{config.coordinator_timeout_seconds}s (--coordinator_timeout_seconds)\n")
            sys.stderr.flush()
            os._exit(2)  # the exit code of every "not there" error

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        keras.distribution.initialize(
            job_addresses=config.coordinator_address,
            num_processes=config.num_processes,
            process_id=config.process_id)
    except Exception as error:  # jax raises XlaRuntimeError and others here
        raise TopologyError(
            f"multi-host start failed at {config.coordinator_address} as process "
            f"{config.process_id}/{config.num_processes}: {str(error).splitlines()[0]}")
    finally:
        done.set()

