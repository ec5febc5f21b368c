"""TensorBoard's vocabulary: where each log key goes, under which tag, with which unit.

Laid out as Keras's own TensorBoard callback lays out a run, so the dashboard reads
the same way:
- two runs per run folder, `train/` and `validation/`; a validation figure has the
  same tag as its training twin (`val_top1` is `accuracy/epoch_top1` in
  `validation/`), so TensorBoard draws the two on one chart;
- `epoch_*` tags have the epoch (1-based) on the x axis, `batch_*` tags the global
  training step: one x-axis meaning per tag, never two on one chart.
Each tag carries a description with its unit (TensorBoard shows it on the card).
"""

from __future__ import annotations

import dataclasses

TRAIN, VALIDATION = "train", "validation"


@dataclasses.dataclass(frozen=True)
class Figure:
    """One log key as TensorBoard shows it."""

    group: str  # the dashboard section: throughput, accuracy, loss, cost, ...
    name: str  # the tag's last part, without the epoch_/batch_ prefix
    run: str  # TRAIN or VALIDATION
    unit: str
    description: str

    def tag(self, prefix: str) -> str:
        """The tag of this figure's `prefix` series ("epoch" or "batch")."""
        return f"{self.group}/{prefix}_{self.name}"

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
    "images_per_sec": Figure("throughput", "images_per_sec", TRAIN, "images/second",
                              "Training images per second over all devices, steady state "
                              "(compilation and warm-up steps excluded)."),
    "eval_images_per_sec": Figure("throughput", "images_per_sec", VALIDATION,
                                   "images/second",
                                   "Validation images per second over all devices."),
    "images_per_sec_wall": Figure("throughput", "images_per_sec_wall", TRAIN, "images/second",
                                   "Training images per wall-clock second over the epochs, "
                                   "epoch-end work (checkpoints, summaries) included."),
    "images_per_sec_per_device": Figure("throughput", "images_per_sec_per_device", TRAIN,
                                         "images/second",
                                         "Training images per second of one device."),
    "step_time_ms": Figure("throughput", "step_time_ms", TRAIN, "milliseconds",
                            "Mean time of one training step in the epoch's steady state."),
    "step_time_stderr_ms": Figure("throughput", "step_time_stderr_ms", TRAIN, "milliseconds",
                                   "Standard error of the mean step time."),
    "step_time_jitter": Figure("throughput", "step_time_jitter", TRAIN, "ratio",
                                "Spread of step times: standard deviation / mean."),
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
    "mfu": Figure("utilization", "mfu", TRAIN, "fraction of peak (1 = 100%)",
                   "Model FLOPs utilization: the model's training FLOP/s over the devices' "
                   "dense bf16 peak."),
    "model_tflops_per_sec": Figure("utilization", "model_tflops_per_sec", TRAIN, "TFLOP/s",
                                    "The model's own training FLOPs per second, all devices."),
    "power_watts": Figure("energy", "power_watts", TRAIN, "watts",
                           "Board power of the devices in use over the steady-state steps, "
                           "from NVML's energy counter (NVIDIA only)."),
    "joules_per_image": Figure("energy", "joules_per_image", TRAIN, "joules",
                                "Energy per training image, steady state."),
    "kwh_per_epoch": Figure("energy", "kwh_per_epoch", TRAIN, "kilowatt-hours",
                             "Energy of one epoch at the steady-state power."),
    "peak_memory_gib": Figure("memory", "peak_memory_gib", TRAIN, "GiB",
                              "Peak device memory: the framework's high-water mark."),
    "learning_rate": Figure("optimizer", "learning_rate", TRAIN, "learning rate",
                             "The rate the next training step uses (after warm-up and decay)."),
}


def figure_of(key: str) -> Figure:
    """The Figure of a log key; a key not listed goes to other/ in the train run."""
    return FIGURES.get(key) or Figure("other", key, TRAIN, "as logged",
                                       f"The `{key}` figure of the logs.")


# Settings shown in TensorBoard's HParams dashboard, with what they mean.
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
    "price_per_hour_usd": "Dollars per hour for all machines of the run.",
}

# Figures the HParams dashboard sets against the settings (when the run logs them).
HPARAM_FIGURES = {"val_top1": "val top-1", "best_val_top1": "best val top-1",
                  "images_per_sec": "images/sec", "cost_usd": "cost ($)", "mfu": "MFU"}
