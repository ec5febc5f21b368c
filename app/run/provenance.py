"""What the run ran on and which kernels it ran: summary.json's `machine_state` and
`kernels`, kernels.json, a TensorBoard card, and the closing lines that name them.

- `kernels` (app/engine/kernels.py): the training step's chosen GPU kernels, read
  from the program app/engine/precompile.py compiled; a digest, counts, where they
  came from; the list itself in <run>/kernels.json. Where the step was not compiled
  ahead (TensorFlow, a pipeline that does not know its batches' shapes, ...), the
  record says why it cannot name them.
- `machine_state`: the device, the host, the driver and libraries
  (app/engine/machine.py), and the GPUs' clocks, power, temperature, throttle
  reasons and other processes through the timed window (callbacks/machine_state.py).

A closing line names the kernels on a GPU (and wherever --kernels_from or
--keep_kernels asked for them), and the machine only when something was off: a
throttle reason that slows the clocks in at least OFF_SHARE of the samples, an SM clock
averaging under OFF_CLOCK of its maximum, or another process on the GPU.
"""

from __future__ import annotations

import os

from app.engine import autotune, kernels, machine
from callbacks.records import durable, untrusted
from callbacks.records.state_records import SLOWING, read_kernels

# Seconds between the machine-state sampler's reads (callbacks/machine_state.py); 0 turns
# it off: for measuring what sampling costs a timed window (BUILD.md), not for users.
SAMPLE_SECONDS = float(os.environ.get("BENCH_STATE_SAMPLE_SECONDS", 0.25))
OFF_SHARE = 0.05  # a slowing throttle reason in this share of the samples is worth a line
OFF_CLOCK = 0.90  # an SM clock averaging under this share of its maximum likewise


def fields(context, plan, parts, write: bool) -> dict:
    """summary.json's `kernels` and `machine_state`; with `write` (process 0, its folder
    there) kernels.json and the TensorBoard card too."""
    config, topology = context.config, context.topology
    block, found = _kernels(context, getattr(plan, "compiling", None))
    sampled = getattr(parts, "machine", None)
    state = {"device_kind": topology.device_kind, "accelerator": topology.accelerator,
             "devices_per_process": topology.devices_per_process,
             "host": machine.host(), "software": machine.software_versions(config.backend),
             **(sampled.facts() if sampled is not None else
                {"driver": None, "cuda_driver": None, "devices": []}),
             "timed_window": sampled.callback.summary() if sampled is not None else None,
             "not_sampled": None if sampled is not None else why_not_sampled(topology)}
    if write and os.path.isdir(context.logdir):
        if found is not None:
            earlier = _earlier_digest(context.logdir)
            if earlier and earlier != block["digest"]:
                block["earlier_digest"] = earlier
            durable.write_json_atomic(os.path.join(context.logdir, kernels.KERNELS_FILE),
                                      {**block, "kernels": found})
        _card(os.path.join(context.logdir, "train"), block, state)
    return {"kernels": block, "machine_state": state}


class Sampled:
    """The MachineState callback of a run and the facts function made with it
    (app/engine/machine.py's `sampler`)."""

    def __init__(self, callback, facts):
        self.callback, self.facts = callback, facts


def make_sampler(config, topology) -> Sampled | None:
    """The run's machine-state sampler, or None where there is none (see machine.sampler)
    or BENCH_STATE_SAMPLE_SECONDS=0 turned it off."""
    if SAMPLE_SECONDS <= 0:
        return None
    made = machine.sampler(config.accelerator, topology.devices_per_process,
                           interval_seconds=SAMPLE_SECONDS,
                           warmup_steps=config.throughput_warmup_steps)
    return Sampled(*made) if made is not None else None


def why_not_sampled(topology) -> str:
    """Why a run's (a point's) GPUs were not sampled, in words."""
    if SAMPLE_SECONDS <= 0:
        return "turned off (BENCH_STATE_SAMPLE_SECONDS=0)"
    if topology.accelerator == "tpu":
        return "the TPU runtime gives a program no clocks or throttle reasons"
    if topology.accelerator == "cpu":
        return "a CPU run: no accelerator to sample"
    return "NVML (nvidia-ml-py) could not be read"


def _kernels(context, compiling) -> tuple[dict, list | None]:
    """(the `kernels` block, the list or None where not known)."""
    config = context.config
    loaded = os.environ.get("XLA_FLAGS", "")
    loaded_from = _flag_value(loaded, "xla_gpu_load_autotune_results_from") \
        if config.kernels_from else None
    kept = os.path.join(context.logdir, kernels.KEPT_FILE) if config.keep_kernels else None
    heuristic = context.xla_autotune == "heuristic" or autotune.HEURISTIC_FLAG in loaded
    why = None
    if compiling is None:  # a run finished by its records, rebuilt (app/modes/train.py)
        why = "rebuilt from the run's records"
    elif isinstance(compiling, str):  # why the steps were not compiled ahead
        why = compiling
    elif compiling.error is not None:
        why = f"its step did not compile ahead of fit ({type(compiling.error).__name__})"
    elif compiling.train_step is None:
        why = "its compile was stopped before it ended"
    if why is None:
        try:
            block, found = kernels.describe(compiling.train_step.as_text(),
                                            compiling.train_served, loaded_from, heuristic)
        except Exception as error:  # noqa: BLE001 - a program without text: say so
            why, found = f"its program has no text ({type(error).__name__})", None
    if why is not None:
        block, found = _recorded(context.logdir, why)
    if kept is not None:
        block.update(_kept(kept, block))
    return block, found


def _recorded(logdir: str, why: str) -> dict:
    """The block kernels.json holds (an earlier attempt's), else one saying `why`."""
    try:
        recorded = read_kernels(os.path.join(logdir, kernels.KERNELS_FILE))
    except (OSError, untrusted.RecordError):
        recorded = None
    if recorded is None:
        return {"digest": None, "not_known": why}, None
    block = {k: v for k, v in recorded.items() if k != "kernels"}
    return {**block, "from_file": kernels.KERNELS_FILE}, None


def _earlier_digest(logdir: str) -> str | None:
    try:
        recorded = read_kernels(os.path.join(logdir, kernels.KERNELS_FILE))
    except (OSError, untrusted.RecordError):
        return None
    return recorded["digest"] if recorded else None


def _kept(path: str, block: dict) -> dict:
    """Whether --keep_kernels kept XLA's autotune results, and where, or why not."""
    from flags.autotune_results import AutotuneFileError, check

    try:
        check(path, kernels.KEPT_FILE)
    except AutotuneFileError:
        why = ("XLA compiled nothing here: the steps came from JAX's cache"
               if block.get("source") == "jax_cache" else
               "XLA wrote none (it autotunes GPU kernels only)")
        return {"kept": None, "not_kept": why}
    return {"kept": kernels.KEPT_FILE, "not_kept": None}


def _flag_value(flags: str, name: str) -> str | None:
    for part in flags.split():
        if part.lstrip("-").startswith(name + "="):
            return part.split("=", 1)[1]
    return None


def _card(folder: str, block: dict, state: dict) -> None:
    """The kernels' and the machine's TensorBoard text card (train/, Text tab)."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    from callbacks.records import events

    try:
        writer = events.EventWriter(folder, suffix=".state")
    except OSError as error:
        durable.warn(f"could not write the machine state's card: {error}")
        return
    try:
        off = off_lines(state)
        rows = [f"**{kernels.line(block)}**", ""]
        rows += [f"**{line}**" for line in off] + ([""] if off else [])
        rows += ["| what | value |", "|---|---|"]
        rows += [f"| {name} | {value} |" for name, value in _facts(state)]
        writer.summary(text_pb("machine_state", "\n".join(rows)), 0)
    finally:
        writer.close()


def _facts(state: dict) -> list[tuple[str, str]]:
    """The card's rows: device, driver, libraries, and each GPU's window."""
    rows = [("device", f"{state.get('device_kind')} x {state.get('devices_per_process')}"),
            ("host CPU", f"{state['host'].get('cpu')} ({state['host'].get('cores')} cores)"),
            ("driver", state.get("driver")), ("CUDA (driver)", state.get("cuda_driver"))]
    rows += [(name, value) for name, value in state["software"].items() if value is not None]
    for device in state.get("devices") or []:
        rows.append((f"GPU {device.get('index')}",
                     f"{device.get('name')}, max SM clock {device.get('max_sm_clock_mhz')} "
                     f"MHz, power limit {device.get('power_limit_watts')} W, ECC "
                     f"{device.get('ecc')}"))
    window = state.get("timed_window") or {}
    for index, device in enumerate(window.get("devices") or []):
        rows.append((f"GPU {index} in the timed window", _window_words(device)))
    if state.get("not_sampled"):
        rows.append(("not sampled", state["not_sampled"]))
    return [(name, str(value).replace("|", "/")) for name, value in rows if value is not None]


def _window_words(device: dict) -> str:
    parts = [f"{device.get('samples')} samples"]
    for name, unit in (("sm_clock_mhz", "MHz SM"), ("memory_clock_mhz", "MHz memory"),
                       ("power_watts", "W"), ("temperature_c", "C")):
        if device.get(name):
            parts.append(f"{device[name]['mean']:,.0f} {unit} (min {device[name]['min']:,.0f}, "
                         f"max {device[name]['max']:,.0f})")
    shares = device.get("throttle_share") or {}
    if shares:
        parts.append("throttle reasons: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
    if device.get("other_processes"):
        parts.append(f"other processes: {device['other_processes']}")
    return "; ".join(parts)


def off_lines(state: dict | None) -> list[str]:
    """One line per GPU whose timed window was off (see the module's docstring), e.g.
    "the GPU was power-throttled for 38% of the timed window; its SM clock averaged
    1,410 of 1,980 MHz"; none where all was well or nothing was sampled."""
    if not state:
        return []
    window = (state.get("timed_window") or {}).get("devices") or []
    facts = state.get("devices") or []
    lines = []
    for index, device in enumerate(window):
        name = "the GPU" if len(window) == 1 else f"GPU {index}"
        said = []
        shares = device.get("throttle_share") or {}
        worst: dict[str, float] = {}
        for reason, share in shares.items():
            if reason in SLOWING:
                worst[SLOWING[reason]] = max(worst.get(SLOWING[reason], 0.0), share)
        for words, share in sorted(worst.items(), key=lambda pair: -pair[1]):
            if share >= OFF_SHARE:
                said.append(f"{name} was {words} for {share:.0%} of the timed window")
        clock = (device.get("sm_clock_mhz") or {}).get("mean")
        top = facts[index].get("max_sm_clock_mhz") if index < len(facts) else None
        if clock and top and (said or clock < OFF_CLOCK * top):
            said.append(f"{'its' if said else name + chr(39) + 's'} SM clock averaged "
                        f"{clock:,.0f} of {top:,.0f} MHz")
        if device.get("other_processes"):
            pids = device["other_processes"]
            said.append(f"{len(pids)} other process{'es' * (len(pids) != 1)} used "
                        f"{'it' if said else name} during the timed window (pid "
                        f"{', '.join(map(str, pids[:5]))})")
        if said:
            lines.append("; ".join(said))
    return lines


def closing_lines(summary: dict) -> list[str]:
    """The kernels' line on a GPU (elsewhere there are none to choose) or where the run
    kept or loaded them, and the machine's where something was off."""
    block = summary.get("kernels")  # (None in an older run's summary)
    asked = block and (block.get("loaded_from") or "kept" in block)
    shown = block and (summary.get("accelerator") == "gpu" or asked)
    out = [kernels.line(block)] if shown else []
    out += [f"machine: {line}" for line in off_lines(summary.get("machine_state"))]
    return out
