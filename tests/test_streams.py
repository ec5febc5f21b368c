"""Real images on the JAX backend without TensorFlow: --input_pipeline end to end.

Each run is the real CLI in a subprocess whose `import tensorflow` fails (the
GPU hosts have no TensorFlow), as a user on such a machine would run it.
"""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import PATIENCE_SECONDS, ROOT, error_lines, run_cli
from image_files import write_folder_dataset
from processes import until

from callbacks.records.metrics_file import read_metrics

NO_TF = {"PYTHONPATH": os.path.join(os.path.dirname(__file__), "no_tensorflow")}


def summary_of(logdir):
    return json.loads((logdir / "summary.json").read_text())


@pytest.mark.slow
def test_digits_on_jax_with_grain_and_no_tensorflow_learns(digits_dir, tmp_path):
    """The default job, on JAX through grain, with TensorFlow unimportable."""
    logdir = tmp_path / "digits-grain"
    done = run_cli("--backend=jax", "--input_pipeline=grain", f"--data_dir={digits_dir}",
                   f"--logdir={logdir}", "--verbose=0", "--seed=1", env=NO_TF)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summary_of(logdir)
    assert summary["input_pipeline"] == "grain" and "tensorflow" not in summary["versions"]
    assert summary["best_val_top1"] >= 0.97
    assert summary["validation_examples"] == 360
    assert summary["eval_images_per_sec"] > 0


def test_auto_means_device_for_a_dataset_that_fits_on_both_backends(digits_dir, tmp_path):
    """The digits fit many times in the memory share: auto holds them decoded, in the
    JAX device's memory (TensorFlow absent) or in tf.data's cache, and says how much."""
    flags = [f"--data_dir={digits_dir}", "--image_size=8", "--epochs=1",
             "--steps_per_epoch=2", "--validation_steps=1", "--verbose=0"]
    jax_run = run_cli("--backend=jax", f"--logdir={tmp_path / 'jax'}", *flags, env=NO_TF)
    assert jax_run.returncode == 0, jax_run.stderr[-3000:]
    assert "input_pipeline=device" in jax_run.stdout
    held = summary_of(tmp_path / "jax")["input"]
    assert held["held_in"] == "host memory" and 0 < held["bytes_held"] < 1797 * 64 * 2
    tf_run = run_cli(f"--logdir={tmp_path / 'tf'}", *flags)
    assert tf_run.returncode == 0, tf_run.stderr[-3000:]
    assert summary_of(tmp_path / "tf")["input_pipeline"] == "device"
    assert summary_of(tmp_path / "tf")["input"]["held_in"] == "host memory (tf.data's cache)"


def test_auto_means_gpu_only_where_the_gpu_pipeline_serves(monkeypatch):
    """On JAX, auto is the gpu pipeline for JPEG files with the standard preset on GPUs
    with nvImageCodec installed; every other case keeps grain (tf.data on TensorFlow),
    and a pipeline named on the command line is always kept."""
    from preprocessing import streams
    from preprocessing.spec import InputSpec

    jpegs = [("a/x.JPEG", 0), ("b/y.jpg", 1)]
    monkeypatch.setattr(streams, "nvimgcodec_installed", lambda: True)

    def auto(jpeg_records=jpegs, preset="standard", **spec):
        spec = {"data_dir": "", "image_size": 0, "backend": "jax",
                "accelerator": "gpu", **spec}
        return streams.choose(InputSpec(**spec), preset, streams.jpeg_paths(jpeg_records))

    assert auto() == "gpu"
    assert auto(jpeg_records=[("a/x.png", 0)] + jpegs) == "grain"  # digits' PNGs
    assert auto(jpeg_records=[(b"bytes", 0)]) == "grain"  # TFDS records
    assert auto(jpeg_records=[]) == "grain"
    assert auto(preset="heavy") == "grain"  # the gpu pipeline has the standard preset only
    assert auto(accelerator="cpu") == "grain"
    assert auto(accelerator="tpu") == "grain"
    assert auto(backend="tensorflow") == "tf.data"
    assert auto(input_pipeline="grain") == "grain"
    monkeypatch.setattr(streams, "nvimgcodec_installed", lambda: False)
    assert auto() == "grain"


def test_folder_of_jpegs_trains_on_grain_without_tensorflow(tmp_path):
    root = tmp_path / "pets"
    write_folder_dataset(str(root), corrupt=2)
    logdir = tmp_path / "folder-grain"
    done = run_cli("--backend=jax", "--input_pipeline=grain", f"--dataset=folder:{root}",
                   "--model=small_resnet", "--image_size=32", "--global_batch_size=8",
                   "--preprocessing=standard", "--epochs=2", "--verbose=0", "--seed=2",
                   f"--logdir={logdir}", env=NO_TF)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summary_of(logdir)
    assert summary["input_pipeline"] == "grain" and summary["preprocessing"] == "standard"
    assert summary["train_examples"] == 3 * 12 + 2 and summary["validation_examples"] == 12
    assert summary["corrupt_images_skipped"] == 2  # each broken file once, not per epoch
    assert summary["val_top1_by_epoch"] and summary["images_per_sec"] > 0


@pytest.mark.parametrize("flags, message", [
    (["--input_pipeline=gpu"], "--input_pipeline=gpu decodes JPEGs on the GPU"),
    (["--input_pipeline=gpu", "--backend=jax"], "needs --backend=jax --accelerator=gpu"),
    (["--input_pipeline=tf.data", "--backend=jax"], "needs TensorFlow"),
    (["--input_pipeline=dali"], "flag --input_pipeline=dali: value should be one of"),
])
def test_a_pipeline_that_cannot_run_here_is_one_line(flags, message, tmp_path, digits_dir):
    logdir = tmp_path / "never"
    done = run_cli(*flags, f"--data_dir={digits_dir}", f"--logdir={logdir}", env=NO_TF)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    assert not logdir.exists()


def _start(args):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(NO_TF)
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "app", "main.py"), *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_mid_epoch_resume_on_grain_continues_the_same_input_order(digits_dir, tmp_path):
    """Stopped by SIGTERM inside epoch 2 and resumed, a seeded run ends with exactly
    the weights of an uninterrupted one (judged by the last validation loss): only
    possible if the resumed attempt saw the same images in the same order."""
    flags = ["--backend=jax", "--input_pipeline=grain", f"--data_dir={digits_dir}",
             "--image_size=8", "--epochs=3", "--steps_per_epoch=20", "--global_batch_size=16",
             "--seed=7", "--verbose=0", "--throughput_warmup_steps=1"]
    straight = run_cli(*flags, f"--logdir={tmp_path / 'straight'}", env=NO_TF)
    assert straight.returncode == 0, straight.stderr[-3000:]

    logdir = tmp_path / "stopped"
    # A checkpoint every 5 steps: ckpt-25 lands mid-epoch 2; SIGTERM once it is
    # there stops the run at step 25 or the step after, mid-epoch either way.
    process = _start([*flags, f"--logdir={logdir}", "--checkpoint_every_steps=5"])
    mid_epoch = logdir / "checkpoints" / "ckpt-0000000025"
    until(process, mid_epoch.exists, "checkpoint 25", every=0.02)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    assert process.returncode == 75, stderr[-3000:]
    saved = sorted(os.listdir(logdir / "checkpoints"))[-1]
    step = int(saved.split("-")[1])
    assert 20 < step < 40, saved  # a mid-epoch checkpoint
    state = json.loads((logdir / "checkpoints" / saved / "state.json").read_text())
    assert state["input_state"] is not None
    resumed = run_cli(*flags, f"--logdir={logdir}", "--checkpoint_every_steps=5", env=NO_TF)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step {step})" in resumed.stdout
    want = read_metrics(str(tmp_path / "straight"))[-1]["val_loss"]
    got = read_metrics(str(logdir))[-1]["val_loss"]
    assert got == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_input_benchmark_times_the_grain_pipeline_alone(digits_dir, tmp_path):
    logdir = tmp_path / "bench"
    done = run_cli("--benchmark=input", "--backend=jax", "--input_pipeline=grain",
                   f"--data_dir={digits_dir}", "--image_size=8", "--steps_per_epoch=10",
                   f"--logdir={logdir}", env=NO_TF)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summary_of(logdir)
    assert summary["mode"] == "input_benchmark" and summary["input_pipeline"] == "grain"
    assert summary["input_images_per_sec"] > 0 and summary["model_images_per_sec"] > 0
    assert "input_pipeline=grain" in done.stdout
