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


def steps_for(config, train_examples: int) -> int:
    """Training steps per epoch: --steps_per_epoch, or one pass over the training
    images rounded down to whole executions (auto's are whole already)."""
    if config.steps_per_epoch:
        return config.steps_per_epoch
    steps = train_examples // config.global_batch_size
    steps -= steps % max(config.steps_per_execution, 1)
    if steps < 1:
        raise DataError(
            f"--global_batch_size={config.global_batch_size} x --steps_per_execution="
            f"{config.steps_per_execution} is more than the {train_examples} training "
            f"images of {config.dataset}; use a smaller batch or set --steps_per_epoch")
    return steps


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
