"""One training run, top to bottom: `run(config) -> summary dict`.

The story of a run, in the order it happens:
  1. check everything that can be wrong, before any device or file is touched;
  2. choose backend and devices (app/distribute.py), then the data;
  3. create the run folder, save the config, open the billing ledger;
  4. build and compile the model inside the distribution scope, and resume it
     from the newest checkpoint if this is a later attempt of the same run;
  5. assemble the callbacks that answer the study's questions;
  6. `model.fit` (in two parts after a mid-epoch resume);
  7. write summary.json (atomically) and return the same dict.
"""

from __future__ import annotations

import os
import time

from app import distribute, rundir
from app.prices import resolve_billing
from preprocessing import DataError, InputSpec, check_dataset, make_datasets

USER_ERRORS = (distribute.TopologyError, rundir.RunDirError, DataError)


def input_spec(config, topology, global_batch_size: int | None = None) -> InputSpec:
    """The plain values the dataset builders get (per-process batch and shard)."""
    batch = global_batch_size or config.global_batch_size
    return InputSpec(
        data_dir=config.data_dir, image_size=config.image_size,
        batch_size=batch // topology.num_processes, num_processes=topology.num_processes,
        process_index=topology.process_index, seed=config.seed, preset=config.preprocessing,
        with_validation=config.validation_steps != -1, backend=config.backend,
        manual_dir=config.manual_dir, download=config.download,
        dtype="bfloat16" if config.policy == "mixed_bfloat16" else "float32")


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


def banner(config, topology, logdir: str) -> str:
    per_replica = config.global_batch_size // topology.num_replicas
    return (f"[{config.model} on {config.dataset}] backend={config.backend} "
            f"accelerator={config.accelerator} ({topology.device_kind}) "
            f"replicas={topology.num_replicas} ({topology.num_processes} process(es)) "
            f"global_batch={config.global_batch_size} per_replica_batch={per_replica} "
            f"precision={config.policy} logdir={logdir}")


def run(config, started_at: float | None = None) -> dict:
    """Trains, evaluates and logs one run; returns its summary (as in summary.json).

    Args:
        config: the frozen flags.config.Config.
        started_at: `time.time()` when billing started (the process start).

    Raises:
        TopologyError, RunDirError, DataError: user mistakes, one line each.
        callbacks.checkpoint.Preempted: SIGTERM; a checkpoint was saved first.
        callbacks.nan_guard.Diverged: the loss became NaN/Inf.
    """
    started_at = started_at or time.time()

    # --- 1. Check: nothing is written and no device is used before this passes.
    run_dir = rundir.preflight(config)
    distribute.prepare_backend(config)
    topology = distribute.make_topology(config)
    spec = input_spec(config, topology)
    check_dataset(config.dataset, spec)
    if config.sweep_batch_sizes:
        from app import sweep
        return sweep.run_sweep(config, topology, run_dir, started_at)
    if config.benchmark == "input":
        from app import input_benchmark
        return input_benchmark.run_input_benchmark(config, topology, run_dir, spec)

    # --- 2. The backend is chosen: Keras and the data can come in.
    import keras

    from app import callbacks_setup, checkpointing, models, recipe, summary
    from app.ledger import Ledger

    seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little")
    seed = topology.shared_seed(seed)
    keras.utils.set_random_seed(seed)
    keras.config.set_dtype_policy(config.policy)
    data = make_datasets(config.dataset, spec)
    steps_per_epoch = steps_for(config, data.train_examples)
    validation_steps = 0
    if data.validation is not None:
        validation_steps = data.validation_batches
        if config.validation_steps > 0:
            validation_steps = min(config.validation_steps, data.validation_batches)

    # --- 3. The run folder: process 0 writes, the others only read.
    if topology.is_chief:
        rundir.create(run_dir, config)
    print(banner(config, topology, run_dir.path), flush=True)

    # --- 4. Model, built and compiled inside the distribution scope; resumed.
    with topology.scope():
        model = models.make_model(config.model, data.num_classes, data.image_size)
        recipe.compile_model(model, config, data.num_classes, steps_per_epoch,
                             topology.jit_compile)
    train_flops = models.train_flops_per_image(model)
    state = checkpointing.NEW_RUN
    if run_dir.resuming:
        state = checkpointing.restore(model, run_dir.path, topology.scope(),
                                      rewind=topology.is_chief)
    if state.path:
        print(f"resuming from {state.path} (epoch {state.epoch}, step {state.global_step})")
    ledger = Ledger(run_dir.path, started_at, {"epoch": state.epoch,
                                               "step": state.global_step, "seed": seed}) \
        if topology.is_chief else None

    # --- 5. Billing and the callbacks that answer the study's questions.
    billing = resolve_billing(config.machine, config.pricing, config.price_per_hour_usd,
                              config.peak_tflops_per_device, topology.device_kind,
                              topology.num_replicas)
    parts = callbacks_setup.make_callbacks(
        config, topology, run_dir.path, billing=billing, started_at=started_at,
        billed_seconds_before=ledger.billed_seconds_before if ledger else 0.0,
        steps_per_epoch=steps_per_epoch, validation_images=data.validation_examples,
        train_flops_per_image=train_flops, state=state)

    # --- 6. Train. A mid-epoch checkpoint first finishes its epoch in a short fit.
    status = "failed"
    fit_args = dict(validation_data=data.validation if validation_steps else None,
                    validation_steps=validation_steps or None, callbacks=parts.callbacks,
                    verbose=config.verbosity if topology.is_chief else 0)
    try:
        epoch = state.epoch
        if state.step_in_epoch and epoch < config.epochs:
            model.fit(data.train, epochs=epoch + 1, initial_epoch=epoch, shuffle=False,
                      steps_per_epoch=steps_per_epoch - state.step_in_epoch, **fit_args)
            epoch += 1
        if epoch < config.epochs:
            model.fit(data.train, epochs=config.epochs, initial_epoch=epoch, shuffle=False,
                      steps_per_epoch=steps_per_epoch, **fit_args)
        status = "completed"
    except BaseException as error:
        status = summary.status_of(error)
        raise
    finally:
        attempts = ledger.close(status) if ledger else []
        result = _finish(config, topology, parts, billing, data, steps_per_epoch, started_at,
                         status, seed, train_flops, run_dir, attempts, model)
    return result


def _finish(config, topology, parts, billing, data, steps_per_epoch, started_at, status, seed,
            train_flops, run_dir, attempts, model) -> dict | None:
    """Step 7: the summary, written atomically by process 0 and returned by all.

    Runs after training however it ended; when training failed, a failure here must
    not hide the first error, so it is reported on stderr instead.
    """
    import sys

    from app import summary

    try:
        result = summary.build(
            config=config, topology=topology, parts=parts, billing=billing, data=data,
            steps_per_epoch=steps_per_epoch, started_at=started_at, status=status,
            seed=seed, train_flops_per_image=train_flops, logdir=run_dir.path,
            attempts=attempts, billed_seconds_before=parts.cost.billed_seconds_before
            if parts.cost else 0.0)
        if topology.is_chief:
            rundir.write_json_atomic(os.path.join(run_dir.path, rundir.SUMMARY_FILE), result)
            print(summary.closing_lines(result), flush=True)
        if topology.num_processes > 1:  # lets each host confirm it trained in lockstep
            print(f"process {topology.process_index} of {topology.num_processes}: {status}, "
                  f"weights checksum {summary.weights_checksum(model):.9e}", flush=True)
        return result
    except Exception as error:
        if status == "completed":
            raise
        sys.stderr.write(f"warning: no summary for this {status} run: {error}\n")
        return None
