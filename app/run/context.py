"""The run context: what every mode knows once its checks have passed.

Every mode (train, sweep, input benchmark) starts the same way, here:
  1. `prepare(config)`: take the run folder (app/run/rundir.py: made if new and
     locked, then judged new, a resume or refused, under the lock), check the
     dataset, choose backend and devices (app/engine/distribute.py), resolve the
     price. No model exists yet; any failure is one line for the user, and what
     the preflight made (the folder, its run.lock) is removed again (`abandon`).
  2. `start(context)`: draw and share the seed, set the Keras dtype policy;
  3. `create_folder(context)`: make the locked folder the run's (config.json;
     process 0), once the mode's own checks (e.g. the data's size against the
     batch) have passed; a mode refused before that leaves nothing behind either
     (app/main.py abandons the folder).
The result is one frozen `RunContext`, passed whole instead of loose values.
"""

from __future__ import annotations

import dataclasses
import os

from app.engine import autotune, cold_start, distribute
from app.engine.data import input_spec, steps_for
from app.engine.startup import TIMELINE
from app.models import check_model, check_model_builds, memory, models_built_aside
from app.models.memory import process_memory_limit
from app.pricing.prices import Billing, resolve_billing
from app.run import rundir, signals
from flags.modes import mode_of
from preprocessing.datasets import check_dataset, known_shape, read_ahead
from preprocessing.spec import BatchShape, DataError, InputSpec

SMALLEST_IMAGE = 8  # --image_size's lower bound: the batch check never over-estimates


@dataclasses.dataclass(frozen=True)
class RunContext:
    """Where and how this run executes; built by `prepare`, completed by `start`."""

    config: object  # flags.Config
    topology: distribute.Topology
    run_dir: rundir.RunDir
    spec: InputSpec  # the data builders' inputs at --global_batch_size
    billing: Billing
    started_at: float  # time.time() when billing started (the process start)
    seed: int | None = None  # set by start(): the seed every process uses
    # How XLA picks GPU kernels (app/engine/autotune.py); None where it picks none.
    xla_autotune: str | None = None

    @property
    def logdir(self) -> str:
        return self.run_dir.path

    @property
    def batch(self) -> BatchShape:
        """--global_batch_size and its shares per process and per replica."""
        return self.spec.batch

    @property
    def is_chief(self) -> bool:
        return self.topology.is_chief


def prepare(config, started_at: float) -> RunContext:
    """Takes the run folder, then checks everything that can be wrong before the run
    leaves a trace; a refused run leaves the folder as it found it.

    Raises:
        TopologyError, RunDirError, DataError: one line each.
    """
    with signals.preparing():  # an early Ctrl-C waits for the undo to be registered
        run_dir = rundir.preflight(config)  # the folder is this process's from here on
        signals.undo_if_interrupted_before_start(lambda: rundir.abandon(run_dir))
    try:
        check_billing_early(config)
        distribute.prepare_backend(config)
        check_model(config)  # a bad --model is one line before any file or device is touched
        # The data is looked at before the framework starts (seconds, on a small host):
        # the checks read files only, for the processes the flags ask for.
        spec = input_spec(config, batch=None)
        train_examples = check_dataset(config.dataset, spec)
        if cold_start.cut_on("data_read_beside_imports"):
            read_ahead(config.dataset, spec)  # while the frameworks import
        if train_examples is not None and mode_of(config).trains:
            steps_for(config, train_examples)  # a batch past the data: refused now (train's)
        xla_autotune = autotune.choose(config, train_examples)
        autotune.apply(xla_autotune)  # before JAX compiles anything
        TIMELINE.mark("checks")
        autotune.set_kernel_flags(config, run_dir.path)  # --kernels_from, --keep_kernels
        topology = distribute.make_topology(config)
        # The batch's shares, made with the devices and held here alone (`batch`).
        spec = dataclasses.replace(spec, batch=topology.batch_shape(config.global_batch_size))
        check_batch_fits(spec)
        if mode_of(config).builds_model:  # (the input benchmark builds no model)
            check_model_builds(config, known_shape(config.dataset, spec))
            if mode_of(config).trains:  # (a sweep's points: theirs)
                check_step_fits(config, spec, known_shape(config.dataset, spec))
        billing = resolve_billing(config.machine, config.pricing, config.price_per_hour_usd,
                                  config.peak_tflops_per_device, topology.device_kind,
                                  topology.billed_devices, warn=False,
                                  catalog_path=config.price_catalog)
        TIMELINE.mark("model_check_and_price")
    except BaseException:
        rundir.abandon(run_dir)  # refused: the folder is left as this process found it
        raise
    return RunContext(config, topology, run_dir, spec, billing, started_at,
                      xla_autotune=xla_autotune)


def device_kind_before_framework(config) -> str | None:
    """The device kind the framework will report, where the flags alone tell it:
    "cpu" for --accelerator=cpu (both backends name it so); None for a GPU or TPU,
    whose kind only the framework finds."""
    return "cpu" if config.accelerator == "cpu" else None


def check_billing_early(config) -> None:
    """Refuses, before any framework loads, a --pricing the catalog row billed for this
    host's devices does not sell, where the flags tell the device (the CPU): found
    with the devices, it came 15 s into the run. Elsewhere `prepare` refuses it with
    the devices, in the same words (prices.resolve_billing makes both).

    Raises:
        ConfigError: naming the row and the pricings it sells.
    """
    kind = device_kind_before_framework(config)
    if kind is not None:
        resolve_billing(config.machine, config.pricing, config.price_per_hour_usd,
                        config.peak_tflops_per_device, kind,
                        max(config.num_devices, 1) * config.num_processes, warn=False,
                        catalog_path=config.price_catalog)


def billing_notes(context) -> str:
    """The lines each mode prints under its banner about what the run is billed as: the
    catalog row taken and the others that sell the device, a --machine the run is not
    on, a price read over 12 months ago ("" when there is nothing to say)."""
    return "\n".join(f"note: {note}" for note in context.billing.notes)


def check_batch_fits(spec: InputSpec) -> None:
    """One batch of this process's input must fit in the memory it may hold: the
    host's, its address-space limit or its control group's, whichever is least
    (memory.process_memory_limit). The one place that decides it, before the run
    folder is made.

    Raises:
        DataError: naming the batch and the limit.
    """
    size = spec.image_size or SMALLEST_IMAGE
    batch_bytes = spec.batch_size * size * size * 3 * 4  # float32 RGB, at least
    limit, what = process_memory_limit()
    if batch_bytes > limit:
        raise DataError(f"one batch of {spec.batch_size:,} images of {size}x{size} needs at "
                        f"least {_gib(batch_bytes)} GiB, more than {what} of "
                        f"{_gib(limit)} GiB; use a smaller --global_batch_size")


# The app's models keep 50-75 times their input for the gradient (memory.
# kept_bytes_per_image: ResNet-50 and ViT-B/16 at 224 px, the small ResNet at 8 px): a
# batch whose input is this many times smaller than what the process may still take
# fits without the model being built to see.
KEPT_OVER_INPUT_BOUND = 1024


def check_step_fits(config, spec: InputSpec, shape: tuple[int, int] | None) -> None:
    """On a CPU a training step's memory is this process's: past its address-space
    limit or its control group's, an allocator deep in the framework aborted the run
    (SIGABRT, no line: ResNet-50 at batch 256 and 224 px under a 6 GB cap passed
    `check_batch_fits`, then died 2 minutes in). Where the batch could come near what
    the process may still take (memory.headroom), the model is built once here and
    dropped, and a lower bound of its step (memory.step_bytes) is checked against it,
    before the run folder is made. (An accelerator's memory is not this process's.)

    Raises:
        DataError: naming the bound, the limit and a batch that fits.
    """
    if config.accelerator != "cpu":
        return
    size = spec.image_size or (shape[1] if shape else SMALLEST_IMAGE)
    input_bytes = spec.batch.per_process * size * size * 3 * 4
    room, what = memory.headroom()
    if input_bytes * KEPT_OVER_INPUT_BOUND < room:
        return
    from app.models import make_model

    with models_built_aside():
        model = make_model(config.model, shape[0] if shape else 1000, size)
    bytes_per_value = 2 if config.policy.startswith("mixed") else 4
    needed = memory.step_bytes(model, spec.batch.per_process, bytes_per_value)
    if needed <= room:
        return
    per_image = memory.kept_bytes_per_image(model, bytes_per_value)
    fixed = needed - spec.batch.per_process * per_image
    fits = max(0, room - fixed) // max(per_image, 1) * config.global_batch_size // max(
        spec.batch.per_process, 1)
    batch = 1 << (max(fits, 1).bit_length() - 1)  # a power of two, as batches usually are
    advice = (f"at most --global_batch_size={batch} can fit" if fits >= 1 else
              "no batch fits: raise the limit, or use a smaller --model or --image_size")
    raise DataError(f"a training step of --model={config.model} on {spec.batch.per_process:,} "
                    f"images of {size}x{size} needs at least {memory._gib(needed)} GiB (what "
                    "its layers keep for the gradient, and its weights, gradients and "
                    f"optimizer state), more than the {memory._gib(room)} GiB this process may "
                    f"still take: {what}; {advice}")


def _gib(count: int) -> str:
    """Bytes in GiB for a line: whole GiB, or two decimals below 10 GiB."""
    gib = count / 2**30
    return f"{gib:,.0f}" if gib >= 10 else f"{gib:.2f}"


def start(context: RunContext) -> RunContext:
    """Seeds Keras and sets the dtype policy; returns the context with its seed.

    The seed is --seed, or a fresh one; process 0's on every process (model
    initialization must agree across hosts).
    """
    import keras

    config = context.config
    seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little")
    seed = context.topology.shared_seed(seed)
    set_random_seed(keras, seed)
    keras.config.set_dtype_policy(config.policy)
    return dataclasses.replace(context, seed=seed)


def with_steps_per_execution(context: RunContext, steps: int) -> RunContext:
    """The context with --steps_per_execution resolved (auto, 0, becomes `steps`):
    from here on one value, in the model's compile, the banner and summary.json."""
    return dataclasses.replace(context, config=dataclasses.replace(
        context.config, steps_per_execution=steps))


def set_random_seed(keras, seed: int) -> None:
    """keras.utils.set_random_seed, without importing TensorFlow to seed it.

    Trap: Keras seeds TensorFlow whenever it is installed, so on the JAX backend it
    imported TensorFlow (2-4 s, and the JAX path must not touch it). Where TensorFlow
    is not imported yet, it is not seeded: its only user here, the tf.data pipeline,
    draws every random number from explicit stateless seeds.
    """
    from keras.src.utils import module_utils

    with cold_start.tensorflow_unseen(module_utils.tensorflow):
        keras.utils.set_random_seed(seed)


def create_folder(context: RunContext) -> None:
    """Makes the locked run folder the run's and saves the config (process 0): from
    here on the run leaves traces. Call it once every check of the mode has passed."""
    signals.run_starts(context.logdir)  # a Ctrl-C now saves, then stops (signals.py)
    if context.is_chief:
        rundir.create(context.run_dir, context.config)
        if context.config.keep_kernels:  # where XLA writes them (autotune.set_kernel_flags)
            os.makedirs(os.path.join(context.logdir, "kernels"), exist_ok=True)
