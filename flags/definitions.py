"""Every command-line flag of the app, defined in one place.

Flag names equal the field names of `flags.config.Config` and carry units where a
unit applies. All flags are optional; the defaults train the small ResNet on the
embedded digits dataset on CPU in a couple of minutes. Nothing outside
`flags.parse.config_from_flags` reads `FLAGS`.

Note: our package is called `flags` too, so absl's module is always imported as
`from absl import flags as absl_flags` here.
"""

import dataclasses
import textwrap

from absl import flags as absl_flags

from flags import choices
from flags.config import Config

FLAGS = absl_flags.FLAGS
# One source of truth for defaults: the Config dataclass (tests build Configs directly).
D = {f.name: (list(f.default) if isinstance(f.default, tuple) else f.default)
     for f in dataclasses.fields(Config)}

# The sections of `--help` (and of BUILD.md's table of flags), in order.
GROUPS = {
    "run": ("epochs", "global_batch_size", "steps_per_epoch", "validation_steps",
            "steps_per_execution", "xla_autotune", "kernels_from", "keep_kernels", "seed", "target_top1", "sweep_batch_sizes", "sweep", "benchmark",
            "repeats"),
    "data": ("dataset", "data_dir", "manual_dir", "download", "image_size", "preprocessing",
             "input_pipeline"),
    "model": ("model", "precision", "batchnorm_statistics", "optimizer", "base_learning_rate",
              "lr_schedule", "warmup_epochs", "momentum", "weight_decay", "label_smoothing",
              "gradient_clip_norm"),
    "distribution": ("accelerator", "backend", "num_devices", "tpu", "num_processes",
                     "process_id", "coordinator_address", "coordinator_timeout_seconds"),
    "cost": ("machine", "pricing", "price_per_hour_usd", "price_catalog", "list_machines"),
    "profiling": ("profile_steps", "peak_tflops_per_device", "throughput_warmup_steps"),
    "output": ("logdir", "fresh", "checkpoint_every_steps", "log_every_steps", "verbose"),
}
# Flags that do something and exit instead of setting the run (no Config field).
ACTIONS = ("list_machines",)
USAGE = """\
usage: python app/main.py [--flag=value ...]

Trains an image classifier with Keras 3 and measures, live, what the 2018 TPU vs
GPU study measured: images/sec, top-1 per epoch, dollars, and dollars and hours
to a target top-1. Every flag is optional; with none, a small ResNet learns
scikit-learn's handwritten digits on the CPU in about a minute.

examples:
  python app/main.py --backend=jax
  python app/main.py --model=resnet50 --dataset=synthetic --sweep_batch_sizes=64,128,256
  python app/main.py --flagfile=configs/imagenet_resnet50.flags --accelerator=gpu \
      --backend=jax --manual_dir=/data/imagenet
"""


def help_text() -> str:
    """`--help`: the usage, then the project's flags in GROUPS, with defaults."""
    sections = [USAGE]
    for group, names in GROUPS.items():
        lines = [f"{group}:"]
        for name in names:
            flag = FLAGS[name]
            default = ",".join(map(str, flag.default)) if isinstance(flag.default, list) \
                else ("" if flag.default is None else flag.default)
            lines.append(f"  --{name}[=PATTERN]" if name in ACTIONS else f"  --{name}={default}")
            lines += textwrap.wrap(flag.help, 88, initial_indent="      ",
                                   subsequent_indent="      ")
        sections.append("\n".join(lines) + "\n")
    sections.append("--flagfile=FILE reads flags from FILE, one per line; --helpfull lists\n"
                    "every flag, absl's included.\n")
    return "\n".join(sections)



def define_flags():
    """Defines all flags (idempotent, so tests may call it more than once)."""
    if "accelerator" in FLAGS:
        return

    # Platform: which hardware, which Keras backend, how many devices and hosts.
    absl_flags.DEFINE_enum("accelerator", D["accelerator"], list(choices.ACCELERATORS),
                           "Hardware to train on. No silent fallback: asking for a "
                           "device that is not there is an error.")
    absl_flags.DEFINE_enum("backend", D["backend"], list(choices.BACKENDS),
                           "Keras backend. Set before Keras is imported.")
    absl_flags.DEFINE_integer("num_devices", D["num_devices"],
                              "Devices (replicas) per process; 0 = all visible "
                              "(1 on CPU; >1 on CPU makes that many logical devices).")
    absl_flags.DEFINE_string("tpu", D["tpu"],
                             "TPU name for TPUClusterResolver, or 'local' on a TPU VM.")
    absl_flags.DEFINE_string("coordinator_address", D["coordinator_address"],
                             "HOST:PORT of process 0 for a multi-host JAX run "
                             "(also read from JAX_COORDINATOR_ADDRESS).")
    absl_flags.DEFINE_integer("num_processes", D["num_processes"],
                              "Processes (hosts) in a multi-host JAX run.")
    absl_flags.DEFINE_integer("process_id", D["process_id"], "This process's index, 0-based.")
    absl_flags.DEFINE_integer("coordinator_timeout_seconds", D["coordinator_timeout_seconds"],
                              "How long to wait for the other processes of a "
                              "multi-host run before giving up.")

    # Model and optimization.
    absl_flags.DEFINE_string("model", D["model"],
                             "The network: small_resnet (tiny images), resnet18/34/50 (v1.5), "
                             "vit_ti16/vit_s16/vit_b16/vit_l16 (pre-norm ViTs, patch 16, "
                             "mean-pooled), applications:NAME (a keras.applications "
                             "classifier from scratch, e.g. applications:EfficientNetV2S), "
                             "FILE.py:FUNCTION (FUNCTION(num_classes, image_size) returns a "
                             "keras.Model of logits; e.g. examples/my_model.py:make_model) "
                             "or FILE.keras (a saved model; its head replaced when the "
                             "classes differ).")
    absl_flags.DEFINE_enum("precision", D["precision"],
                           list(choices.PRECISIONS),
                           "Keras dtype policy; auto = float32 on CPU, "
                           "mixed_bfloat16 on GPU and TPU.")
    absl_flags.DEFINE_enum("batchnorm_statistics", D["batchnorm_statistics"],
                           list(choices.BATCHNORM_STATISTICS),
                           "BatchNorm's training statistics: per_replica (each replica's own "
                           "slice of the batch, no cross-device reduction; MLPerf's choice) "
                           "or global (over the whole global batch; for small per-replica "
                           "batches). The moving statistics are the replicas' mean either way. "
                           "Models the app did not write get the app's BatchNorm in place of "
                           "Keras's; the ViTs have none.")
    absl_flags.DEFINE_enum("optimizer", D["optimizer"], list(choices.OPTIMIZERS),
                           "auto = the model family's: sgd (momentum, decoupled weight "
                           "decay) for the ResNets, adamw for the ViTs and every other model.")
    absl_flags.DEFINE_float("base_learning_rate", D["base_learning_rate"],
                            "Peak learning rate for 256 images; scaled with the global "
                            "batch: linearly from 256 up, by the square root below. Unset = the optimizer's recipe: 0.4 with sgd, "
                            "2.5e-4 with adamw (ImageNet ResNet recipes use 0.1-0.256; see "
                            "configs/).")
    absl_flags.DEFINE_enum("lr_schedule", D["lr_schedule"], list(choices.LR_SCHEDULES),
                           "After warm-up: cosine decay to 0, or /10 at 30, 60, 80 "
                           "percent of the run.")
    absl_flags.DEFINE_float("warmup_epochs", D["warmup_epochs"],
                            "Linear warm-up length in epochs, at most a fifth of the run. "
                            "Unset = 1 with sgd, 5 with adamw.")
    absl_flags.DEFINE_float("momentum", D["momentum"], "SGD momentum (sgd only).")
    absl_flags.DEFINE_float("weight_decay", D["weight_decay"],
                            "Decoupled weight decay (w -= lr * wd * w each step), not applied "
                            "to biases, norm scales and offsets (every 1-D variable) and "
                            "position embeddings. Unset = 5e-4 with sgd, 0.05 with adamw.")
    absl_flags.DEFINE_float("label_smoothing", D["label_smoothing"], "Label smoothing of the loss.")
    absl_flags.DEFINE_float("gradient_clip_norm", D["gradient_clip_norm"],
                            "Clip the gradients' global norm to this before each update; "
                            "0 = no clipping. Unset = 0 with sgd, 1 with adamw.")

    # Data.
    absl_flags.DEFINE_string("dataset", D["dataset"],
                             "digits, fashion_mnist, synthetic, imagenet2012, "
                             "tfds:NAME[:VERSION] or folder:PATH.")
    absl_flags.DEFINE_string("data_dir", D["data_dir"],
                             "Where datasets live; default $TFDS_DATA_DIR or "
                             "~/tensorflow_datasets.")
    absl_flags.DEFINE_string("manual_dir", D["manual_dir"],
                             "Folder holding ILSVRC2012_img_{train,val}.tar; "
                             "default <data_dir>/downloads/manual.")
    absl_flags.DEFINE_boolean("download", D["download"],
                              "Let TFDS download a tfds: dataset that is not prepared.")
    absl_flags.DEFINE_integer("image_size", D["image_size"],
                              "Square input size in pixels; 0 = the dataset's default.")
    absl_flags.DEFINE_enum("preprocessing", D["preprocessing"], list(choices.PREPROCESSINGS),
                           "Augmentation preset: standard = Inception crop + flip; "
                           "heavy = that plus color jitter (the study's TPU "
                           "reference spirit); small = pad-and-crop for tiny images; "
                           "auto = the dataset's default.")
    absl_flags.DEFINE_enum("input_pipeline", D["input_pipeline"], list(choices.INPUT_PIPELINES),
                           "How real images are decoded and augmented: tf.data (TensorFlow, "
                           "CPU threads), grain (no TensorFlow, CPU worker processes), gpu "
                           "(JPEGs decoded by the GPU's JPEG engines, JAX), device (the "
                           "dataset decoded once and held in accelerator memory, augmented "
                           "there); auto = device where the decoded dataset fits its share "
                           "of accelerator memory, else gpu for JPEGs on a JAX GPU host, "
                           "grain on JAX, tf.data on TensorFlow (BUILD.md, Input pipelines).")
    absl_flags.DEFINE_integer("global_batch_size", D["global_batch_size"],
                              "Images per step over all replicas and processes.")
    absl_flags.DEFINE_integer("epochs", D["epochs"], "Epochs to train.")
    absl_flags.DEFINE_integer("steps_per_epoch", D["steps_per_epoch"],
                              "Training steps per epoch; 0 = one pass over the data.")
    absl_flags.DEFINE_integer("validation_steps", D["validation_steps"],
                              "Validation batches per epoch; 0 = every validation "
                              "image (none on --dataset=synthetic: random images "
                              "measure nothing), -1 = no validation.")
    absl_flags.DEFINE_integer("steps_per_execution", D["steps_per_execution"],
                              "Training steps run per host call (callbacks fire "
                              "once per execution); 0 = auto: up to 16 when the data "
                              "is held on the device (--input_pipeline=device, JAX), "
                              "else 1.")
    absl_flags.DEFINE_enum("xla_autotune", D["xla_autotune"], list(choices.XLA_AUTOTUNES),
                           "How XLA picks a GPU's convolution and matrix kernels (JAX): "
                           "full = it times every candidate while compiling (seconds, "
                           "the fastest steps), heuristic = the libraries' first "
                           "deterministic choice (compiles 2-5x sooner, steps a few per "
                           "cent slower), auto = heuristic for the app's ResNets on "
                           "under 2 million images in all, else (a training run) both "
                           "compiled and timed on the real step, the autotuned kept "
                           "only where it is 2% faster, the choice kept for the next "
                           "run of the same step and machine (a sweep, ladder or probe: "
                           "full) (BUILD.md, Start-up and compiling).")
    absl_flags.DEFINE_string("kernels_from", D["kernels_from"],
                             "JAX on a GPU: run the GPU kernels another run chose: an XLA "
                             "autotune results file (.textproto or .pb) or a run folder "
                             "that kept one (--keep_kernels); XLA loads them instead of "
                             "timing candidates, so the two runs run the same kernels "
                             "(the closing line's kernels digest shows it). Empty = XLA "
                             "autotunes (--xla_autotune).")
    absl_flags.DEFINE_boolean("keep_kernels", D["keep_kernels"],
                              "JAX on a GPU: keep XLA's autotune results in "
                              "<logdir>/kernels/autotune.textproto, for --kernels_from. "
                              "Not by default: the setting is part of JAX's compilation "
                              "cache key, so such a run compiles and autotunes its steps "
                              "afresh instead of starting warm from the cache.")
    absl_flags.DEFINE_integer("seed", D["seed"],
                              "Random seed; unset = a fresh seed and a "
                              "non-deterministic (faster) input order.")

    # Outputs, checkpoints, resume.
    absl_flags.DEFINE_string("logdir", D["logdir"],
                             "Run folder; default runs/<model>-<dataset>-<backend>-<hash of "
                             "the settings>, so the same command finds (and resumes) the "
                             "same folder.")
    absl_flags.DEFINE_boolean("fresh", D["fresh"],
                              "Start over in an existing logdir (its previous "
                              "contents are moved aside, not deleted).")
    absl_flags.DEFINE_integer("checkpoint_every_steps", D["checkpoint_every_steps"],
                              "Also checkpoint every N training steps within an "
                              "epoch; 0 = at epoch ends only.")
    absl_flags.DEFINE_integer("log_every_steps", D["log_every_steps"],
                              "Write the step-level TensorBoard series (batch_* tags: "
                              "throughput, cost, loss) every N steps, rounded up to a "
                              "multiple of the steps per execution (Keras reports once "
                              "per call; the banner says when it rounds, e.g. 5 at 4 per "
                              "call: every 8 steps).")
    absl_flags.DEFINE_enum("verbose", D["verbose"], list(choices.VERBOSITIES),
                           "Progress while training (loss, top-1, images/sec, dollars; "
                           "every figure goes to the logs): 1 = a bar, 2 = a line per "
                           "epoch, 0 = none, auto = a bar on a terminal.")

    # The study's questions: accuracy targets, cost, utilization, profile.
    absl_flags.DEFINE_list("target_top1", D["target_top1"],
                           "Comma list of top-1 targets in (0, 1], e.g. 0.757,0.764.")
    absl_flags.DEFINE_string("machine", D["machine"],
                             "Price catalog row to bill (see app/pricing/prices.csv); auto = "
                             "the row for the detected device.")
    # An action, not a setting of the run: no Config field (app/main.py acts on it
    # before the config is built). A bare --list_machines means every row.
    absl_flags.DEFINE_string("list_machines", None,
                             "Print the price catalog (machine, devices, dollars per hour "
                             "under each pricing, peak, date read) and exit; "
                             "--list_machines=PATTERN keeps the rows whose machine, "
                             "accelerator, device or provider contains PATTERN.")
    absl_flags.DEFINE_enum("pricing", D["pricing"],
                           list(choices.PRICINGS),
                           "Which price of the machine row to charge.")
    absl_flags.DEFINE_float("price_per_hour_usd", D["price_per_hour_usd"],
                            "Override: dollars per hour for everything the run uses (all its "
                            "hosts and devices together, as one bill), instead of the "
                            "catalog row's price; never multiplied by a machine count.")
    absl_flags.DEFINE_string("price_catalog", D["price_catalog"],
                             "A price catalog CSV of your own (the columns of "
                             "app/pricing/prices.csv, e.g. negotiated prices) instead of the "
                             "app's; empty = app/pricing/prices.csv. --list_machines and "
                             "--machine read it too.")
    absl_flags.DEFINE_float("peak_tflops_per_device", D["peak_tflops_per_device"],
                            "Override: dense bf16 peak TFLOP/s of one device, for MFU.")
    absl_flags.DEFINE_string("profile_steps", D["profile_steps"],
                             "START,STOP: trace these training steps (1-based, "
                             "inclusive) for TensorBoard's profiler.")
    absl_flags.DEFINE_integer("throughput_warmup_steps", D["throughput_warmup_steps"],
                              "Steps excluded from throughput as compile/warm-up; "
                              "0 = auto (the first execution of each epoch, and "
                              "of the first epoch max(2 executions, 5% of it)).")

    # Benchmarks.
    absl_flags.DEFINE_list("sweep_batch_sizes", D["sweep_batch_sizes"],
                           "Comma list of global batch sizes: measure throughput at "
                           "each on --dataset instead of training.")
    absl_flags.DEFINE_multi_string("sweep", D["sweep"],
                                   "FLAG=v1,v2,...: measure throughput at each value of a "
                                   "setting on --dataset instead of training; repeat "
                                   "for a grid (their product), e.g. --sweep=precision="
                                   "float32,mixed_bfloat16 --sweep=global_batch_size=64,128. "
                                   "Axes: " + ", ".join(choices.SWEEPABLE) + " (a real "
                                   "dataset's only: synthetic data has none). Each point "
                                   "is an HParams session; Ctrl-C keeps the finished "
                                   "points, the same command measures the rest.")
    absl_flags.DEFINE_enum("benchmark", D["benchmark"], list(choices.BENCHMARKS),
                           "input = time the input pipeline alone (no model); ladder = "
                           "the effort ladder on --dataset: the same model from "
                           "float32 to the app's best settings, one rung at a time "
                           "(mixed bfloat16, the largest batch that fits, steps per "
                           "execution, a real dataset held on the device, XLA's full "
                           "autotuning), each rung's gain; probe = this machine's rate and "
                           "start-up for the run's model, batch, precision and data in "
                           "about a minute after the compile, for app/report.py's "
                           "--target decision.")
    absl_flags.DEFINE_integer("repeats", D["repeats"],
                              "Timed windows of each benchmark point (a sweep point, a "
                              "ladder rung, --benchmark=input's model, a probe: 3 where "
                              "not given), each after a fresh compile (no compiled program "
                              "reused from the cache); the point's images/sec is their "
                              "median, with their min-max, so a difference can be told "
                              "from the spread.")
