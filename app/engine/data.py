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


def steps_for(config, train_examples: int) -> int:
    """Training steps per epoch: --steps_per_epoch, or one pass over the training
    images rounded down to whole executions."""
    if config.steps_per_epoch:
        return config.steps_per_epoch
    steps = train_examples // config.global_batch_size
    steps -= steps % config.steps_per_execution
    if steps < 1:
        raise DataError(
            f"--global_batch_size={config.global_batch_size} x --steps_per_execution="
            f"{config.steps_per_execution} is more than the {train_examples} training "
            f"images of {config.dataset}; use a smaller batch or set --steps_per_epoch")
    return steps
