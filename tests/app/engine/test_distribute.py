"""Distribution on CPU: MirroredStrategy and DataParallel over 2 and 4 devices, a real
two-process JAX run on loopback, and every way a device or host can be missing."""

import json
import os
import re
import socket
import subprocess
import sys

import pytest
from checkpoint_eval import evaluate_latest_checkpoint
from conftest import ROOT, error_lines, run_cli, tiny_flags

from app import main as app
from flags import Config


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mirrored_strategy_over_four_logical_cpus(digits_dir, tmp_path):
    summary = app.run(Config(data_dir=digits_dir, logdir=str(tmp_path / "m4"), image_size=8,
                               epochs=1, steps_per_epoch=4, validation_steps=2, verbose="0",
                               num_devices=4, global_batch_size=32, seed=1))
    assert summary["strategy"] == "MirroredStrategy" and summary["num_replicas"] == 4
    assert summary["per_replica_batch_size"] == 8 and summary["val_top1"] is not None


def test_mirrored_strategy_with_steps_per_execution_trains_without_xla(digits_dir, tmp_path):
    """Keras 3.15's fit fails here when the step is XLA-compiled (stack notes); the
    app compiles it without XLA instead, and it trains and evaluates every image."""
    summary = app.run(Config(data_dir=digits_dir, logdir=str(tmp_path / "m2"), image_size=8,
                               epochs=2, steps_per_epoch=4, steps_per_execution=2, verbose="0",
                               num_devices=2, global_batch_size=32, seed=1))
    assert summary["num_replicas"] == 2 and summary["jit_compile"] is False
    assert summary["epochs_completed"] == 2 and summary["images_per_sec"] > 0
    assert all(t is not None for t in summary["val_top1_by_epoch"])


def test_data_parallel_over_four_host_devices(digits_dir, tmp_path):
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "dp4", "--backend=jax", "--num_devices=4",
                               "--global_batch_size=32", "--steps_per_execution=2"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "dp4" / "summary.json").read_text())
    assert summary["strategy"] == "DataParallel" and summary["num_replicas"] == 4
    assert summary["devices_per_process"] == 4 and summary["epochs_completed"] == 2


@pytest.mark.parametrize("devices", [4, 8])
def test_any_number_of_jax_host_devices_is_safe_on_a_small_machine(tmp_path, devices):
    """More devices than cores (CI has 2): the evaluation dispatches up to 200 steps ahead,
    past XLA's in-flight limit per device, which used to deadlock the all-reduce
    and abort the process (see environment.cpu_client_threads)."""
    logdir = tmp_path / f"host{devices}"
    done = run_cli("--backend=jax", f"--num_devices={devices}", "--dataset=synthetic",
                   "--image_size=32", "--global_batch_size=16", "--epochs=1",
                   "--steps_per_epoch=4", "--validation_steps=200", "--verbose=0",
                   f"--logdir={logdir}", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["num_replicas"] == devices and summary["status"] == "completed"


def test_two_jax_processes_on_loopback_train_in_lockstep_and_write_one_summary(
        digits_dir, tmp_path):
    """Two OS processes, a real coordinator; process 1 is configured the way
    launchers do it, through environment variables."""
    logdir = tmp_path / "two-hosts"
    address = f"127.0.0.1:{free_port()}"
    args = [sys.executable, os.path.join(ROOT, "app", "main.py"),
            *tiny_flags(digits_dir, logdir, "--backend=jax", "--global_batch_size=32")]
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    first = subprocess.Popen([*args, "--num_processes=2", "--process_id=0",
                              f"--coordinator_address={address}"], env=env, cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**env, "JAX_NUM_PROCESSES": "2",
                                              "JAX_PROCESS_ID": "1",
                                              "JAX_COORDINATOR_ADDRESS": address})
    outputs = [p.communicate(timeout=300) for p in (first, second)]
    assert first.returncode == 0, outputs[0][1][-3000:]
    assert second.returncode == 0, outputs[1][1][-3000:]
    checksums = [re.search(r"process (\d) of 2: completed, weights checksum (\S+)", out).groups()
                 for out, _ in outputs]
    assert [c[0] for c in checksums] == ["0", "1"]
    assert checksums[0][1] == checksums[1][1]  # identical weights: lockstep
    assert "status: completed" in outputs[0][0] and "status:" not in outputs[1][0]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["num_processes"] == 2 and summary["num_replicas"] == 2
    assert summary["devices_per_process"] == 1 and summary["per_replica_batch_size"] == 16
    assert summary["machines"] == 2  # both hosts are billed
    assert len([f for f in os.listdir(logdir) if f.startswith("events")]) == 1
    assert len(os.listdir(logdir / "checkpoints")) == 2


def test_an_unreachable_coordinator_is_a_bounded_wait_and_one_line(digits_dir, tmp_path):
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "alone", "--backend=jax",
                               "--num_processes=2", "--process_id=1",
                               f"--coordinator_address=127.0.0.1:{free_port()}",
                               "--coordinator_timeout_seconds=5"), timeout=120)
    assert done.returncode == 2
    assert "could not reach the coordinator at 127.0.0.1:" in error_lines(done.stderr)[0]
    assert not (tmp_path / "alone").exists()


@pytest.mark.parametrize("args, message", [
    (["--accelerator=tpu", "--tpu=my-tpu-v4"], "--tpu=my-tpu-v4: no TPU reachable"),
    (["--accelerator=tpu", "--backend=jax"], "no TPU device is visible"),
    (["--accelerator=gpu", "--num_devices=2"], "this host has no GPU"),
])
def test_missing_accelerators_are_named_and_nothing_falls_back(digits_dir, tmp_path, args,
                                                               message):
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "none"), *args, "--global_batch_size=32")
    assert done.returncode == 2 and message in error_lines(done.stderr)[0]
    assert not (tmp_path / "none").exists()


def tpu_available():
    return os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0")


@pytest.mark.skipif(tpu_available(), reason="a Cloud TPU VM has a TPU")
def test_no_local_tpu_on_tensorflow_is_one_line_and_tensorflow_never_starts(tmp_path):
    """Checked before TensorFlow is imported: stderr is the error line alone (none of
    TensorFlow's log lines after it), and no folder is made."""
    done = run_cli("--accelerator=tpu", "--backend=tensorflow", "--dataset=synthetic",
                   f"--logdir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "error: --accelerator=tpu --tpu=local: no TPU reachable (this host has no TPU device: "
        "no /dev/accel* or /dev/vfio/*); use --accelerator=cpu, or --tpu=NAME for a TPU node"]
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(not tpu_available(), reason="needs a Cloud TPU VM (no /dev/accel0 here)")
def test_tpu_strategy_trains_on_a_tpu_vm(digits_dir, tmp_path):
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "tpu", "--accelerator=tpu",
                               "--global_batch_size=64"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "tpu" / "summary.json").read_text())
    assert summary["strategy"] == "TPUStrategy" and summary["precision"] == "mixed_bfloat16"


@pytest.mark.parametrize("visible,devices,processes,flags,scheduled", [
    ("0", 0, 1, None, False), ("0,1", 0, 1, None, True), ("0,1", 1, 1, None, False),
    ("0", 0, 2, None, True), ("0,1", 0, 1, "--xla_gpu_enable_latency_hiding_scheduler=false",
                              False)])
def test_xla_schedules_for_overlap_only_where_there_are_collectives(visible, devices,
                                                                   processes, flags, scheduled):
    """The latency-hiding scheduler on the JAX GPU path where a step has collectives to
    hide (several GPUs, or several processes), not on one GPU in one process, where it
    only lengthened the cold compile; a user's own setting is kept."""
    code = ("import json, os, sys, types\n"
            f"sys.path.insert(0, {ROOT!r})\n"
            "from app.engine.distribute import prepare_backend\n"
            "prepare_backend(types.SimpleNamespace(backend='jax', accelerator='gpu',"
            f" num_devices={devices}, num_processes={processes}, profile_steps=''))\n"
            "print(json.dumps(os.environ.get('XLA_FLAGS', '')))\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["CUDA_VISIBLE_DEVICES"] = visible
    if flags:
        env["XLA_FLAGS"] = flags
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert ("--xla_gpu_enable_latency_hiding_scheduler=true" in result) == scheduled, result
    assert flags is None or flags in result


@pytest.mark.parametrize("accelerator,preset,expected", [
    ("gpu", None, "32"), ("gpu", "4", "4"), ("cpu", None, None)])
def test_gpu_runs_on_jax_get_32_hardware_queues_unless_the_user_chose(accelerator, preset,
                                                                       expected):
    """CUDA_DEVICE_MAX_CONNECTIONS=32 on the JAX GPU path (nvJPEG's streams otherwise share
    hardware queues with XLA's and wait behind training steps), set before JAX starts;
    a value the user set is kept, and other runs are left alone."""
    code = ("import json, os, sys, types\n"
            f"sys.path.insert(0, {ROOT!r})\n"
            "from app.engine.distribute import prepare_backend\n"
            f"prepare_backend(types.SimpleNamespace(backend='jax', accelerator={accelerator!r},"
            " num_devices=1, num_processes=1, profile_steps=''))\n"
            "print(json.dumps([os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'),"
            " 'jax' in sys.modules]))\n")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    if preset:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = preset
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [expected, False]


def test_mirrored_val_top1_is_the_top1_of_the_model_the_run_saves(digits_dir, tmp_path):
    """With two replicas each kept its own BatchNorm moving statistics, fit's
    evaluation used both and the checkpoint replica 0's (1 image in 360 differed).
    The last checkpoint, evaluated apart on one device, gives the printed figures."""
    import numpy as np

    from callbacks.records.metrics_file import read_metrics

    config = Config(data_dir=digits_dir, logdir=str(tmp_path / "saved"), image_size=8,
                    epochs=2, steps_per_epoch=6, verbose="0", num_devices=2,
                    global_batch_size=64, seed=6)
    summary = app.run(config)
    losses, hits = evaluate_latest_checkpoint(config, digits_dir)
    assert len(hits) == 360
    assert summary["val_top1"] == pytest.approx(np.mean(hits), abs=1e-6)
    assert read_metrics(config.logdir)[-1]["val_loss"] == pytest.approx(np.mean(losses),
                                                                         rel=1e-4)


KERAS_IMPORT = """
import json, sys
from app.engine import distribute
from flags import Config

config = Config(backend="jax", logdir="x")
distribute.prepare_backend(config)
distribute._import("keras", config)  # as make_topology imports it
during = {name: name in sys.modules
          for name in ("keras", "sklearn", "matplotlib", "pandas", "requests")}
import keras, sklearn.datasets, matplotlib.pyplot, pandas, requests  # as usual afterwards
from keras.src.trainers.data_adapters import array_slicing
print(json.dumps({"during": during, "backend": keras.backend.backend(),
                  "keras_saw_pandas": array_slicing.pandas is not None,
                  "pandas_after": pandas.__name__, "requests_after": requests.__name__,
                  "finders": sum(type(f).__name__ == "_Unimportable" for f in sys.meta_path)}))
"""


def test_keras_is_imported_without_the_libraries_it_would_load_for_nothing(tmp_path):
    """make_topology's import of Keras: scikit-learn, matplotlib, requests (installed
    here) and pandas (a stand-in here, with what Keras reads of it) are not loaded with
    Keras, import normally afterwards, and no import hook is left behind."""
    from conftest import run_python

    (tmp_path / "pandas").mkdir()
    (tmp_path / "pandas" / "__init__.py").write_text("class Series: pass\nclass DataFrame: pass\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = run_python(KERAS_IMPORT, {"KERAS_BACKEND": "", "JAX_PLATFORMS": "cpu",
                                       "PYTHONPATH": path})
    assert result["during"] == {"keras": True, "sklearn": False, "matplotlib": False,
                                "pandas": False, "requests": False}
    assert not result["keras_saw_pandas"]
    assert (result["pandas_after"], result["requests_after"]) == ("pandas", "requests")
    assert result["backend"] == "jax" and result["finders"] == 0


TENSORFLOW_IMPORT = """
import json, sys
from app.engine import distribute
from flags import Config

config = Config(backend="tensorflow", logdir="x")
tf = distribute._import("tensorflow", config)  # as make_topology imports it
during = {name: name in sys.modules
          for name in ("keras", "sklearn", "matplotlib", "pandas", "requests")}
import sklearn.datasets, matplotlib.pyplot  # as usual afterwards
print(json.dumps({"during": during, "sum": int(tf.reduce_sum(tf.constant([2, 3]))),
                  "keras_after": tf.keras.layers.Dense(2).units,
                  "digits": len(sklearn.datasets.load_digits().target),
                  "finders": sum(type(f).__name__ == "_Unimportable" for f in sys.meta_path)}))
"""


def test_tensorflow_is_imported_without_what_its_keras_would_load_for_nothing():
    """TensorFlow imports Keras (tf.keras): make_topology's import of it leaves out
    scikit-learn and matplotlib (installed here) as Keras's own import does, keeps
    requests (TensorFlow's preemption handling imports it), and TensorFlow, tf.keras
    and the left-out libraries all work afterwards, with no import hook left."""
    from conftest import run_python

    result = run_python(TENSORFLOW_IMPORT, {"KERAS_BACKEND": "tensorflow"})
    assert result["during"] == {"keras": True, "sklearn": False, "matplotlib": False,
                                "pandas": False, "requests": True}
    assert (result["sum"], result["keras_after"], result["digits"]) == (5, 2, 1797)
    assert result["finders"] == 0


NO_CACHE = """
import json, jax
from jax._src import compiler
from app.engine import cold_start
folder = cold_start.persistent_compilation_cache(jax)
options = compiler.get_compile_options(1, 1)  # kept: debug_options is a view into it
debug = options.executable_build_options.debug_options
print(json.dumps({"folder": folder, "autotune_dir": debug.xla_gpu_per_fusion_autotune_cache_dir,
                  "kernel_cache": debug.xla_gpu_kernel_cache_file}))
"""


def test_an_empty_cache_setting_leaves_no_xla_cache_in_the_working_folder():
    """JAX_COMPILATION_CACHE_DIR="" turns the cache off, XLA's own caches with it: JAX
    alone reads "" as a folder and sends XLA's autotuning results to a relative
    ./xla_gpu_per_fusion_autotune_cache_dir (found on the H200, where it made later
    cold compiles 10x faster than the first)."""
    from conftest import run_python

    result = run_python(NO_CACHE, {"JAX_COMPILATION_CACHE_DIR": "", "JAX_PLATFORMS": "cpu",
                                   "KERAS_BACKEND": "jax"})
    assert result == {"folder": None, "autotune_dir": "", "kernel_cache": ""}
