"""What every mode asks of the data: the builders' plain inputs and epoch length."""

from __future__ import annotations

from preprocessing.spec import BatchShape, DataError, InputSpec


def input_spec(config, batch: BatchShape | None) -> InputSpec:
    """The plain values the dataset builders get: `batch` (None while the dataset is
    only checked, before the devices are known), this process's shard, the data."""
    return InputSpec(
        data_dir=config.data_dir, image_size=config.image_size, batch=batch,
        process_index=config.process_id, seed=config.seed, preset=config.preprocessing,
        with_validation=config.validation_steps != -1, backend=config.backend,
        manual_dir=config.manual_dir, download=config.download,
        dtype="bfloat16" if config.policy == "mixed_bfloat16" else "float32",
        input_pipeline=config.input_pipeline, accelerator=config.accelerator,
        validation_steps=max(0, config.validation_steps))


# --steps_per_execution=0 (auto) runs up to this many steps per host call, and leaves
# an epoch at least this many calls (each call is one mark of the throughput's clock).
AUTO_STEPS_PER_EXECUTION = 16
AUTO_MIN_EXECUTIONS_PER_EPOCH = 8


def steps_for(config, train_examples: int, epoch_steps: int | None = None) -> int:
    """Training steps per epoch: --steps_per_epoch; else the data's nominal epoch
    (`epoch_steps`, Datasets.epoch_steps: synthetic data's) rounded down to whole
    executions; else one pass over the training images, rounded the same way."""
    if config.steps_per_epoch:
        return config.steps_per_epoch
    if epoch_steps:
        spe = max(config.steps_per_execution, 1)
        return max(epoch_steps - epoch_steps % spe, spe)
    steps_a_call = max(config.steps_per_execution, 1)
    steps = train_examples // config.global_batch_size
    steps -= steps % steps_a_call
    if steps < 1:
        per_call = config.global_batch_size * steps_a_call
        fits = _fitting_batch(train_examples, steps_a_call)
        asked = (f"--global_batch_size={config.global_batch_size}" if per_call ==
                 config.global_batch_size else f"--global_batch_size="
                 f"{config.global_batch_size} x --steps_per_execution="
                 f"{config.steps_per_execution} ({per_call} images a call)")
        raise DataError(
            f"{asked} is more than the {train_examples} training images of "
            f"{config.dataset}; accepted: at most {train_examples} images a call (e.g. "
            f"--global_batch_size={fits}), or --steps_per_epoch "
            "to repeat the images")
    return steps


def unused_images_note(config, train_examples: int, steps: int) -> str | None:
    """A line for the user when an epoch of `steps` steps leaves a quarter or more of
    the training images unused, or is a single step (whose time no throughput figure
    can measure: the first step of a run compiles); None otherwise, and when the user
    set --steps_per_epoch (then an epoch is what they asked for)."""
    if config.steps_per_epoch:
        return None
    used = steps * config.global_batch_size
    unused = train_examples - used
    if steps > 1 and unused * 4 < train_examples:
        return None
    smaller = _fitting_batch(train_examples)
    return (f"note: --global_batch_size={config.global_batch_size} trains {steps} step(s) "
            f"an epoch on {used} of the {train_examples} training images ({unused} unused "
            f"each epoch); --global_batch_size={smaller} would take "
            f"{train_examples // smaller} steps and leave {train_examples % smaller}")


def _fitting_batch(train_examples: int, min_steps: int = 8) -> int:
    """The largest power of two (as batches usually are) that gives `train_examples`
    at least `min_steps` steps; 1 if none does."""
    batch = 1
    while batch * 2 * min_steps <= train_examples:
        batch *= 2
    return batch


def steps_per_execution(config, input_pipeline: str, steps_per_epoch: int) -> int:
    """--steps_per_execution, resolved: the flag's value; for auto (0), where the data
    is held on the device on JAX, the largest divisor of the epoch's steps (no step is
    dropped) up to AUTO_STEPS_PER_EXECUTION that leaves the epoch
    AUTO_MIN_EXECUTIONS_PER_EPOCH calls, else 1. A step there takes a few milliseconds
    and the callbacks Keras runs after each call cost about as much: Fashion-MNIST's
    step ran at 159,851 images/sec one per call, 323,474 thirteen per call on an H200.
    1 under --profile_steps (a trace shows each step) and in the other modes, which
    time steps one call each."""
    if config.steps_per_execution:
        return config.steps_per_execution
    if config.backend != "jax" or input_pipeline != "device" or config.profile_range:
        return 1
    fits = [d for d in range(2, AUTO_STEPS_PER_EXECUTION + 1) if steps_per_epoch % d == 0
            and steps_per_epoch // d >= AUTO_MIN_EXECUTIONS_PER_EPOCH]
    return max(fits, default=1)
