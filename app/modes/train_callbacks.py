"""Builds a training run's callbacks from its context, in the order their figures flow.

Each callback is constructed from plain values (never the config): this module is
the one place that turns flags and resume state into those values. Order matters
only for `logs`: a callback reads what earlier ones published (MFU reads
epoch_images_per_sec), and the metrics
sink comes after them, but before the checkpoint: an epoch's line is written before
its checkpoint commits, so no checkpoint is ever ahead of the logs. Each checkpoint
keeps the run's sums of throughput and energy and the trace it took (`run_figures`),
which a resumed attempt continues. Two values are built once and handed on: the run's
Bill (plan.bill: its money, to the meter, the targets and the checkpoint) and its
Position (its steps and images, to every callback that numbers or counts them).
"""

from __future__ import annotations

import dataclasses
import os

from app.run import provenance, signals
from callbacks.accuracy import TopOneTargets
from callbacks.checkpoint import Checkpoint
from callbacks.cost import CloudCost
from callbacks.energy import EnergyMeter, gpu_energy_readers
from callbacks.figures.steps import Position
from callbacks.first_step import FirstStep
from callbacks.heap import FreezeAfterCompile
from callbacks.learning_rate import LearningRateLogger
from callbacks.metrics_logger import MetricsLogger
from callbacks.mfu import ModelFlopsUtilization
from callbacks.nan_guard import NanGuard
from callbacks.profiler import Profiler
from callbacks.progress import Progress
from callbacks.records.dashboard import energy_descriptions
from callbacks.stall import StallWatchdog
from callbacks.stops import PROCESS_STOP
from callbacks.throughput import Throughput

# No finished batch for this long ends the run (exit 69): far above any compile
# time. The environment variable exists for tests.
STALL_SECONDS = float(os.environ.get("BENCH_STALL_SECONDS", 1800))
# Output to a file or a pipe (--verbose=2) gets a progress line this often in an epoch.
PROGRESS_LINE_SECONDS = float(os.environ.get("BENCH_PROGRESS_LINE_SECONDS", 30))


@dataclasses.dataclass
class RunCallbacks:
    """The callbacks of one run, by role, and the list to give `fit`."""

    callbacks: list
    throughput: Throughput
    cost: CloudCost
    mfu: ModelFlopsUtilization
    targets: TopOneTargets
    nan_guard: NanGuard
    energy: EnergyMeter | None = None
    logger: MetricsLogger | None = None
    checkpoint: Checkpoint | None = None
    profiler: Profiler | None = None
    first_step: FirstStep | None = None  # the start-up timeline's end (app/engine/startup.py)
    machine: object = None  # app/run/provenance.Sampled: the GPUs' state through the window


def hparams_of(config, topology, billing) -> dict:
    """The settings shown in TensorBoard's HParams dashboard (None = not known,
    left out)."""
    return {
        "accelerator": config.accelerator, "backend": config.backend,
        "device_kind": topology.device_kind, "num_replicas": topology.num_replicas,
        "model": config.model, "dataset": config.dataset,
        "global_batch_size": config.global_batch_size, "precision": config.policy,
        "steps_per_execution": config.steps_per_execution,
        "machine": billing.machine, "price_per_hour_usd": billing.price_per_hour_usd,
    }


def _extra_state(parts, plan, step: int) -> dict:
    """What a checkpoint keeps besides weights: the top-1 history, the run's sums of
    throughput and energy, and the input stream's position after `step` steps where
    the stream can resume exactly."""
    extra = {"top1_history": parts.targets.history,
             "run_figures": {"throughput": parts.throughput.state(step),
                             **({"energy": parts.energy.state()} if parts.energy else {}),
                             # the trace session and steps, once traced: never traced again
                             **({"profile": parts.profiler.state()} if parts.profiler else {})}}
    if plan.data.input_state is not None:
        extra["input_state"] = plan.data.input_state(step - plan.state.global_step)
    return extra


def make_callbacks(context, plan) -> RunCallbacks:
    """The callbacks for `fit`; process 0 alone gets those that write files.

    Args:
        context: the app.run.context.RunContext.
        plan: the app.modes.train.Plan (data, epoch length, resume state, ...).
    """
    config, topology, billing = context.config, context.topology, context.billing
    logdir, state = context.logdir, plan.state
    steps_per_epoch = plan.steps_per_epoch
    carried = state.run_figures
    # The run's position, one owner (as the Bill owns its money): every callback that
    # numbers steps or counts images is handed it.
    position = Position.of_batch(context.batch, steps_per_epoch=steps_per_epoch,
                                 resume_step=state.global_step, images_before=state.images_seen)
    throughput = Throughput(position, topology.num_replicas,
                            warmup_steps=config.throughput_warmup_steps,
                            validation_images=plan.data.validation_examples,
                            carried=carried.get("throughput"), traced=config.profile_range)
    cost = CloudCost(plan.bill, position, total_epochs=config.epochs)
    mfu = ModelFlopsUtilization(plan.train_flops_per_image, topology.num_replicas,
                           billing.peak_tflops_per_device)
    targets = TopOneTargets(config.target_top1, history=state.top1_history, bill=plan.bill)
    nan_guard = NanGuard(position)
    parts = RunCallbacks([], throughput, cost, mfu, targets, nan_guard)
    # Every process checkpoints in step (SIGTERM stops them all); process 0 writes.
    parts.checkpoint = Checkpoint(
        logdir, position, every_steps=config.checkpoint_every_steps, bill=plan.bill,
        extra_state=lambda step: _extra_state(parts, plan, step),
        write=topology.is_chief, stop_request=PROCESS_STOP,
        data_facts=plan.data_facts)
    readers = gpu_energy_readers(config.accelerator, topology.devices_per_process)
    if readers is not None:  # each process meters its own GPUs, which see its images
        parts.energy = EnergyMeter(
            **readers, position=position, warmup_steps=config.throughput_warmup_steps,
            carried=carried.get("energy") if topology.is_chief else None)  # process 0's
    parts.machine = provenance.make_sampler(config, topology)  # None: nothing to sample
    if topology.is_chief:
        parts.logger = MetricsLogger(
            logdir, config.log_every_steps,
            hparams=None if state.global_step else hparams_of(config, topology, billing),
            position=position,
            descriptions=energy_descriptions(parts.energy.method if parts.energy else None),
            started_at=context.started_at)
        if config.profile_range:
            parts.profiler = Profiler(logdir, *config.profile_range, backend=config.backend,
                                      position=position, carried=carried.get("profile"))
    # Producers of figures first, then their readers; the guard before the checkpoint
    # (a diverged step must stop training before anything is saved); the sink before
    # the checkpoint (the logs are never behind a committed checkpoint). Progress
    # replaces Keras's progress bar (which would print every figure). FreezeAfterCompile
    # keeps full garbage collections short once the steps are compiled (callbacks/heap.py).
    # FirstStep last: its marks follow every other callback's hooks (callbacks/first_step.py).
    parts.first_step = FirstStep()
    ordered = [StallWatchdog(STALL_SECONDS, signals.stalled), FreezeAfterCompile(),
               LearningRateLogger(),
               throughput, parts.energy, parts.machine and parts.machine.callback, cost,
               mfu, targets, nan_guard, parts.profiler,
               Progress(total_epochs=config.epochs, steps_per_epoch=steps_per_epoch,
                        stop_request=PROCESS_STOP, line_every_seconds=PROGRESS_LINE_SECONDS),
               parts.logger, parts.checkpoint, parts.first_step]
    parts.callbacks = [c for c in ordered if c is not None]
    return parts
