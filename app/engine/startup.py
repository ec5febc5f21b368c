"""The start-up timeline: where a run's seconds went before its first step.

The run marks, on its main thread, the moment each part of its start ends
(app/main.py, app/run/context.py, app/engine/distribute.py, app/modes/train.py; the
last two by callbacks/first_step.py, inside `fit`). A part's seconds are the gap
since the mark before it, from the process's start (Linux's /proc/self/stat; else
app/main.py's first line, or the run's start where `run` was called in-process) to
the end of the first training call: the parts add up to the time to the first step
by construction, and tests/test_startup_clock.py checks both ends against clocks of its own.

On JAX every program's trace, lowering and compile is recorded too, from JAX's own
monitoring events (`watch_jax`), with its thread and whether JAX's compilation cache
served it: a compile in a thread shows beside the part it overlapped, and the seconds
the main thread itself spent tracing, lowering and compiling in each part are given
(each part's `program_seconds`). TensorFlow says nothing of its programs: its first step
holds its trace and compile.

`block` is summary.json's `startup`, `write_card` its TensorBoard Text card
(app/run/summary.py's `startup_lines` its closing line). Nothing here imports a
framework.
"""

from __future__ import annotations

import os
import re
import threading
import time

# What each part holds, by the mark that ends it (the card's and BUILD.md's words).
PARTS = {
    "interpreter": "Python's own start (its site imports) up to app/main.py's first line",
    "before_python": "the process's start to app/main.py's first line, longer than Python's "
                     "own start can take: the process ran something else before Python (a "
                     "shell that exec'd it, e.g. `bash -c 'pip install ... && exec python "
                     "app/main.py'`); not the app's start-up, and not billed",
    "app_imports_and_flags": "app/main.py's imports (absl, the flags), the flags parsed "
                             "into the config",
    "checks": "the run folder taken; the model, dataset and XLA settings checked "
              "(files only, before any framework starts)",
    "framework_import": "import jax or tensorflow",
    "devices": "the backend started and its devices found (JAX: the compilation cache "
               "set; a GPU's driver and context)",
    "keras_import": "import keras (on a GPU, its memory reserved beside it)",
    "devices_and_keras_import": "JAX's backend started and its devices found (a GPU's "
                                "driver, context, memory reserved) in a thread while "
                                "keras imports (cut devices_beside_keras)",
    "model_check_and_price": "the model built once from shapes to check it fits; the "
                             "price resolved",
    "mode_imports": "the mode's modules imported (callbacks, records, the input wings)",
    "data": "seed and precision set; the datasets read (or taken from the thread that "
            "read them ahead), decoded and placed (the device pipeline's programs start "
            "compiling in a thread)",
    "run_folder": "config.json and the billing ledger written; the banner",
    "model_build": "the model built and compiled (Keras's compile: no XLA program yet)",
    "steps_trace_and_lower": "JAX: the training and evaluation steps traced and "
                             "lowered; XLA compiles them in a thread from here",
    "flop_count": "the training FLOPs counted (XLA's HLO of the step; kept between runs)",
    "resume_and_callbacks": "a checkpoint restored (a resumed run); the callbacks made",
    "compile_wait": "waiting for the steps compiling in the thread",
    "kernels_measured": "the measured choice of kernels (app/engine/measured.py): XLA's "
                        "autotuned and heuristic training steps timed against each other "
                        "on the real step, the faster made fit's (or a kept choice taken)",
    "fit_setup": "fit's own start: its epoch iterator, the step functions made, the "
                 "callbacks' begin hooks",
    "first_step": "the first training call: its batch, its step's trace, lowering and "
                  "compile where fit does them, the step itself (steps_in_first_call "
                  "steps)",
}
# The events of JAX's monitoring (jax._src.dispatch) that time a program's stages.
JAX_STAGES = {"/jax/core/compile/jaxpr_trace_duration": "trace",
              "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
              "/jax/core/compile/backend_compile_duration": "compile"}
JAX_CACHE_HIT = "/jax/compilation_cache/cache_hits"
# Python's own start to app/main.py's first line takes ~0.05 s (0.5 s on a loaded
# machine); longer, the process was exec'd into Python after doing something else.
BEFORE_PYTHON_SECONDS = 2.0
MAX_SPANS = 5000  # a long run's recompiles (a sweep's points) are not kept without end
_PROGRAM_NAME = re.compile(r"^p?jit[(_](.*?)\)?$")


def process_started_at() -> float | None:
    """`time.time()` when this process started, from Linux's /proc/self/stat (its
    start in clock ticks since boot: 10 ms steps) and the boot clock; None where there
    is no /proc."""
    try:
        with open("/proc/self/stat", "rb") as f:
            text = f.read()
        # Field 22, starttime; the command's name (field 2) may hold spaces, so
        # count from the ")" that closes it (field 3 is the first after it).
        ticks = int(text[text.rindex(b")") + 2:].split()[19])
        hertz = os.sysconf("SC_CLK_TCK")
        now, since_boot = time.time(), time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return now - (since_boot - ticks / hertz)


def program_name(name: str) -> str:
    """A program's name as JAX's three stages agree on it: "jit(train_step)" (a
    lowering's or a compile's) and "train_step" (a trace's) are one program."""
    match = _PROGRAM_NAME.match(name or "")
    return match.group(1) if match else (name or "?")


class Timeline:
    """One run's start: its marks, and on JAX its programs' stages.

    Attributes:
        origin: `time.time()` the timeline starts from (see `begin`).
        origin_is: what that time is ("process start", "app/main.py's first line",
            "the run's start").
        marks: [(part, time.time() when it ended)], in order.
        spans: JAX's stages, [(program, stage, start, end, thread, served by the cache)].
        facts: what the start chose that the block reports as it is (JSON values),
            e.g. the XLA options of the steps compiled beside it.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._hit_threads = set()
        self.begin(time.time(), from_process_start=False)

    def begin(self, started_at: float, from_process_start: bool) -> None:
        """A new timeline from `started_at`. `from_process_start` (app/main.py's run):
        it starts at the process's start instead, where Linux tells it, and its first
        part, "interpreter", ends at `started_at` ("before_python" where that is longer than
        Python's own start can take: the process ran something else first)."""
        with self._lock:
            self.marks, self.spans, self.facts = [], [], {}
            self.origin, self.origin_is = started_at, "the run's start"
            if from_process_start:
                self.origin_is = "app/main.py's first line"
                process = process_started_at()
                if process is not None and process <= started_at:
                    self.origin, self.origin_is = process, "process start (/proc/self/stat)"
                    self.marks.append(("interpreter" if started_at - process
                                       <= BEFORE_PYTHON_SECONDS else "before_python",
                                       started_at))

    def mark(self, part: str, at: float | None = None) -> None:
        """The part `part` (one of PARTS) ends now (or at `at`)."""
        with self._lock:
            self.marks.append((part, time.time() if at is None else at))

    def parts(self, until: float, later: tuple = ()) -> dict:
        """{part: seconds}, in order, from the origin to `until` (the end of
        "first_step"), with the marks `later` ((part, time) pairs) after this
        timeline's own; a part marked twice is named once, its seconds added."""
        parts, before = {}, self.origin
        marks = [(part, at) for part, at in [*self.marks, *later] if at <= until]
        for part, at in [*marks, ("first_step", until)]:
            parts[part] = parts.get(part, 0.0) + (at - before)
            before = at
        return parts

    # ---------------------------------------------------------------- JAX's programs
    def _on_span(self, event: str, start: float, end: float, **kwargs) -> None:
        stage = JAX_STAGES.get(event)
        if stage is None:
            return
        thread = threading.current_thread()
        with self._lock:
            cached = stage == "compile" and thread.ident in self._hit_threads
            if stage == "compile":
                self._hit_threads.discard(thread.ident)
            if len(self.spans) < MAX_SPANS:
                self.spans.append((program_name(kwargs.get("fun_name", "")), stage, start,
                                   end, thread.name, cached))

    def _on_event(self, event: str, **kwargs) -> None:
        if event == JAX_CACHE_HIT:  # the compile this thread is in was a cache read
            with self._lock:
                self._hit_threads.add(threading.get_ident())

    def programs(self) -> list[dict]:
        """Each program's stages, summed over its traces, lowerings and compiles (a
        compile the cache served is a cache read), largest first."""
        with self._lock:
            spans = list(self.spans)
        table = {}
        for name, stage, start, end, thread, cached in spans:
            row = table.setdefault(name, {
                "program": name, "traces": 0, "trace_seconds": 0.0, "lowerings": 0,
                "lower_seconds": 0.0, "compiles": 0, "compile_seconds": 0.0,
                "cache_reads": 0, "cache_read_seconds": 0.0, "threads": []})
            kind = "cache_read" if cached else stage
            row[{"trace": "traces", "lower": "lowerings", "compile": "compiles",
                 "cache_read": "cache_reads"}[kind]] += 1
            row[f"{kind}_seconds"] += end - start
            if thread not in row["threads"]:
                row["threads"].append(thread)
        rows = [{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
                for row in table.values()]
        return sorted(rows, key=lambda r: -(r["trace_seconds"] + r["lower_seconds"]
                                             + r["compile_seconds"] + r["cache_read_seconds"]))

    def main_thread_program_seconds(self, start: float, end: float) -> float:
        """Seconds of [start, end] in which the main thread was tracing, lowering or
        compiling a program (the union of its spans: a trace holds nested ones)."""
        main = threading.main_thread().name
        with self._lock:
            spans = sorted((max(s, start), min(e, end)) for _, _, s, e, thread, _ in self.spans
                           if thread == main and e > start and s < end)
        total, reach = 0.0, start
        for s, e in spans:
            if e > reach:
                total += e - max(s, reach)
                reach = e
        return total


TIMELINE = Timeline()
_watching = []  # the JAX module whose events reach TIMELINE (once per process)


def watch_jax(jax) -> None:
    """Sends JAX's compile events to TIMELINE from now on (once per process; call it
    as soon as JAX is imported, before it compiles anything)."""
    if _watching:
        return
    monitoring = jax.monitoring
    if hasattr(monitoring, "register_event_time_span_listener"):
        monitoring.register_event_time_span_listener(TIMELINE._on_span)
    else:  # an older JAX gives durations only: the span ends now
        monitoring.register_event_duration_secs_listener(
            lambda event, seconds, **kw: TIMELINE._on_span(
                event, time.time() - seconds, time.time(), **kw))
    monitoring.register_event_listener(TIMELINE._on_event)
    _watching.append(jax)


def block(timeline: Timeline, first_step, ended_at: float, backend: str,
          cuts: dict | None = None) -> dict | None:
    """summary.json's `startup`: each part's seconds to the first step, JAX's programs,
    the share of the run before the first step; None where no step ran.

    Args:
        timeline: the run's TIMELINE.
        first_step: the run's callbacks.first_step.FirstStep.
        ended_at: `time.time()` where the run's bill ends (its summary).
        backend: "jax" or "tensorflow".
        cuts: {cold-start measure: on} (app/engine/cold_start.py).
    """
    if first_step is None or first_step.first_step_at is None:
        return None
    began = first_step.train_began_at
    until = first_step.first_step_at
    parts = timeline.parts(until, later=(("fit_setup", began),) if began else ())
    rows, before = [], timeline.origin
    for part, seconds in parts.items():  # a list: summary.json's keys are sorted
        row = {"part": part, "seconds": round(seconds, 4)}
        if backend == "jax":  # of it, the main thread's tracing, lowering, compiling
            row["program_seconds"] = round(timeline.main_thread_program_seconds(
                before, before + seconds), 4)
        rows.append(row)
        before += seconds
    programs = timeline.programs() if backend == "jax" else []
    total, run = until - timeline.origin, ended_at - timeline.origin
    return {
        "seconds_to_first_step": round(total, 4),
        "from": timeline.origin_is,
        "process_started_at": round(timeline.origin, 3),
        "parts": rows,
        "programs": programs,
        "programs_compiled": sum(1 for p in programs if p["compiles"]),
        "compile_seconds": round(sum(p["compile_seconds"] for p in programs), 4),
        "steps_in_first_call": first_step.steps_in_first_call,
        "run_seconds": round(run, 4),
        "share_of_run": round(total / run, 4) if run > 0 else None,
        "cuts": dict(cuts or {}),
        **dict(timeline.facts),
        "note": None if backend == "jax" else (
            "TensorFlow does not say how long it traces and compiles: first_step holds "
            "its step's trace, XLA compile and run"),
    }


def card_markdown(block: dict) -> str:
    """The TensorBoard Text card of a `block`: its parts, then JAX's programs."""
    total = block["seconds_to_first_step"]
    share = block.get("share_of_run")
    head = (f"**Start-up: {total:.2f} s to the first step**"
            + (f" ({share:.0%} of the run's {block['run_seconds']:.1f} s)" if share else "")
            + f", from {block['from']}; the first call ran {block['steps_in_first_call']} "
              "step(s).")
    rows = ["| part | seconds | share | of it, the main thread tracing, lowering, compiling "
            "(s) | what |", "|---|---:|---:|---:|---|"]
    for row in block["parts"]:
        seconds, programs = row["seconds"], row.get("program_seconds")
        rows.append(f"| {row['part']} | {seconds:.3f} | "
                    f"{seconds / total if total > 0 else 0:.1%} | "
                    f"{'' if programs is None else f'{programs:.3f}'} | "
                    f"{PARTS.get(row['part'], '')} |")
    text = head + "\n\n" + "\n".join(rows)
    if block["programs"]:
        text += (f"\n\n**XLA programs**: {block['programs_compiled']} compiled, "
                 f"{block['compile_seconds']:.2f} s of compiling in all (threads included)\n\n"
                 "| program | traces | trace s | lowerings | lower s | compiles | compile s | "
                 "cache reads | read s | threads |\n|---|---:|---:|---:|---:|---:|---:|---:|"
                 "---:|---|\n" + "\n".join(
                     f"| {p['program']} | {p['traces']} | {p['trace_seconds']:.3f} | "
                     f"{p['lowerings']} | {p['lower_seconds']:.3f} | {p['compiles']} | "
                     f"{p['compile_seconds']:.3f} | {p['cache_reads']} | "
                     f"{p['cache_read_seconds']:.3f} | {', '.join(p['threads'])} |"
                     for p in block["programs"]))
    if block.get("note"):
        text += f"\n\n{block['note']}."
    return text


def write_card(folder: str, block: dict, step: int = 0) -> None:
    """Writes `block`'s card to the TensorBoard run `folder` (the run's train/), under
    the Text tab's "startup" tag, at `step` (the global step the attempt started from:
    a resumed run's attempts each have theirs)."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    from callbacks.records import events

    writer = events.EventWriter(folder, suffix=".startup")
    try:
        writer.summary(text_pb("startup", card_markdown(block)), step=step)
    finally:
        writer.close()
