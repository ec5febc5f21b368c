"""The measured choice of kernels: XLA's autotuned training step against its heuristic one,
timed on the real step, the faster kept (`--xla_autotune=auto` on a GPU under JAX).

Why: XLA's autotuner times each candidate kernel once, in isolation, and is fooled.
Fresh autotunes of ConvNeXt-T on an H100 (batch 256, bf16) gave 3,290, 3,286, 4,440,
3,297 and 3,295 images/sec; the libraries' heuristic choice (--xla_autotune=heuristic)
gave 4,399. The slow choice cost about 20 ms a step in six calls of one depthwise
convolution whose cuDNN engine had looked fast alone. FlashInfer met the same trap and
fixed it by timing its default as a baseline, adopting a tuned choice only where it
beats it by a margin ("never slower than default"). So here:

1. `plan`: the training step is compiled twice from one lowering, in the thread that
   compiles it beside the start (app/engine/precompile.py): first with XLA's heuristic
   choice, then autotuned. Per compile, through `jax.stages.Lowered.compile(
   compiler_options=...)`, which takes XLA's debug options by name (JAX's "Controlling
   XLA from JAX" guide); JAX's compilation cache keys on them, so the two programs
   never serve each other. The heuristic compile goes first and does not read XLA's
   autotune cache folder: XLA keeps its autotuning in a process-wide cache that a later
   compile of the same instructions reads, and an autotuned compile first would hand
   its choices to the heuristic one (each program's kernel digest is recorded, and
   where both chose the same kernels the choice says so).
2. `settle`: both programs run the real step (a copy of the model's state, a batch of
   its shapes), interleaved: WINDOWS windows of STEPS_PER_WINDOW steps each, the order
   alternating, after a step each to warm up. The autotuned program is kept only where
   its median step beats the heuristic's by MARGIN (2%); else the heuristic one. The
   kept program is the one fit runs (handed over: the cut fit_takes_compiled_steps).
3. The choice is kept (app/engine/kernel_choice.py): XLA's autotune results file of
   the autotuned program where it won, and the measurement, under a key of the
   machine's kind, driver and libraries and the step's shape. A later run with the key
   loads it (the autotuned results with complete results required) and measures nothing.

`--xla_autotune=full` and `heuristic` keep their meanings: a user who sets one gets XLA's
own autotuning or the heuristic, one compile, nothing measured. The measured choice is
what `auto` picks where it picked full before (every throughput measurement, long
runs); where `auto` keeps the heuristic for a short run (compiling is most of it) the
run says what measuring would have cost (`complete`). A sweep's points and a ladder's
rungs compile inside fit and take XLA's own autotuning (app/modes/bench.py).
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import time

from app.engine import autotune, kernel_choice, kernels

WINDOWS = 3
STEPS_PER_WINDOW = 10
MARGIN = 0.02  # the autotuned program must beat the heuristic's step by this share
# XLA's heuristic choice, per compile; it reads no autotuned choices from JAX's folder.
HEURISTIC_OPTIONS = {autotune.OPTION: True, "xla_gpu_per_fusion_autotune_cache_dir": ""}
DUMP_RESULTS = "xla_gpu_dump_autotune_results_to"
DUMP_LOGS = "xla_gpu_dump_autotune_logs_to"
REQUIRE_COMPLETE = "xla_gpu_require_complete_aot_autotune_results"
LOG_FILE = os.path.join("kernels", "autotune_log.textproto")  # --keep_kernels' log
# What a short run's measured choice would add: the autotuned compile (ResNet-50's took
# 2.3x its heuristic compile on an H200: 15.8 s against 6.9 s, 2026-12-03-h200-autotune.json)
# and the timed steps of both programs.
AUTOTUNED_COMPILE_RATIO = 2.3
PREFIX = "kernel choice: "


@dataclasses.dataclass
class Plan:
    """How this run's training step is compiled: `variants` [(name, XLA options)] where
    the step is compiled more than once (names: heuristic, autotuned; or kept: a kept
    choice), else `train_options` for its one compile; `key`, `store`, `found` (the kept
    choice) and `results` (where the autotuned compile writes XLA's results)."""

    variants: list | None = None
    train_options: dict | None = None
    key: dict | None = None
    store: str | None = None
    found: dict | None = None
    results: str | None = None
    kept_file: str | None = None  # --keep_kernels' <run>/kernels/autotune.textproto


def plan(context, image_size: int | None, hand_to_fit: bool) -> Plan:
    """The compiles of this run's training step (see the module's docstring); says in one
    line where a choice was found, or why it is measured again or not at all."""
    config = context.config
    choice = context.xla_autotune
    log = ({DUMP_LOGS: os.path.join(os.path.abspath(context.logdir), LOG_FILE)}
           if config.keep_kernels and choice is not None else {})
    if log:
        os.makedirs(os.path.dirname(log[DUMP_LOGS]), exist_ok=True)
    if choice is None:  # a CPU or TPU (or TensorFlow): XLA picks no GPU kernels
        if config.backend == "jax":
            _note({"kept": None, "not_measured": f"a {config.accelerator.upper()} run: XLA "
                   "picks no GPU kernels, so there are no two programs to time"}, say=True)
        return Plan()
    if choice != "measured":
        return Plan(train_options=log or None)
    why = ("--kernels_from names the kernels" if config.kernels_from else
           None if hand_to_fit else "fit compiles its own step (the cut "
           "fit_takes_compiled_steps is off)")
    if why:
        _note({"kept": "autotuned", "not_measured": why}, say=True)
        return Plan(train_options=log or None)
    from app.engine import machine

    key = kernel_choice.make_key(config, context.topology.device_kind,
                                 context.batch.per_replica, image_size,
                                 machine.software_versions("jax"), driver_facts())
    store = kernel_choice.store_folder()
    found, line = kernel_choice.find(store, key)
    print(PREFIX + line, flush=True)
    kept_file = (os.path.join(os.path.abspath(context.logdir), kernels.KEPT_FILE)
                 if config.keep_kernels else None)
    if found is not None:
        options = HEURISTIC_OPTIONS if found["kept"] == "heuristic" else {
            autotune.LOAD_FLAG: found["results"], REQUIRE_COMPLETE: True}
        return Plan([("kept", {**options, **log})], key=key, store=store, found=found,
                    kept_file=kept_file)
    folder = (kernel_choice.entry_folder(store, key) if store
              else os.path.join(os.path.abspath(context.logdir), "kernels"))
    os.makedirs(folder, exist_ok=True)  # XLA writes the file but makes no folder
    results = os.path.join(folder, "autotuned.textproto")
    return Plan([("heuristic", HEURISTIC_OPTIONS),
                 ("autotuned", {DUMP_RESULTS: results, **log})],
                key=key, store=store, results=results, kept_file=kept_file)


def attach(compiling, chosen: Plan):
    """`compiling` (app/engine/precompile.py's, or None) with the plan `settle` follows;
    where the steps are not compiled ahead, the choice says it was not measured."""
    if compiling is not None:
        compiling.choice = chosen
    elif chosen.variants:
        _note({"kept": None, "not_measured": "its steps are not compiled ahead of fit, "
               "which compiles one program (XLA's autotuned)"}, say=True)
    return compiling


def driver_facts(proc_version: str = "/proc/driver/nvidia/version") -> dict:
    """{"driver", "cuda_driver"} of GPU 0 from NVML; where NVML cannot be read (no
    nvidia-ml-py), the driver from the kernel module's own line; None where neither says."""
    from callbacks.machine_state import nvml_sampler

    made = nvml_sampler([0])
    facts = made[1]() if made is not None else {}
    driver = facts.get("driver")
    if driver is None:
        try:
            with open(proc_version, encoding="utf-8", errors="replace") as f:
                found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", f.read())
            driver = found.group(1) if found else None
        except OSError:
            driver = None
    return {"driver": driver, "cuda_driver": facts.get("cuda_driver")}


def _note(block: dict, say: bool = False) -> None:
    kernels.note_choice(block)
    if say:
        print(PREFIX + kernels.choice_words(block), flush=True)


# ------------------------------------------------------------------ the two programs
def settle(compiling, model) -> dict | None:
    """Makes the training step's kept program `compiling`'s (fit runs it), once its
    compiles are joined: the kept choice where one was loaded, else the faster of the
    two by `time_programs` on the real step; keeps a measured choice. Returns the
    choice's block (summary.json's kernels.choice), None where nothing was compiled twice.
    """
    chosen = getattr(compiling, "choice", None)
    if chosen is None or not chosen.variants or not compiling.finished():
        return None  # (not finished: a stop was asked for while they compiled)
    from app.engine.startup import TIMELINE

    TIMELINE.mark("compile_wait")  # the wait ends here; measuring is a part of its own
    started = time.perf_counter()
    built, errors = compiling.variants, compiling.variant_errors
    if "kept" in built:
        block = {"kept": chosen.found["kept"], "how": "loaded",
                 "loaded_from": chosen.found["folder"],
                 "loaded_results": chosen.found["results"],
                 "measured": chosen.found.get("measured")}
        return _adopt(compiling, "kept", block, started)
    if "kept" in errors:  # e.g. results XLA found incomplete: measured afresh, here
        print(f"{PREFIX}the kept choice did not compile ({_first_line(errors['kept'])}): "
              "measuring again", flush=True)
        chosen.results = os.path.join(chosen.found["folder"], "autotuned.textproto")
        compiling.compile_variants([("heuristic", HEURISTIC_OPTIONS),
                                    ("autotuned", {DUMP_RESULTS: chosen.results})])
    if "autotuned" not in built or "heuristic" not in built:
        other = "autotuned" if "autotuned" not in built else "heuristic"
        if "autotuned" not in built and "heuristic" not in built:
            return None  # neither compiled: fit compiles, and raises, as it would have
        return _unmeasured(compiling, other, f"did not compile "
                           f"({_first_line(errors.get(other))})", {}, started)
    programs = {"autotuned": built["autotuned"], "heuristic": built["heuristic"]}
    block = {"how": "measured", **_kernels_apart(programs)}
    try:
        states, data = real_step_inputs(built["autotuned"], model, list(programs))
        block.update(decide(time_programs(programs, states, data)))
    except ProgramFailed as failed:  # (ViT-B/16's heuristic program on an H100, 2026-12-07:
        # IndexError from XLA's execute): the other program is the step, and is kept
        return _unmeasured(compiling, failed.name, f"did not run "
                           f"({_first_line(failed.__cause__)})", block, started)
    except Exception as error:  # noqa: BLE001 - e.g. out of memory: XLA's own choice stands
        block.update(kept="autotuned", how="unmeasured",
                     not_measured=f"timing them failed ({_first_line(error)})")
        return _adopt(compiling, "autotuned", block, started)
    block.update(_keep(chosen, block))
    return _adopt(compiling, block["kept"], block, started)


def _unmeasured(compiling, failed: str, why: str, block: dict, started: float) -> dict:
    """The program that is not `failed` becomes the step, unmeasured (`why`: what the
    failed one did); an autotuned one is kept in the store, as it will be next time."""
    name = "heuristic" if failed == "autotuned" else "autotuned"
    block = {**block, "kept": name, "how": "unmeasured",
             "not_measured": f"the {failed} program {why}"}
    if name == "autotuned" and compiling.choice.store:
        block.update(_keep(compiling.choice, block))
    return _adopt(compiling, name, block, started)


class ProgramFailed(Exception):
    """One of the programs raised when it first ran (`name`; the error is the cause)."""

    def __init__(self, name: str):
        super().__init__(f"the {name} program did not run")
        self.name = name


def _adopt(compiling, name: str, block: dict, started: float) -> dict:
    """`name`'s program becomes the training step; the block is noted and said."""
    compiling.adopt(name)
    kept_file = compiling.choice.kept_file
    if block.get("kept") == "heuristic" and kept_file and os.path.exists(kept_file):
        # What XLA wrote there is its autotuning: the kernels of the program that did not
        # run. Set aside, so that --kernels_from of this folder does not load them.
        aside = os.path.join(os.path.dirname(kept_file), "autotuned_not_run.textproto")
        os.replace(kept_file, aside)
        block["keep_kernels"] = (f"the heuristic program ran, and XLA keeps no results of "
                                 f"its compile; the autotuned program's are in {aside}")
    block["seconds"] = round(time.perf_counter() - started, 3)
    block["compile_seconds"] = dict(compiling.variant_seconds)
    _note(block, say=True)
    from app.engine.startup import TIMELINE

    TIMELINE.facts["kernel_choice"] = {"kept": block.get("kept"), "how": block.get("how"),
                                       "compile_seconds": block["compile_seconds"],
                                       "seconds": block["seconds"]}
    TIMELINE.mark("kernels_measured")
    return block


def _keep(chosen: Plan, block: dict) -> dict:
    """{"kept_in": folder} where the choice was kept, else {"not_kept": why}."""
    if not chosen.store:
        return {"kept_in": None, "not_kept": "no store (JAX's compilation cache is off and "
                f"${kernel_choice.STORE_ENV} is unset)"}
    results = chosen.results if chosen.results and os.path.exists(chosen.results) else None
    if block["kept"] == "autotuned" and results is None:
        return {"kept_in": None, "not_kept": "XLA wrote no results of the autotuned "
                "program (it came from JAX's compilation cache)"}
    measured = {k: v for k, v in block.items() if k not in ("kept_in", "not_kept")}
    try:
        folder = kernel_choice.save(chosen.store, chosen.key, measured, results)
    except OSError as error:
        return {"kept_in": None, "not_kept": f"the store cannot be written ({error.strerror})"}
    return {"kept_in": folder, "not_kept": None}


def _kernels_apart(programs: dict) -> dict:
    """Each program's kernel digest, and how many kernels they differ in."""
    lists = {}
    for name, compiled in programs.items():
        try:
            lists[name] = kernels.chosen_kernels(compiled.as_text())
        except Exception:  # noqa: BLE001 - a program without text: digests unknown
            return {}
    return {"digests": {name: kernels.digest(found)[:12] for name, found in lists.items()},
            "kernels_differ": kernels.differing(lists["autotuned"], lists["heuristic"])}


def _first_line(error) -> str:
    text = (str(error).strip().splitlines() or [repr(error)])[0] if error else "no program"
    return f"{type(error).__name__}: {text[:200]}" if isinstance(error, BaseException) \
        else text[:200]


# ----------------------------------------------------------------- timing and deciding
def real_step_inputs(compiled, model, names: list) -> tuple[dict, tuple]:
    """({name: a copy of the model's training state}, a batch of the step's shapes and
    layouts) for `compiled` (a jax.stages.Compiled of the training step). Each program
    gets a copy: the step donates its state, and the model's own must stay whole."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=True, metrics_variables=True)
    (_, data_avals), _ = compiled.in_avals
    (_, data_shardings), _ = compiled.input_shardings
    avals, tree = jax.tree.flatten(data_avals)
    shardings = jax.tree.leaves(data_shardings, is_leaf=lambda x: x is None)
    rng = np.random.default_rng(0)
    leaves = []
    for aval, sharding in zip(avals, shardings + [None] * (len(avals) - len(shardings))):
        host = (rng.standard_normal(aval.shape).astype(aval.dtype)
                if jnp.issubdtype(aval.dtype, jnp.floating) else np.zeros(aval.shape, aval.dtype))
        leaves.append(jax.device_put(host, sharding) if sharding is not None
                      else jax.device_put(host))
    data = jax.tree.unflatten(tree, leaves)
    return {name: jax.tree.map(lambda x: x.copy(), state) for name in names}, data


def time_programs(programs: dict, states: dict, data, windows: int = WINDOWS,
                  steps: int = STEPS_PER_WINDOW) -> dict:
    """{name: [ms a step in each window]} of `programs` ({name: callable(state, data) ->
    (logs, state)}), each from its own state in `states` (consumed): a step each to warm
    up, then `windows` windows of `steps` steps, the programs in turn, the order
    alternating from window to window; each window waits for its last step. Raises
    ProgramFailed (which one) where a program raises on its warm-up step, save for
    running out of memory (both programs and two states are held: neither is at fault)."""
    import jax

    names = list(programs)
    for name in names:  # a program that cannot run says so here, by name
        try:
            states[name] = jax.block_until_ready(programs[name](states[name], data)[1])
        except Exception as error:  # noqa: BLE001 - XLA's runtime errors have no one type
            if "RESOURCE_EXHAUSTED" in str(error):  # two programs' memory, not this one's
                raise
            raise ProgramFailed(name) from error
    times = {name: [] for name in names}
    for window in range(windows):
        for name in names if window % 2 == 0 else names[::-1]:
            state = states[name]
            started = time.perf_counter()
            for _ in range(steps):
                _, state = programs[name](state, data)
            jax.block_until_ready(state)
            times[name].append((time.perf_counter() - started) * 1000 / steps)
            states[name] = state
    return times


def decide(times: dict, margin: float = MARGIN) -> dict:
    """The choice from `time_programs`' windows: the autotuned program kept where its
    median step is at least `margin` faster than the heuristic's, else the heuristic."""
    autotuned = statistics.median(times["autotuned"])
    heuristic = statistics.median(times["heuristic"])
    gain = heuristic / autotuned - 1  # > 0: the autotuned step is faster
    return {"kept": "autotuned" if round(gain, 9) >= margin else "heuristic",
            "autotuned_step_ms": round(autotuned, 4), "heuristic_step_ms": round(heuristic, 4),
            "autotuned_gain": round(gain, 4), "margin": margin,
            "windows": len(times["autotuned"]),
            "window_step_ms": {name: [round(t, 4) for t in series]
                               for name, series in times.items()}}


# --------------------------------------------------------------- at the run's end
def complete(result: dict, context, plan_) -> None:
    """summary.json's kernels block, finished once the steps ran: what the measured
    choice would have cost a short run that kept the heuristic (`auto`), and, for a
    profiled run that kept XLA's autotune log, the ops the trace shows far slower than
    the autotuner measured their kernels (app/engine/kernel_truth.py)."""
    block = result.get("kernels")
    if not isinstance(block, dict):
        return
    try:
        _complete(block, result, context, plan_)
    except Exception as error:  # noqa: BLE001 - a hint about kernels never costs the summary
        block["choice_not_completed"] = f"{type(error).__name__}: {str(error)[:200]}"


def _complete(block: dict, result: dict, context, plan_) -> None:
    config = context.config
    if (context.xla_autotune == "heuristic" and config.xla_autotune == "auto"
            and result.get("step_time_ms")):
        compiling = getattr(plan_, "compiling", None)
        compile_seconds = getattr(compiling, "seconds", None)
        steps = 2 * (1 + WINDOWS * STEPS_PER_WINDOW)
        cost = steps * result["step_time_ms"] / 1000 + (
            AUTOTUNED_COMPILE_RATIO * compile_seconds if compile_seconds else 0)
        block["choice"] = {
            "kept": "heuristic", "how": "unmeasured", "would_cost_seconds": round(cost, 1),
            "not_measured": f"a short run, where compiling is most of the job: measuring "
                            f"would add about {cost:,.0f} s (the autotuned compile, "
                            f"~{AUTOTUNED_COMPILE_RATIO}x this run's, and {steps} timed "
                            "steps)"}
    from app.engine import kernel_truth

    kernel_truth.add_findings(block, context, result, getattr(plan_, "compiling", None))
