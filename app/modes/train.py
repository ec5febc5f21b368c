"""Training, top to bottom: `run(context) -> summary dict`.

The story of a run, after app/run/context.py has taken the run folder (locked,
judged new or a resume under the lock) and checked everything:
  1. seed and precision, the datasets, then the run folder is made the run's
     (config.json) and the billing ledger opens at once, before the banner (a
     run that is already complete is not trained again);
  2. build and compile the model inside the distribution scope, and resume it
     from the newest checkpoint if this is a later attempt of the same run (on
     the same data only); the ledger records where this attempt resumed from;
  3. assemble the callbacks (train_callbacks.py);
  4. `model.fit` (in two parts after a mid-epoch resume);
  5. close the bill, write summary.json (atomically, app/run/summary.py) and the
     HParams record of the run's figures, and return the same dict.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from app.engine import cold_start, measured, precompile
from app.engine.data import steps_for, steps_per_execution, unused_images_note
from app.models.flops import model_facts
from app.models.recipe import (
    batchnorm_momentum,
    build_compiled_model,
    count_train_flops,
    recipe_facts,
)
from app.engine.startup import TIMELINE, write_card
from app.modes.train_callbacks import hparams_of, make_callbacks
from app.run import context as run_context
from app.run import resume, rundir, summary
from app.run.ledger import Ledger, attempts_before
from callbacks.figures.bill import Bill, attempts_seconds
from callbacks.figures.steps import every_whole_call
from callbacks.heap import frozen_heap
from callbacks.records import durable, hparams
from callbacks.stops import PROCESS_STOP, Diverged
from preprocessing.datasets import make_datasets


@dataclasses.dataclass(frozen=True)
class Plan:
    """What training was set up with: the data, its epochs, the resume point."""

    data: object  # preprocessing.Datasets
    steps_per_epoch: int
    validation_steps: int  # 0 = no validation
    train_flops_per_image: float | None  # None: the step could not be counted
    state: resume.State
    bill: Bill  # the run's: this attempt's clock and prices, earlier attempts' seconds
    data_facts: dict = dataclasses.field(default_factory=dict)  # checked on resume
    model_facts: dict = dataclasses.field(default_factory=dict)  # name, size, FLOPs, recipe
    # The steps compiled ahead of fit (app/engine/precompile.Precompile), or why not (str):
    # the kernels they run are read from them (app/run/provenance.py).
    compiling: object = None


def banner(context, data, steps_per_epoch: int) -> str:
    config, topology = context.config, context.topology
    facts = data.facts or {}
    # "device" holds the decoded images where the backend can: on a CPU, in host memory
    held = f" [held in {facts['held_in']}]" if facts.get("held_in") else ""
    nominal = " [synthetic data's nominal epoch]" if (
        data.epoch_steps and not config.steps_per_epoch) else ""
    every = every_whole_call(config.log_every_steps, config.steps_per_execution)
    rounded = (f" [log_every_steps={config.log_every_steps} rounded up to {every}: a "
               "multiple of steps_per_execution]" if every != config.log_every_steps else "")
    source = f" from {data.source}" if data.source else ""  # the files read, named
    return (f"[{config.model} on {config.dataset}{source}] backend={config.backend} "
            f"accelerator={config.accelerator} ({topology.device_kind}) "
            f"replicas={topology.num_replicas} ({topology.num_processes} process(es)) "
            f"global_batch={context.batch.global_size} per_replica_batch={context.batch.per_replica} "
            f"steps_per_execution={config.steps_per_execution}{rounded} "
            f"epochs={config.epochs} steps_per_epoch={steps_per_epoch}{nominal} "
            f"{f'xla_autotune={context.xla_autotune} ' if context.xla_autotune else ''}"
            f"image_size={data.image_size} input_pipeline={data.input_pipeline}{held} "
            f"preprocessing={data.preset} precision={config.policy} "
            f"optimizer={config.optimizer} peak_learning_rate={config.learning_rate:g} "
            f"logdir={context.logdir}")


def run(context) -> dict:
    """Trains, evaluates and logs one run; returns its summary (as in summary.json).

    Raises:
        DataError: a dataset problem found while building the streams.
        callbacks.stops.Preempted: SIGTERM; a checkpoint was saved first.
        callbacks.stops.Diverged: the loss became NaN/Inf.
    """
    config = context.config
    done = context.run_dir.resuming and resume.completed_summary(context.logdir, config.epochs)
    if done:
        print(f"run is complete: {context.logdir} holds its summary.json (kept as it is); "
              "pass --fresh to run it again", flush=True)
        print(summary.closing_lines(done), flush=True)
        return done
    # Its summary.json gone or damaged, but its records say it finished: rebuilt below.
    finished = context.run_dir.resuming and resume.finished_by_records(context.logdir,
                                                                       config.epochs)
    # --- 1. Seed and precision; the data comes in; then the run folder.
    context = run_context.start(context)
    data = make_datasets(config.dataset, context.spec)
    steps_per_epoch = steps_for(config, data.train_examples, data.epoch_steps)
    note = None if data.epoch_steps else unused_images_note(config, data.train_examples,
                                                             steps_per_epoch)
    if note:
        print(note, file=sys.stderr, flush=True)
    validation_steps = 0
    if data.validation is not None:
        validation_steps = data.validation_batches
        if config.validation_steps > 0:
            validation_steps = min(config.validation_steps, data.validation_batches)
    facts = resume.data_facts(data, steps_per_epoch)
    if context.run_dir.resuming:
        resume.check_same_data(context.logdir, facts)
    _warn_profile_past_end(config, steps_per_epoch)
    TIMELINE.mark("data")
    run_context.create_folder(context)  # every check passed: the run leaves traces
    # config.json keeps the flags as given (auto is 0, so a rerun resumes); from here on
    # the resolved value, as compiled and in the banner and summary.json.
    context = run_context.with_steps_per_execution(context, steps_per_execution(
        config, data.input_pipeline, steps_per_epoch))
    config = context.config

    # The bill opens as soon as the folder is the run's: an attempt killed while its
    # model builds or restores is billed; where it resumes from is recorded below. A
    # run finished by its records is rebuilt, not billed (no attempt).
    topology = context.topology
    ledger = (Ledger(context.logdir, context.started_at)
              if topology.is_chief and not finished else None)
    print(banner(context, data, steps_per_epoch), flush=True)  # after the ledger: billed
    if context.billing.notes:
        print(run_context.billing_notes(context), flush=True)
    TIMELINE.mark("run_folder")

    # --- 2 and 3. The model, resumed; the callbacks.
    try:
        model, compiling, plan, parts = _set_up(context, data, steps_per_epoch,
                                                validation_steps, facts, ledger, finished)
    except BaseException as error:
        if ledger is not None:  # ended before training: billed, with how it ended
            ledger.close(summary.status_of(error))
        raise
    if finished:
        return _rebuilt(context, plan)
    state = plan.state

    # --- 4. Train. A mid-epoch checkpoint first finishes its epoch in a short fit.
    status = "failed"
    fit_args = dict(validation_data=data.validation if validation_steps else None,
                    validation_steps=validation_steps or None, callbacks=parts.callbacks,
                    verbose=config.verbosity if topology.is_chief else 0)
    try:
        if compiling is not None:  # else fit would compile the steps a second time
            compiling.join(stop=PROCESS_STOP.requested)
            measured.settle(compiling, model)  # the measured choice of kernels, if any
            if cold_start.cut_on("fit_takes_compiled_steps"):
                compiling.hand_to(model)  # fit traces, lowers, reads back neither step
            TIMELINE.mark("compile_wait")
        PROCESS_STOP.raise_if_requested(state.global_step, state.path)
        epoch = state.epoch
        with frozen_heap():  # no full garbage collection scans the model mid-epoch
            if state.step_in_epoch and epoch < config.epochs:
                model.fit(data.train, epochs=epoch + 1, initial_epoch=epoch, shuffle=False,
                          steps_per_epoch=steps_per_epoch - state.step_in_epoch, **fit_args)
                epoch += 1
            if epoch < config.epochs:
                model.fit(data.train, epochs=config.epochs, initial_epoch=epoch,
                          shuffle=False, steps_per_epoch=steps_per_epoch, **fit_args)
        if topology.is_chief:
            rundir.check_intact(context.run_dir)
        status = "completed"
    except BaseException as error:
        status = summary.status_of(error)
        if isinstance(error, Diverged) and parts.checkpoint is not None:
            error.checkpoint = parts.checkpoint.latest_path()
        raise
    finally:
        # The bill ends here, for the ledger and the summary alike: what follows
        # (writing them, the closing lines, the exit) takes 0.3 s on a CPU, most of it
        # tf.data's skipped-image count (tests/test_billing.py bounds it).
        ended_at = time.time()
        attempts = ledger.close(status, at=ended_at) if ledger else []
        result = _finish(context, plan, parts, status, attempts, model, ended_at)
    return result


def _set_up(context, data, steps_per_epoch, validation_steps, facts, ledger, finished):
    """Steps 2 and 3: the model, resumed where this run left off, and the callbacks;
    returns (model, its steps compiling or None, the Plan, the callbacks' parts). For a
    run `finished` by its records, the model restored as it ended and no callbacks
    (_rebuilt makes the summary from them)."""
    config, topology = context.config, context.topology
    # --- 2. Model, built and compiled inside the distribution scope; its steps start
    # compiling (on JAX, in a thread, while the rest starts); resumed.
    model = build_compiled_model(config, topology, data.num_classes, data.image_size,
                                 steps_per_epoch)
    TIMELINE.mark("model_build")
    compiling = None if finished else _precompile(context, model, data)
    if compiling is not None:
        TIMELINE.mark("steps_trace_and_lower")
    train_flops = count_train_flops(config, topology, model, data.num_classes,
                                    data.image_size)
    TIMELINE.mark("flop_count")
    state = resume.NEW_RUN
    if context.run_dir.resuming:
        state = resume.restore(model, context.logdir, topology.scope(),
                               rewind=topology.is_chief and not finished)
    facts_of_model = {**model_facts(model, train_flops), **recipe_facts(config, steps_per_epoch),
                      "batchnorm_momentum": batchnorm_momentum(model)}
    if finished:
        return model, None, Plan(data, steps_per_epoch, validation_steps, train_flops, state,
                                 context.billing.bill(context.started_at), facts,
                                 facts_of_model), None
    if state.path:
        print(f"resuming from {state.path} (epoch {state.epoch}, step {state.global_step})")
    if state.input_state is not None and data.restore_input is not None:
        try:
            data.restore_input(state.input_state)  # the same images, in the same order
        except ValueError as error:  # e.g. another number of decoding workers
            print(f"warning: the input order restarts, its saved position does not fit "
                  f"this pipeline: {error}", file=sys.stderr)

    # --- 3. The callbacks that answer the study's questions.
    if ledger is not None:
        ledger.set_resumed_from({"epoch": state.epoch, "step": state.global_step,
                                 "seed": context.seed},
                                checkpoint_billed_seconds=state.billed_seconds)
    # The bill, built once: the ledger now knows what the earlier attempts billed.
    bill = context.billing.bill(context.started_at,
                                ledger.billed_seconds_before if ledger else 0.0)
    plan = Plan(data, steps_per_epoch, validation_steps, train_flops, state, bill, facts,
                facts_of_model,
                compiling=compiling or precompile.why_not(model, data.batch_specs, topology)
                or "its steps did not lower ahead of fit")
    parts = make_callbacks(context, plan)
    TIMELINE.mark("resume_and_callbacks")
    return model, compiling, plan, parts


def _precompile(context, model, data):
    """The steps lowered now and compiled in threads while the run starts, with the
    cold-start cuts that are on (app/engine/precompile.py); None where that does not
    pay."""
    config = context.config
    hand_to_fit = cold_start.cut_on("fit_takes_compiled_steps")
    # The training step's compiles: more than one for the measured choice of kernels.
    plan = measured.plan(context, data.image_size, hand_to_fit)
    compiling = precompile.start(
        model, data.batch_specs, context.topology,
        # XLA's full autotuning times kernels on the device: one compile at a time
        side_by_side=cold_start.cut_on("steps_side_by_side") and context.xla_autotune not in (
            "full", "xla_flags", "measured"),
        hand_to_fit=hand_to_fit, train_options=plan.train_options, train_variants=plan.variants)
    return measured.attach(compiling, plan)


def _finish(context, plan, parts, status, attempts, model, ended_at) -> dict | None:
    """Step 5: the summary, written atomically by process 0 and returned by all, and
    the HParams record of the run's figures.

    Runs after training however it ended; when training failed, a failure here must
    not hide the first error, so it is reported on stderr instead.
    """
    topology = context.topology
    try:
        result = summary.build(context, plan, parts, status, attempts, ended_at)
        measured.complete(result, context, plan)  # the kernels' cost and per-op findings
        if topology.is_chief and os.path.isdir(context.logdir):  # not a lost folder's
            rundir.write_json_atomic(f"{context.logdir}/{rundir.SUMMARY_FILE}", result)
            hparams.write_record(
                context.logdir, hparams_of(context.config, topology, context.billing), result,
                status, started_at=summary.first_start(attempts, context.started_at),
                step=result["epochs_completed"])
            if result.get("startup"):  # its TensorBoard card (app/engine/startup.py)
                write_card(os.path.join(context.logdir, "train"), result["startup"],
                           step=plan.state.global_step)
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


def _rebuilt(context, plan) -> dict:
    """The summary of a run that finished by its records (resume.finished_by_records)
    whose summary.json is gone or damaged: made again from them, neither trained nor
    billed again. The figures are the final checkpoint's (the run's sums of throughput
    and energy, its top-1 history: the callbacks carry them as on a resume), the bill
    is the ledger's attempts as they closed, and no attempt is added. A summary.json
    that is there is kept aside, never overwritten; the closing lines are printed.
    """
    logdir = context.logdir
    attempts = attempts_before(logdir, plan.state.billed_seconds)
    # Where the completed attempt's bill ended (a shortfall "recovered from the
    # checkpoint", started at 0, is no attempt in time).
    ended_at = max(a["last_seen"] for a in attempts if a["started_at"] > 0)
    first = attempts[0].get("resumed_from") or {}
    seed = first.get("seed") if isinstance(first.get("seed"), int) else context.seed
    # This process bills nothing: its "start" is the bill's end.
    context = dataclasses.replace(context, started_at=ended_at, seed=seed)
    plan = dataclasses.replace(plan, bill=context.billing.bill(ended_at,
                                                               attempts_seconds(attempts)))
    result = summary.build(context, plan, make_callbacks(context, plan), "completed",
                           attempts, ended_at)
    path = os.path.join(logdir, rundir.SUMMARY_FILE)
    was = "missing"
    if context.is_chief:
        if os.path.lexists(path):
            was = f"damaged (kept as {os.path.basename(durable.set_aside(path))})"
        rundir.write_json_atomic(path, result)
        print(f"run is complete: {logdir}'s summary.json was {was}; rebuilt from its "
              "records (checkpoint, metrics.jsonl, billing.json), not trained or billed "
              "again", flush=True)
        print(summary.closing_lines(result), flush=True)
    return result


def _warn_profile_past_end(config, steps_per_epoch: int) -> None:
    last = config.epochs * steps_per_epoch
    if config.profile_range and config.profile_range[0] > last:
        sys.stderr.write(f"warning: --profile_steps={config.profile_steps} starts after the "
                         f"run's last step ({last}); no trace will be written\n")
