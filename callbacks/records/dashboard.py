"""TensorBoard's vocabulary: where each log key goes, under which tag, with which unit.

Laid out as Keras's own TensorBoard callback lays out a run, so the dashboard reads
the same way:
- two runs per run folder, `train/` and `validation/`; a validation figure has the
  same tag as its training twin (`val_top1` is `accuracy/epoch_top1` in
  `validation/`), so TensorBoard draws the two on one chart; a figure of other
  work (evaluation speed) has a tag of its own;
- `epoch_*` tags have the epoch (1-based) on the x axis, `batch_*` tags the global
  training step: one x-axis meaning per tag, never two on one chart. A key named
  `epoch_X` (an epoch's figure; its run-wide twin in summary.json, if any, is `X`)
  is the tag `<group>/epoch_X`;
- the run's own figures (summary.json's) as HParams columns: HPARAM_FIGURES.
Each tag carries a description with its unit (TensorBoard shows it on the card).
"""

from __future__ import annotations

import dataclasses

from callbacks.figures.spread import SPREAD

TRAIN, VALIDATION = "train", "validation"


@dataclasses.dataclass(frozen=True)
class Figure:
    """One log key as TensorBoard shows it."""

    group: str  # the dashboard section: throughput, accuracy, loss, cost, ...
    name: str  # the tag's last part, without the epoch_/batch_ prefix
    run: str  # TRAIN or VALIDATION
    unit: str
    description: str

    def tag(self, prefix: str = "") -> str:
        """The tag of this figure's `prefix` series ("epoch" or "batch"; "" for a
        series of its own, like the sweep's)."""
        return f"{self.group}/{prefix}_{self.name}" if prefix else f"{self.group}/{self.name}"

    @property
    def text(self) -> str:
        """The description TensorBoard shows (Markdown), unit included."""
        return f"{self.description} *Unit: {self.unit}.*"


FIGURES = {
    "loss": Figure("loss", "loss", TRAIN, "cross-entropy (nats)",
                    "Training loss (label smoothing included): for an epoch, its mean over "
                    "the epoch; for a batch, the mean so far in its epoch."),
    "val_loss": Figure("loss", "loss", VALIDATION, "cross-entropy (nats)",
                        "Validation loss over the validation images."),
    "top1": Figure("accuracy", "top1", TRAIN, "fraction (1 = 100%)",
                    "Training top-1 accuracy on augmented images, mean over the epoch."),
    "val_top1": Figure("accuracy", "top1", VALIDATION, "fraction (1 = 100%)",
                        "Validation top-1 accuracy: the study's measure."),
    "top5": Figure("accuracy", "top5", TRAIN, "fraction (1 = 100%)",
                    "Training top-5 accuracy, mean over the epoch."),
    "val_top5": Figure("accuracy", "top5", VALIDATION, "fraction (1 = 100%)",
                        "Validation top-5 accuracy."),
    "best_val_top1": Figure("accuracy", "best_top1", VALIDATION, "fraction (1 = 100%)",
                             "Best validation top-1 so far."),
    "targets_reached": Figure("accuracy", "targets_reached", VALIDATION, "count",
                               "How many --target_top1 values validation top-1 has reached."),
    "epoch_images_per_sec": Figure(
        "throughput", "images_per_sec", TRAIN, "images/second",
        "This epoch's training images per second over all devices, steady state: its "
        "timed steps (compilation and warm-up excluded) over their seconds."),
    "running_images_per_sec": Figure(
        "throughput", "running_images_per_sec", TRAIN, "images/second",
        "The current epoch's steady-state training images per second from its first timed "
        "step up to this step (what the progress bar shows)."),
    "epoch_eval_images_per_sec": Figure(
        "throughput", "eval_images_per_sec", VALIDATION, "images/second",
        "Validation images per second over all devices in this epoch's evaluation pass."),
    "images_per_sec_wall": Figure("throughput", "images_per_sec_wall", TRAIN, "images/second",
                                   "Training images per wall-clock second over the run so "
                                   "far, epoch-end work (evaluation, checkpoints, summaries) "
                                   "included."),
    "epoch_images_per_sec_per_device": Figure(
        "throughput", "images_per_sec_per_device", TRAIN, "images/second",
        "This epoch's steady-state training images per second of one device."),
    "epoch_timed_steps": Figure("throughput", "timed_steps", TRAIN, "steps",
                                 "Training steps this epoch's steady-state figures time."),
    "epoch_step_time_ms": Figure("throughput", "step_time_ms", TRAIN, "milliseconds",
                                  "Mean time of one training step in this epoch's steady "
                                  "state."),
    "epoch_step_time_stderr_ms": Figure("throughput", "step_time_stderr_ms", TRAIN,
                                         "milliseconds",
                                         "Standard error of this epoch's mean step time."),
    "epoch_step_time_jitter": Figure("throughput", "step_time_jitter", TRAIN, "ratio",
                                      "Spread of this epoch's step times: standard deviation "
                                      "/ mean."),
    "cost_usd": Figure("cost", "cost_usd", TRAIN, "US dollars",
                        "Dollars billed so far: the whole process's wall-clock time (start-up, "
                        "compilation, evaluation and earlier attempts included) at the "
                        "machine's price."),
    "billed_hours": Figure("cost", "billed_hours", TRAIN, "hours",
                            "Wall-clock hours billed so far, earlier attempts included."),
    "usd_per_epoch": Figure("cost", "usd_per_epoch", TRAIN, "US dollars",
                             "Dollars billed for this epoch alone."),
    "projected_cost_usd": Figure("cost", "projected_cost_usd", TRAIN, "US dollars",
                                  "The whole run's cost if the remaining epochs go at this "
                                  "epoch's pace."),
    "billed_usd_per_million_images": Figure(
        "cost", "billed_usd_per_million_images", TRAIN, "US dollars per million images",
        "Dollars billed so far / training images so far (everything billed counts)."),
    "epoch_mfu": Figure("utilization", "mfu", TRAIN, "fraction of peak (1 = 100%)",
                         "This epoch's model FLOPs utilization: the model's training FLOP/s "
                         "at its steady-state rate over the devices' dense bf16 peak."),
    "epoch_model_tflops_per_sec": Figure(
        "utilization", "model_tflops_per_sec", TRAIN, "TFLOP/s",
        "The model's own training FLOPs per second at this epoch's steady-state rate, all "
        "devices."),
    "epoch_power_watts": Figure("energy", "power_watts", TRAIN, "watts",
                                 "Board power of the devices in use over this epoch's "
                                 "steady-state steps (NVIDIA only)."),
    "epoch_joules_per_image": Figure("energy", "joules_per_image", TRAIN, "joules",
                                      "Energy per training image over this epoch's "
                                      "steady-state steps."),
    "epoch_kwh": Figure("energy", "kwh", TRAIN, "kilowatt-hours",
                         "Energy of this epoch's images at its steady-state energy per image."),
    "peak_memory_gib": Figure("memory", "peak_memory_gib", TRAIN, "GiB",
                              "Peak device memory: the framework's high-water mark."),
    "learning_rate": Figure("optimizer", "learning_rate", TRAIN, "learning rate",
                             "The rate the next training step uses (after warm-up and decay)."),
}

# How the energy figures were measured (callbacks/energy.py's `method`), said on their cards.
ENERGY_METHODS = {
    "energy_counter": "Measured with NVML's energy counter, differenced between the window's "
                      "first and last step.",
    "power_samples": "Measured from NVML board-power samples taken inside the window, times "
                     "its length (these GPUs do not count their energy).",
}


def energy_descriptions(method: str | None) -> dict:
    """{log key: card description} of the energy figures, saying how they were measured."""
    if method not in ENERGY_METHODS:
        return {}
    return {key: f"{FIGURES[key].description} {ENERGY_METHODS[method]} "
                 f"*Unit: {FIGURES[key].unit}.*"
            for key in ("epoch_power_watts", "epoch_joules_per_image", "epoch_kwh")}


# The throughput sweep's points (app/modes/sweep.py), one series per figure with the
# global batch size on the x axis: tags "sweep_<group>/<figure>_vs_batch".
_AT_SIZE = " at each global batch size (the x axis), over its timed steps."
SWEEP_FIGURES = {
    "images_per_sec": Figure("sweep_throughput", "images_per_sec_vs_batch", TRAIN,
                             "images/second", "Steady-state training images per second over "
                             "all devices" + _AT_SIZE),
    "images_per_sec_per_device": Figure("sweep_throughput", "images_per_sec_per_device_vs_batch",
                                        TRAIN, "images/second", "Steady-state training images "
                                        "per second of one device" + _AT_SIZE),
    "mfu": Figure("sweep_utilization", "mfu_vs_batch", TRAIN, "fraction of peak (1 = 100%)",
                  "Model FLOPs utilization" + _AT_SIZE),
    "step_time_ms": Figure("sweep_throughput", "step_time_ms_vs_batch", TRAIN, "milliseconds",
                           "Mean time of one training step" + _AT_SIZE),
    "peak_memory_gib": Figure("sweep_memory", "peak_memory_gib_vs_batch", TRAIN, "GiB",
                              "Peak device memory, the framework's high-water mark" + _AT_SIZE),
    "joules_per_image": Figure("sweep_energy", "joules_per_image_vs_batch", TRAIN, "joules",
                               "Energy per training image" + _AT_SIZE),
}


def figure_of(key: str) -> Figure:
    """The Figure of a log key; a key not listed goes to other/ in the train run."""
    return FIGURES.get(key) or Figure("other", key, TRAIN, "as logged",
                                       f"The `{key}` figure of the logs.")


# Settings shown in TensorBoard's HParams dashboard, with what they mean: every run
# declares all of them, so several runs share one table.
SETTINGS = {
    "accelerator": "--accelerator: cpu, gpu or tpu.",
    "backend": "--backend: the Keras backend (tensorflow or jax).",
    "device_kind": "The device model the framework reported.",
    "num_replicas": "Devices training in data parallel, all hosts together.",
    "model": "--model: the network.",
    "dataset": "--dataset: what was trained on.",
    "global_batch_size": "--global_batch_size: images per step, all devices together.",
    "precision": "The Keras dtype policy used.",
    "steps_per_execution": "--steps_per_execution: training steps per host call.",
    "machine": "The price catalog row billed (--machine).",
    "price_per_hour_usd": "Dollars per hour for everything the run uses.",
    "status": "How it ended: completed (a point: ok); preempted (stopped by SIGTERM or "
              "Ctrl-C: the same command resumes it); failed, diverged; a point's reason "
              "(out of memory, skipped: ...); running while it trains.",
}

# The run's figures the HParams dashboard sets against the settings: summary.json's,
# written once the run ends, as tags "run/<key>" in the run folder itself (the
# HParams session's own folder, where TensorBoard looks for them). The same columns
# for every run; a figure the run did not measure is an empty cell.
RUN = "run"
HPARAM_FIGURES = {
    "val_top1": ("val top-1", "fraction (1 = 100%)",
                 "Validation top-1 after the run's last epoch (summary.json's val_top1)."),
    "best_val_top1": ("best val top-1", "fraction (1 = 100%)",
                      "The run's best validation top-1 (summary.json's best_val_top1)."),
    "images_per_sec": ("images/sec", "images/second",
                       "The run's steady-state training images per second over all devices: "
                       "every epoch's timed steps of every attempt over their seconds "
                       "(summary.json's images_per_sec)."),
    "mfu": ("MFU", "fraction of peak (1 = 100%)",
            "The run's model FLOPs utilization at its steady-state rate (summary.json's mfu)."),
    "cost_usd": ("cost ($)", "US dollars",
                 "Dollars billed for the whole run, every attempt (summary.json's cost_usd)."),
    "usd_per_million_images": ("$ per million images", "US dollars per million images",
                               "Price / the run's steady-state rate (summary.json's "
                               "usd_per_million_images)."),
}

# A sweep's points and the ladder's rungs (app/modes/bench.py): each an HParams
# session of its own, under <logdir>/points/<name>, with these settings too and its
# steady-state figures as columns.
POINT_SETTINGS = {
    **SETTINGS,
    "image_size": "--image_size: square input size in pixels.",
    "batchnorm_statistics": "--batchnorm_statistics: per_replica or global.",
    "xla_autotune": "How XLA picked GPU kernels (full, heuristic; none: it picks none here).",
    "input_pipeline": "--input_pipeline: how a real dataset was fed (none: synthetic data).",
}
POINT_FIGURES = {
    "images_per_sec": ("images/sec", "images/second", "Steady-state training images per "
                       "second over all devices, over the point's timed steps (measured "
                       "--repeats=N times: the median window's)."),
    "images_per_sec_min": ("images/sec min", "images/second", "The lowest of the point's "
                           "timed windows (--repeats=N, each after a fresh compile): with "
                           f"the max, their {SPREAD} spread."),
    "images_per_sec_max": ("images/sec max", "images/second", "The highest of the point's "
                           "timed windows (--repeats=N, each after a fresh compile)."),
    "mfu": ("MFU", "fraction of peak (1 = 100%)", "Model FLOPs utilization at the point's "
            "steady-state rate."),
    "usd_per_million_images": ("$ per million images", "US dollars per million images",
                               "Price / the point's steady-state rate."),
    "step_time_ms": ("step ms", "milliseconds", "Mean time of one training step over the "
                     "point's timed steps."),
    "peak_memory_gib": ("peak GiB", "GiB", "Peak device memory, the framework's high-water "
                        "mark, where it rose during the point (else empty)."),
    "joules_per_image": ("J/image", "joules", "Energy per training image over the point's "
                         "timed steps."),
}
