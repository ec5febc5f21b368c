"""What a user reads on the console of `python app/main.py`, captured from the real
command: progress with the few figures a person watches, no lines about devices the
run does not use, a banner that says what the images are, closing commands that
work as printed, the command that resumes after SIGTERM, and no validation of
random images."""

import json
import os
import pty
import re
import shlex
import signal
import subprocess
import sys

import pytest
from conftest import PATIENCE_SECONDS, ROOT, error_lines, run_cli, tiny_flags
from processes import read_terminal, until
from tensorboard_server import serving

from app.run.summary import closing_lines
from flags import Config

# Lines the frameworks print about devices (CUDA probes, TPU probes) and their preamble,
# and TensorFlow's oneDNN notice (printed on CPUs with AVX-512 VNNI).
DEVICE_NOISE = re.compile(r"cuda|cuInit|tpu|absl::InitializeLog|oneDNN", re.IGNORECASE)


@pytest.fixture(scope="module")
def runs(digits_dir, tmp_path_factory):
    """One tiny CPU run per backend, a line per epoch: {backend: (CompletedProcess, logdir)}."""
    root = tmp_path_factory.mktemp("console")
    found = {}
    for backend in ("tensorflow", "jax"):
        logdir = root / backend
        done = run_cli(*tiny_flags(digits_dir, logdir, f"--backend={backend}", "--verbose=2"))
        assert done.returncode == 0, done.stderr[-3000:]
        found[backend] = done, logdir
    return found


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_progress_shows_the_watched_figures_and_the_logs_keep_every_figure(runs, backend):
    done, logdir = runs[backend]
    lines = [line for line in done.stdout.splitlines() if line.startswith("epoch ")]
    assert [line.split(" - ")[0] for line in lines] == ["epoch 1/2", "epoch 2/2"]
    for line in lines:
        assert len(line) <= 110, line  # was ~900 characters with 20 figures
        for shown in ("loss ", "top-1 ", "val top-1 ", " images/sec", " - $0.0"):
            assert shown in line, (shown, line)
    (banner,) = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert " optimizer=sgd peak_learning_rate=0.2 " in banner, banner  # the recipe's rate
    # (and the accuracy line's advice for a run at chance names --base_learning_rate)
    rest = "\n".join(line for line in done.stdout.splitlines()
                     if line != banner and not line.startswith("top-1: "))
    for hidden in ("targets_reached", "step_time_jitter", "billed_hours", "learning_rate"):
        assert hidden not in rest
    record = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()][-1]
    assert {"epoch_step_time_jitter", "epoch_step_time_stderr_ms", "billed_hours",
            "learning_rate", "usd_per_epoch", "epoch_eval_images_per_sec"} <= set(record)


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_run_writes_every_field_of_summary_jsons_table(runs, backend):
    """The fields the report reads of a training run's summary.json (its table,
    callbacks/records/summary_fields.py) are all in the summary.json a real run wrote,
    the items of its lists with theirs."""
    from callbacks.records import summary_fields

    summary = json.loads((runs[backend][1] / "summary.json").read_text())
    table = (set(summary_fields.RUN_FIELDS) | set(summary_fields.RUN_LISTS)
             | set(summary_fields.RUN_OBJECTS))
    assert table <= set(summary), sorted(table - set(summary))
    assert summary["attempts"]  # a list the table names, never empty after a run
    for name, fields in summary_fields.RUN_LISTS.items():
        for item in summary[name]:
            assert set(fields) <= set(item), (name, sorted(set(fields) - set(item)))


def on_a_terminal(args, stderr_too=False, watch=None):
    """`python app/main.py ARGS` with stdout (and stderr if `stderr_too`) on a real
    terminal (a pty), read until it closes; `watch(process, output so far)` after each
    read. Returns (process, output bytes)."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "app", "main.py"), *args],
                               stdout=follower, cwd=ROOT, env=env,
                               stderr=follower if stderr_too else subprocess.PIPE)
    os.close(follower)
    return process, read_terminal(process, leader, watch)


def test_a_terminal_gets_a_bar_redrawn_in_place(digits_dir, tmp_path):
    """--verbose=auto on a real terminal (a pty): the bar, then the epoch's line."""
    process, output = on_a_terminal(
        tiny_flags(digits_dir, tmp_path / "tty", "--epochs=1", "--verbose=auto"))
    assert process.wait(timeout=PATIENCE_SECONDS) == 0, process.stderr.read()[-2000:]
    text = output.decode()
    assert re.search(r"\repoch 1/1 step \d+/4 \[=*\.*\] \d+ s, ETA \d+ s - loss ", text), text
    assert "\repoch 1/1 - " in text


def test_ctrl_c_on_a_terminal_ends_the_bar_before_the_closing_lines(digits_dir, tmp_path):
    """Ctrl-C while the bar is drawn on a real terminal (a pty, stdout and stderr on
    it as in a shell): the bar's line ends, "status: preempted" and the error line
    each start a line of their own."""
    sent = []

    def interrupt_once_the_bar_is_drawn(process, output):
        if not sent and re.search(rb"\repoch 1/3 step \d+/400", output):
            process.send_signal(signal.SIGINT)
            sent.append(True)

    process, output = on_a_terminal(
        tiny_flags(digits_dir, tmp_path / "tty", "--steps_per_epoch=400", "--epochs=3",
                   "--verbose=auto"), stderr_too=True, watch=interrupt_once_the_bar_is_drawn)
    assert process.wait(timeout=PATIENCE_SECONDS) == 75, output.decode()[-2000:]
    lines = output.decode().replace("\r\n", "\n").split("\n")
    status = [line for line in lines if "status: preempted" in line]
    error = [line for line in lines if "error: preempted (SIGINT)" in line]
    assert status and error, output.decode()[-2000:]
    assert status[0].startswith("status: preempted") and error[0].startswith("error: "), (
        status, error)


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_cpu_run_prints_no_line_about_other_devices(runs, backend):
    done, _ = runs[backend]
    noise = [line for line in (done.stdout + done.stderr).splitlines()
             if DEVICE_NOISE.search(line)]
    assert not noise, noise


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_missing_gpu_is_one_line_before_any_framework_starts(digits_dir, tmp_path, backend):
    """No GPU device files: the error comes before TensorFlow or JAX is imported (it took
    TensorFlow 27-35 s and a screen of CUDA's log lines to find out by importing)."""
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "gpu", f"--backend={backend}",
                               "--accelerator=gpu"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --accelerator=gpu but this host has no GPU (no /dev/nvidia* or /dev/kfd "
        "device); use --accelerator=cpu"]
    assert not (tmp_path / "gpu").exists()


def test_a_framework_without_gpu_support_says_what_to_install():
    """Where the GPU exists but the framework sees none: what to install, per backend."""
    from types import SimpleNamespace

    from app.engine.distribute import TopologyError, _wanted

    for backend, hint in (("tensorflow", "tensorflow[and-cuda]"), ("jax", "jax[cuda13]")):
        config = SimpleNamespace(accelerator="gpu", backend=backend, num_devices=0)
        with pytest.raises(TopologyError, match="no GPU is visible") as raised:
            _wanted(config, 0, "GPU")
        assert hint in str(raised.value) and "\n" not in str(raised.value)


def test_the_closing_commands_work_as_printed(runs):
    done, logdir = runs["tensorflow"]
    view = next(line for line in done.stdout.splitlines() if line.startswith("view:"))
    report = next(line for line in done.stdout.splitlines() if line.startswith("report:"))
    # The running interpreter, not whatever `python` or `tensorboard` is on PATH.
    for line in (view, report):
        assert shlex.split(line.split(":", 1)[1])[0] in (sys.executable,
                                                         os.path.relpath(sys.executable, ROOT))
    printed = shlex.split(report.split(":", 1)[1])
    made = subprocess.run(printed, cwd=ROOT, capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS)
    assert made.returncode == 0, made.stderr[-2000:]
    assert (logdir / "report" / "report.html").exists()
    with serving(shlex.split(view.split(":", 1)[1]), cwd=ROOT) as base:
        assert base.startswith("http://")  # the printed command serves the run


def test_output_to_a_pipe_gets_a_progress_line_within_a_long_epoch(digits_dir, tmp_path):
    """With stdout a pipe (nohup, CI, `| tee`) the epoch is not silent
    until it ends: a progress line every BENCH_PROGRESS_LINE_SECONDS (30 s by default;
    1 s here), each a whole line (no carriage return)."""
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "pipe", "--epochs=1",
                               "--steps_per_epoch=300", "--verbose=auto"),
                   env={"BENCH_PROGRESS_LINE_SECONDS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\r" not in done.stdout
    within = [line for line in done.stdout.splitlines()
              if re.match(r"epoch 1/1 step \d+/300 \[=*\.*\] \d+ s, ETA ", line)]
    assert within, done.stdout[-2000:]
    assert re.search(r"^epoch 1/1 - \d+ s - loss ", done.stdout, re.MULTILINE)


def test_the_accuracy_line_names_the_epoch_of_the_best():
    summary = {"images_per_sec": 10.0, "images_per_sec_per_device": 10.0, "num_replicas": 1,
               "mfu": None, "val_top1_by_epoch": [0.5, 0.9944, 0.97], "targets": [],
               "cost_usd": None, "status": "completed", "logdir": "runs/x"}
    text = closing_lines(summary)
    assert "top-1: 0.9700 after epoch 3; best 0.9944 at epoch 2" in text


@pytest.mark.parametrize("mfu, shown", [(0.219, "MFU 21.9%"), (0.0003, "MFU 0.03%"),
                                        (0.0123, "MFU 1.2%"), (0.0, "MFU 0.0%")])
def test_mfu_is_printed_with_the_digits_it_needs(mfu, shown):
    """A small model's MFU is 0.03%, which one decimal printed as 0.0%."""
    summary = {"images_per_sec": 10.0, "images_per_sec_per_device": 10.0, "num_replicas": 1,
               "mfu": mfu, "val_top1_by_epoch": [], "targets": [], "cost_usd": None,
               "status": "completed", "logdir": "runs/x"}
    assert f"per device x 1), {shown}" in closing_lines(summary)


def test_the_command_printed_after_sigterm_resumes_the_run(digits_dir, tmp_path):
    """The default logdir is named by the config (runs/MODEL-DATASET-BACKEND-FINGERPRINT),
    relative to the current folder: the error line's command names it, and resumes it."""
    args = [sys.executable, os.path.join(ROOT, "app", "main.py"), f"--data_dir={digits_dir}",
            "--image_size=8", "--epochs=6", "--steps_per_epoch=4", "--validation_steps=2",
            "--verbose=0"]
    env = {**{k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"},
           "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    # The first epoch is logged (the file itself is created when training starts).
    until(process, lambda: any(p.stat().st_size for p in tmp_path.glob("runs/*/metrics.jsonl")),
          "the first epoch in metrics.jsonl")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    assert process.returncode == 75, stderr[-2000:]
    (line,) = error_lines(stderr)
    command = line.split("resume with: ", 1)[1]
    (folder,) = tmp_path.glob("runs/*")
    assert command.endswith(f"--logdir=runs/{folder.name}")
    again = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=PATIENCE_SECONDS)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming from" in again.stdout and len(list(tmp_path.glob("runs/*"))) == 1


def test_synthetic_data_is_validated_only_when_asked(tmp_path):
    done = run_cli("--backend=jax", "--dataset=synthetic", "--image_size=32",
                   "--global_batch_size=8", "--epochs=1", "--steps_per_epoch=4",
                   "--verbose=2", f"--logdir={tmp_path / 'synthetic'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "epochs=1 steps_per_epoch=4 image_size=32" in done.stdout  # as asked
    summary = json.loads((tmp_path / "synthetic" / "summary.json").read_text())
    assert summary["val_top1"] is None and "top-1: no validation" in done.stdout
    assert Config(dataset="synthetic").validation_steps == -1  # the default: none
    assert Config(dataset="synthetic", validation_steps=5).validation_steps == 5  # asked
    assert Config(dataset="digits").validation_steps == 0  # real data: every image


def test_an_epoch_of_synthetic_data_is_a_measurement_not_an_imagenet_pass(tmp_path):
    """Without --steps_per_epoch an epoch of synthetic data is 200
    steps (an ImageNet pass was 20,018 at batch 64: 28.7 h on a CPU), said in the
    banner with the run's epochs; --steps_per_epoch still sets it."""
    done = run_cli("--backend=jax", "--dataset=synthetic", "--image_size=8",
                   "--global_batch_size=8", "--epochs=1", "--verbose=2",
                   f"--logdir={tmp_path / 'nominal'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("epochs=1 steps_per_epoch=200 [synthetic data's nominal epoch] "
            in done.stdout), done.stdout[:2000]
    summary = json.loads((tmp_path / "nominal" / "summary.json").read_text())
    assert summary["steps_per_epoch"] == 200 and summary["epochs_completed"] == 1
    assert summary["images_per_sec"] > 0  # measured: the warm-up is a part of the epoch


@pytest.mark.parametrize("top1, marked", [(0.1, True), (0.108, True), (0.12, False),
                                          (0.93, False)])
def test_a_top1_at_chance_is_marked_not_yet_meaningful(top1, marked):
    """10 classes, 10,000 images: within 3 standard errors (0.009) of 0.1 is chance."""
    from app.run.summary import at_chance

    assert at_chance(top1, 10, 10_000) is marked
    summary = {"images_per_sec": 10.0, "images_per_sec_per_device": 10.0, "num_replicas": 1,
               "mfu": None, "val_top1_by_epoch": [top1], "targets": [], "cost_usd": None,
               "status": "completed", "logdir": "runs/x", "num_classes": 10,
               "val_top1_at_chance": at_chance(top1, 10, 10_000)}
    assert ("(at chance for 10 classes: not yet meaningful; the images arrive normalized by "
            "ImageNet's mean and standard deviation (-2.1 to 2.6): a model that rescales them "
            "again, e.g. Rescaling(1/255.), sees almost nothing; or train longer)"
            in closing_lines(summary)) is marked


RESCALING_MODEL = """
import keras
from keras import layers


def make_model(num_classes, image_size):  # as Keras's tutorials write one
    inputs = keras.Input((image_size, image_size, 3))
    x = layers.Rescaling(1 / 255.0)(inputs)
    x = layers.Conv2D(8, 3, activation="relu")(x)
    x = layers.Conv2D(8, 3, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
"""


def test_a_model_stuck_at_chance_is_told_the_input_range_and_the_rate(digits_dir, tmp_path):
    """A 2-conv CNN with Rescaling(1/255.) stayed at chance for 15 epochs
    and was told "train longer"; the recipe (AdamW at 0.000125) was in no line. The banner
    names the optimizer and peak rate; the closing line, the input's range and the rate."""
    (tmp_path / "tutorial.py").write_text(RESCALING_MODEL)
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "run", "--epochs=1", "--seed=4",
                               f"--model={tmp_path / 'tutorial.py'}:make_model"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["val_top1_at_chance"] is True, summary["val_top1"]
    rate = summary["peak_learning_rate"]
    assert summary["optimizer"] == "adamw" and rate == 2.5e-4 * (64 / 256) ** 0.5
    banner = done.stdout.splitlines()[0]
    assert f" optimizer=adamw peak_learning_rate={rate:g} " in banner, banner
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("top-1: ")]
    assert line.endswith(
        "(at chance for 10 classes: not yet meaningful; the images arrive normalized by "
        "ImageNet's mean and standard deviation (-2.1 to 2.6): a model that rescales them "
        f"again, e.g. Rescaling(1/255.), sees almost nothing; its peak learning rate was "
        f"{rate:g} (adamw), --base_learning_rate sets it (per 256 images); or train longer)")


def test_a_price_of_ones_own_closes_as_that_price(digits_dir, tmp_path):
    """--price_per_hour_usd=2.5 closed with "at $2.5/h (gcp-n2-standard-4,
    on_demand)", a catalog row and pricing it did not use."""
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "run", "--epochs=1",
                               "--price_per_hour_usd=2.5"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("cost: ")]
    hours = summary["billed_seconds"] / 3600
    assert line == (f"cost: ${2.5 * hours:,.4f} for {hours:.4f} billed hours at $2.5/h "
                    "(--price_per_hour_usd, yours)")
    assert summary["machines"] is None and summary["price_per_hour_usd"] == 2.5
