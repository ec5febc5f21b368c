"""`--benchmark=probe`: how fast this machine trains the user's model, in about a minute.

The same command as a training run, with --benchmark=probe: the model, batch,
precision and --dataset as the run would have them, measured on this machine by the
measuring function the sweep and the ladder share (app/engine/measure.py's timed_fit):
  1. start-up: from the process's start (as a run is billed from it) through the
     data, the model's build and a warm-up fit that compiles its step, measured;
  2. a short calibration (CALIBRATION_EXECUTIONS host calls) that times a step, then
     --repeats timed windows (3 by default), each its share of PROBE_SECONDS or
     --steps_per_epoch where fewer (timed_steps); the rate is their median;
  3. a few more steps traced and split by kind of work (PROFILED_STEPS): its breakdown;
  4. the machine's state where it can be read (its CPU load and cores; each GPU's
     temperature, clocks, power limit and other processes, through NVML).
What it says is what app/report.py's decision predicts from (app/report/decision/): the
rate and the start-up of this machine, its catalog row and prices.

Outputs (process 0): probe.json and summary.json (the same dict; the model's size and
what an image keeps, as a run's, for the device model), the trace under plugins/profile/
and a few lines. A stopped probe is measured again by the same command; a finished one
prints its lines again (--fresh measures anew).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time

from app.engine import measure
from app.engine.data import steps_for, steps_per_execution
from app.models.flops import model_facts
from app.models.recipe import make_compiled_model, recipe_facts
from app.run import context as run_context
from app.run import rundir
from app.run.summary import percent, shell_command
from callbacks.energy import EnergyMeter, gpu_energy_readers
from callbacks.figures import spread
from callbacks.figures.bill import PRICING_WORDS, usd, usd_per_hour, usd_per_million_images
from callbacks.figures.steps import Position
from callbacks.mfu import ModelFlopsUtilization
from callbacks.profiler import Profiler
from callbacks.profiling import breakdown as step_breakdown
from callbacks.profiling import timed
from callbacks.stop_on_request import StopOnRequest
from callbacks.stops import PROCESS_STOP

PROBE_FILE = "probe.json"
# The timed windows' seconds after the compile, and one window's floor however many;
# BENCH_PROBE_SECONDS scales both down for the test suite's probes.
PROBE_SECONDS = float(os.environ.get("BENCH_PROBE_SECONDS", 30.0))
WINDOW_SECONDS = PROBE_SECONDS * 8.0 / 30.0
CALIBRATION_EXECUTIONS = 3  # host calls timed to size the timed steps (the first is left out)
MIN_EXECUTIONS = 4  # the fewest host calls timed, however slow a step
MAX_STEPS = 100_000
PROFILED_STEPS = 3  # traced after the timed ones (rounded up to whole host calls)


def timed_steps(step_seconds: float | None, spe: int, asked: int = 0, windows: int = 1) -> int:
    """The steps of each timed window: as many whole host calls of `spe` steps as its
    share of PROBE_SECONDS holds at `step_seconds` a step (at most MAX_STEPS), or
    `asked` (--steps_per_epoch) where that is fewer; never under WINDOW_SECONDS' worth
    nor MIN_EXECUTIONS calls: a short window's rate is the machine's noise (three
    50-step probes of one job read 1,373, 705 and 822 images/sec on this CPU), and a
    job's long epoch would make the probe the job."""
    if not step_seconds or step_seconds <= 0:
        return max(asked, MIN_EXECUTIONS * spe)

    def calls(seconds):
        return spe * max(MIN_EXECUTIONS, min(int(seconds / (step_seconds * spe)),
                                             MAX_STEPS // spe))
    budget = calls(max(PROBE_SECONDS / max(windows, 1), WINDOW_SECONDS))
    return max(calls(WINDOW_SECONDS), min(asked or budget, budget))


def machine_snapshot(backend_gpus: list[int] | None, nvml=None) -> dict:
    """What can be read of this machine's state now (the probe's `machine_snapshots`,
    one before and one after: not a run's `machine_state`, which samples NVML through
    the timed window, callbacks/machine_state.py): its CPU cores and 1-minute load
    average (Linux), and for each GPU index in `backend_gpus` its temperature, SM
    clock against its maximum, power limit and the other processes on it (NVML);
    a figure that cannot be read is absent, never 0.

    Args:
        backend_gpus: NVML indices of this process's GPUs (None: no GPU).
        nvml: the pynvml module, or a stand-in with its functions (tests); None
            imports pynvml where installed.
    """
    state = {"cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count()}
    try:
        state["load_average_1m"] = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        pass
    if not backend_gpus:
        return state
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver: no GPU state
        return state
    gpus = []
    for index in backend_gpus:
        gpu = {"index": index}
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # noqa: BLE001
            continue
        reads = {"temperature_c": lambda h: nvml.nvmlDeviceGetTemperature(h, 0),
                 "sm_clock_mhz": lambda h: nvml.nvmlDeviceGetClockInfo(h, 1),
                 "max_sm_clock_mhz": lambda h: nvml.nvmlDeviceGetMaxClockInfo(h, 1),
                 "power_limit_w": lambda h: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
                 "other_processes": lambda h: sum(
                     1 for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)
                     if p.pid != os.getpid())}
        for name, read in reads.items():
            try:
                gpu[name] = read(handle)
            except Exception:  # noqa: BLE001 - this figure unsupported here
                pass
        gpus.append(gpu)
    state["gpus"] = gpus
    return state


def run(context) -> dict:
    """Probes this machine with the run's model, batch, precision and data; returns the
    summary dict (as in probe.json).

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C, at a step boundary.
    """
    config, run_dir = context.config, context.run_dir
    done = os.path.join(run_dir.path, PROBE_FILE)
    if run_dir.resuming and os.path.exists(done):
        summary = rundir.read_json(done)
        print(f"probe is complete: {run_dir.path} holds its {PROBE_FILE} (kept as it is); "
              "pass --fresh to measure again", flush=True)
        print(closing_lines(summary), flush=True)
        return summary
    context = run_context.start(context)
    from preprocessing.datasets import make_datasets

    data = make_datasets(config.dataset, dataclasses.replace(context.spec,
                                                             with_validation=False))
    epoch_steps = steps_for(config, data.train_examples, data.epoch_steps)
    run_context.create_folder(context)
    context = run_context.with_steps_per_execution(context, steps_per_execution(
        config, data.input_pipeline, epoch_steps))
    config, topology, billing = context.config, context.topology, context.billing
    spe = config.steps_per_execution
    print(f"[probe] {config.model} on {config.dataset} ({data.image_size}x{data.image_size}, "
          f"input_pipeline={data.input_pipeline}) on {topology.num_replicas} x "
          f"{topology.device_kind} ({config.backend}), global batch {context.batch.global_size}, "
          f"precision {config.policy}, {spe} step(s) per call, {config.repeats} timed "
          "window(s)", flush=True)
    if billing.notes:
        print(run_context.billing_notes(context), flush=True)
    state_before = machine_snapshot(_gpu_indices(config, topology))
    model, flops = make_compiled_model(config, topology, data.num_classes, data.image_size,
                                       epoch_steps)
    stop = [StopOnRequest(PROCESS_STOP)]
    warmup = max(2 * spe, config.throughput_warmup_steps)
    fit_started = time.time()
    PROCESS_STOP.raise_if_requested()
    calibration, warmup_seconds = measure.timed_fit(
        model, data.train, config, context.batch, CALIBRATION_EXECUTIONS * spe, warmup,
        stop, warmup_callbacks=stop)
    started = step_compiles(context.started_at, time.time())
    cache = "none" if config.backend != "jax" else "warm" if started["served"] else "cold"
    evaluation = evaluation_compile(model, data.train, config, spe, stop)
    step_seconds = (context.batch.global_size / calibration.images_per_sec
                    if calibration.images_per_sec else None)
    # The warm-up's steps are a run's first-epoch training, not start-up: the 30 of a JAX
    # Fashion-MNIST probe (1 s a step) made its start-up 36 s against the run's 20.
    steps_seconds = warmup * (step_seconds or 0.0)
    startup = fit_started - context.started_at + warmup_seconds - steps_seconds + evaluation
    steps = timed_steps(step_seconds, spe, config.steps_per_epoch, config.repeats)
    readers = gpu_energy_readers(config.accelerator, topology.devices_per_process)
    energy = EnergyMeter(**readers, position=Position.of_batch(context.batch),
                         warmup_steps=spe) if readers else None
    profiled = spe * -(-PROFILED_STEPS // spe)
    profiler = Profiler(run_dir.path, 1, profiled, backend=config.backend,
                        position=Position(steps_per_epoch=profiled)) if context.is_chief else None
    timed_started, windows_began = time.perf_counter(), time.time()
    # Each window after the first compiles the step afresh, from no cache (measure.py):
    # the rate's spread over compiles, and the compile a fresh machine pays.
    meter, _ = measure.timed_fit(
        model, data.train, config, context.batch, steps, spe,
        [c for c in (energy, *stop) if c is not None], warmup_callbacks=stop,
        profiled=(profiled, profiler), repeats=config.repeats)
    measuring_seconds = time.perf_counter() - timed_started
    fresh = step_compiles(windows_began, time.time())["compiled"] / (config.repeats - 1) \
        if config.repeats > 1 else None
    cold = cold_startup(startup, cache, started["read"], fresh)
    summary = _summary(context, data, epoch_steps, flops, meter, energy, profiler, {
        "startup_seconds": round(startup, 2), **cold, **model_facts(model, flops),
        "before_compile_seconds": round(fit_started - context.started_at, 2),
        "compile_and_warmup_seconds": round(warmup_seconds, 2), "warmup_steps": warmup,
        "warmup_steps_seconds": round(steps_seconds, 2),
        "evaluation_compile_seconds": round(evaluation, 2),
        "calibration_steps": CALIBRATION_EXECUTIONS * spe, "timed_steps": steps,
        "profiled_steps": profiled, "measuring_seconds": round(measuring_seconds, 2),
    }, {"before": state_before, "after": machine_snapshot(_gpu_indices(config, topology))})
    if context.is_chief:
        for name in (PROBE_FILE, rundir.SUMMARY_FILE):
            rundir.write_json_atomic(os.path.join(run_dir.path, name), summary)
        from app.modes.train_callbacks import hparams_of
        from callbacks.records import hparams

        hparams.write_record(run_dir.path, hparams_of(config, topology, billing), summary,
                             summary["status"], started_at=context.started_at, label="probe")
        print(closing_lines(summary), flush=True)
    return summary


def evaluation_compile(model, train, config, spe: int, stop) -> float:
    """Seconds to compile and run the evaluation step once (`spe` batches of the
    training stream: the shapes a validation batch has), always from no compile cache.
    A training run pays it before or in its first epoch, and its start-up, as the
    decision reads it from a run, holds it: a probe that left it out predicted a JAX
    digits run's hours 15% short on this CPU (its start-up 7.0 s against the run's 9.8)."""
    started = time.perf_counter()
    with measure.fresh_compiles(config.backend, True):
        model.evaluate(train, steps=spe, verbose=0, callbacks=stop)
    return time.perf_counter() - started


def step_compiles(since: float, until: float) -> dict:
    """The training step's compiles between `since` and `until` (JAX's programs named
    for training, as app/engine/startup.py's TIMELINE saw them): {"read": seconds the
    persistent cache served, "compiled": seconds it did not}. Only the step's count: a
    cache that served a run's small programs (an array's conversion) and not its step
    leaves the start as cold as a fresh machine's, less a few milliseconds."""
    from app.engine.startup import TIMELINE

    spans = [(end - start, cached) for name, stage, start, end, _, cached
             in list(TIMELINE.spans) if stage == "compile" and "train" in name
             and since <= start <= until]
    return {"read": sum(s for s, cached in spans if cached),
            "compiled": sum(s for s, cached in spans if not cached),
            "served": any(cached for _, cached in spans)}


def cold_startup(startup: float, cache: str, read_seconds: float,
                 fresh_compile_seconds: float | None) -> dict:
    """The start-up from empty compile caches, the one a machine's first rented hour
    pays: the measured one where the cache was cold (or there is none: TensorFlow);
    where it was warm, the measured one less the seconds its compiles were read from
    the cache, plus the seconds a fresh compile of the same programs took in a later
    window (`fresh_compile_seconds`, each window's compiles from no cache: measure.py);
    None where no window compiled afresh (--repeats=1 on a warm cache: said so)."""
    out = {"compile_cache": cache}
    if cache != "warm":
        out.update(startup_cold_seconds=round(startup, 2), startup_cold_from="measured")
    elif fresh_compile_seconds is not None:
        out.update(startup_cold_seconds=round(startup - read_seconds + fresh_compile_seconds, 2),
                   startup_cold_from=(f"estimated: the warm start-up less its compiles read "
                                      f"from the cache ({read_seconds:,.1f} s) plus the same "
                                      f"compiled afresh ({fresh_compile_seconds:,.1f} s)"))
    else:
        out.update(startup_cold_seconds=None,
                   startup_cold_from="unknown: the cache was warm and no window compiled "
                                     "afresh (--repeats=1)")
    return out


def _gpu_indices(config, topology) -> list[int] | None:
    from callbacks.energy import visible_gpu_indices

    return (visible_gpu_indices(topology.devices_per_process)
            if config.accelerator == "gpu" else None)


def _summary(context, data, epoch_steps, flops, meter, energy, profiler, timing, state):
    config, topology, billing = context.config, context.topology, context.billing
    rate = meter.images_per_sec
    mfu = ModelFlopsUtilization(flops, topology.num_replicas,
                                billing.peak_tflops_per_device).utilization(rate) if rate else None
    bill, at = billing.bill(context.started_at), time.time()  # the probe's own bill
    steps = meter.step_time()
    traced = profiler.breakdown if profiler else None
    # Set against the timed step, as a run's, sweep point's and rung's are: the traced one
    # is the profiler's clock (on a CPU 2.15x the timed; callbacks/profiling/timed.py).
    breakdown = timed.reconcile(traced, steps.get("step_time_ms")) if traced else None
    return {
        "mode": "probe", **topology.describe(), "model": config.model,
        "dataset": config.dataset, "num_classes": data.num_classes,
        "image_size": data.image_size, "precision": config.policy,
        "input_pipeline": data.input_pipeline, "global_batch_size": context.batch.global_size,
        "per_replica_batch_size": context.batch.per_replica,
        "steps_per_execution": config.steps_per_execution,
        "xla_autotune": context.xla_autotune, "steps_per_epoch": epoch_steps,
        "train_examples": data.train_examples, "epochs": config.epochs, "seed": context.seed,
        "recipe": recipe_facts(config, epoch_steps),
        # The steady window of the timed steps (callbacks/throughput.py).
        "images_per_sec": round(rate, 2) if rate else None,
        "images_per_sec_per_device": round(rate / topology.num_replicas, 2) if rate else None,
        **{k: round(v, 4) for k, v in steps.items()},
        # Each timed window's rate, compile and steps (app/engine/measure.py), their min-max.
        **meter.figures(),
        "usd_per_million_images": round(usd_per_million_images(rate, billing.price_per_hour_usd),
                                        6) if rate and billing.price_per_hour_usd else None,
        "train_flops_per_image": flops,
        "mfu": float(f"{mfu:.6g}") if mfu is not None else None,
        "peak_tflops_per_device": billing.peak_tflops_per_device, **timing,
        "breakdown": breakdown,
        "power_watts": round(energy.power_watts, 1) if energy and energy.power_watts else None,
        "machine_snapshots": state,
        "machine": billing.machine, "pricing": billing.pricing, "machines": billing.machines,
        "price_per_hour_usd": billing.price_per_hour_usd, "price_source": billing.source,
        "price_per_hour_usd_by_pricing": dict(billing.price_per_hour_by_option),
        "price_notes": list(billing.notes),
        "billed_seconds": round(bill.seconds(at), 2),
        "cost_usd": round(bill.cost_usd(at), 6) if bill.price_per_hour_usd is not None else None,
        "status": "completed", "started_at": context.started_at,
        "logdir": context.logdir, "command": shell_command(*sys.argv),
    }


def closing_lines(summary: dict) -> str:
    """What the probe measured, in a few lines, and the command that decides from it."""
    rate = summary.get("images_per_sec")
    mfu = f", MFU {percent(summary['mfu'])}" if summary.get("mfu") is not None else ""
    windows = summary.get("repeats") or 1
    repeated = spread.words(summary)
    lines = [f"probe: {rate:,.1f} images/sec ({summary['images_per_sec_per_device']:,.1f} per "
             f"device x {summary['num_replicas']}){mfu} over "
             + (f"{windows} timed windows of {summary['timed_steps']} steps"
                + (f" ({repeated})" if repeated else "") if windows > 1 else
                f"{summary['timed_steps']} timed steps")
             + f" at global batch {summary['global_batch_size']}" if rate else
             "probe: not measured (too few steps after the warm-up)",
             f"start-up: {summary['startup_seconds']:,.1f} s from the process's start to the "
             f"compiled steps ({_compile_words(summary)})" + _cache_words(summary)]
    if summary.get("breakdown"):
        lines.append("breakdown: " + step_breakdown.line(
            summary["breakdown"], peak_tflops_per_device=summary.get("peak_tflops_per_device")))
    lines.append("machine: " + _state_line(summary.get("machine_snapshots") or {}))
    prices = summary.get("price_per_hour_usd_by_pricing") or {}
    if prices:
        sold = ", ".join(f"{usd_per_hour(v)} {PRICING_WORDS.get(k, k)}" for k, v in prices.items())
        lines.append(f"price: {summary['machine']}: {sold}; this probe {usd(summary['cost_usd'])}"
                     if summary.get("cost_usd") is not None else f"price: {sold}")
    else:
        lines.append("price: unknown (no catalog row prices this device: pass --machine or "
                     "--price_per_hour_usd)")
    report = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "report.py")
    report = report if os.path.relpath(report).startswith("..") else os.path.relpath(report)
    lines.append("decide: " + shell_command(report, "FULL_RUN", summary["logdir"],
                                            "--target=TOP1", "--out", "decision")
                 + " (FULL_RUN: a training run of this model at this batch, on any machine)")
    return "\n".join(lines)


def _compile_words(summary: dict) -> str:
    """'4.2 s of it compiling the training step, 0.6 s the evaluation step; its 30
    warm-up steps (29.6 s) count as training' (a probe from before: 'N s of it
    compiling and warming up')."""
    steps = summary.get("warmup_steps_seconds")
    if steps is None:
        return f"{summary['compile_and_warmup_seconds']:,.1f} s of it compiling and warming up"
    return (f"{summary['compile_and_warmup_seconds'] - steps:,.1f} s of it compiling the "
            f"training step, {summary['evaluation_compile_seconds']:,.1f} s the evaluation "
            f"step; its {summary['warmup_steps']} warm-up steps ({steps:,.1f} s) count as "
            "training")


def _cache_words(summary: dict) -> str:
    """How the start-up found the compile cache, and the cold one where they differ."""
    cache, cold = summary.get("compile_cache"), summary.get("startup_cold_seconds")
    if cache == "warm":
        return ("; its step came from the compile cache (warm): from empty caches, as a "
                "fresh machine starts, " + (f"{cold:,.1f} s ({summary['startup_cold_from']})"
                                            if cold is not None else
                                            "not measured (--repeats=1)"))
    if cache == "cold":
        return "; from empty compile caches (cold), as a fresh machine starts"
    return ""


def _state_line(state: dict) -> str:
    before, after = state.get("before") or {}, state.get("after") or {}
    parts = [f"{before.get('cpu_cores', '?')} CPU cores"]
    if "load_average_1m" in before:
        parts.append(f"load {before['load_average_1m']:g} before, "
                     f"{after.get('load_average_1m', float('nan')):g} after")
    for gpu in after.get("gpus") or []:
        text = [f"GPU {gpu['index']}"]
        if "temperature_c" in gpu:
            text.append(f"{gpu['temperature_c']} C")
        if "sm_clock_mhz" in gpu and "max_sm_clock_mhz" in gpu:
            text.append(f"SM {gpu['sm_clock_mhz']}/{gpu['max_sm_clock_mhz']} MHz")
        if gpu.get("other_processes"):
            text.append(f"{gpu['other_processes']} other process(es)")
        parts.append(" ".join(text))
    return "; ".join(parts)
