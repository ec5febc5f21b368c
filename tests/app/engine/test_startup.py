"""app/engine/startup.py: the start-up timeline's parts, its programs, the process's
start from /proc, its card and closing line. The timeline of a real run, checked
against the process's own clock: tests/test_startup_clock.py."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from app.engine import startup
from app.engine.startup import Timeline
from conftest import ROOT


class Done:
    """A callbacks.first_step.FirstStep as it ends (its three public values)."""

    def __init__(self, began, first, steps=1):
        self.train_began_at, self.first_step_at, self.steps_in_first_call = began, first, steps


def test_the_process_start_is_when_the_parent_started_it():
    """A child's start from /proc lies between the parent's clock just before it
    spawned it and just after; and before the child's own first line."""
    before = time.time()
    done = subprocess.run(
        [sys.executable, "-c", "import time; first = time.time(); from app.engine import "
         "startup; print(startup.process_started_at(), first)"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    after = time.time()
    started, first_line = map(float, done.stdout.split())
    assert before - 0.011 <= started <= after  # /proc counts in 10 ms ticks, rounded down
    assert started <= first_line + 0.011


def test_parts_are_the_gaps_between_marks_named_once_in_order():
    timeline = Timeline()
    timeline.begin(100.0, from_process_start=False)
    for part, at in (("checks", 101.0), ("framework_import", 103.5), ("checks", 104.0),
                     ("data", 104.25)):
        timeline.mark(part, at=at)
    parts = timeline.parts(110.0, later=(("fit_setup", 105.0),))
    assert list(parts) == ["checks", "framework_import", "data", "fit_setup", "first_step"]
    assert parts == {"checks": 1.5, "framework_import": 2.5, "data": 0.25, "fit_setup": 0.75,
                     "first_step": 5.0}
    assert sum(parts.values()) == 10.0
    assert timeline.parts(104.1) == pytest.approx(  # marks after the end: not yet
        {"checks": 1.5, "framework_import": 2.5, "first_step": 0.1})


def test_from_the_process_start_the_interpreter_is_the_first_part():
    timeline = Timeline()
    started_at = startup.process_started_at() + 0.05  # Python's own start, as app/main.py's
    timeline.begin(started_at, from_process_start=True)
    assert timeline.origin_is == "process start (/proc/self/stat)"
    assert timeline.origin == pytest.approx(startup.process_started_at(), abs=0.01)
    assert timeline.marks == [("interpreter", started_at)]


def test_a_process_that_ran_something_before_python_is_called_that():
    """`bash -c 'pip install ... && exec python app/main.py'`: the process started with
    the shell, 98 s before Python; that part was booked as the interpreter's."""
    timeline = Timeline()
    started_at = startup.process_started_at() + 98.0
    timeline.begin(started_at, from_process_start=True)
    assert timeline.marks == [("before_python", started_at)]
    assert timeline.parts(started_at + 1)["before_python"] == pytest.approx(98.0, abs=0.01)


@pytest.mark.parametrize("name, program", [
    ("jit(train_step)", "train_step"), ("train_step", "train_step"),
    ("jit_test_step", "test_step"), ("pjit(apply)", "apply"), ("", "?")])
def test_a_programs_three_stages_agree_on_its_name(name, program):
    assert startup.program_name(name) == program


def test_programs_sum_their_stages_and_tell_cache_reads_from_compiles():
    timeline = Timeline()
    span = "/jax/core/compile/{}_duration".format
    timeline._on_span(span("jaxpr_trace"), 1.0, 1.5, fun_name="train_step")
    timeline._on_span(span("jaxpr_to_mlir_module"), 1.5, 1.75, fun_name="jit(train_step)")
    compiled = threading.Thread(target=timeline._on_span, name="compiling", args=(
        span("backend_compile"), 2.0, 5.0), kwargs={"fun_name": "jit(train_step)"})
    compiled.start()
    compiled.join()
    timeline._on_event(startup.JAX_CACHE_HIT)  # this thread's next compile is a read
    timeline._on_span(span("backend_compile"), 6.0, 6.25, fun_name="jit(train_step)")
    timeline._on_span(span("backend_compile"), 7.0, 7.5, fun_name="jit(equal)")
    timeline._on_span("/jax/something/else", 0.0, 9.0, fun_name="jit(equal)")
    train, equal = timeline.programs()
    assert train == {"program": "train_step", "traces": 1, "trace_seconds": 0.5,
                     "lowerings": 1, "lower_seconds": 0.25, "compiles": 1,
                     "compile_seconds": 3.0, "cache_reads": 1, "cache_read_seconds": 0.25,
                     "threads": [threading.current_thread().name, "compiling"]}
    assert (equal["compiles"], equal["compile_seconds"], equal["cache_reads"]) == (1, 0.5, 0)


def test_the_main_threads_program_seconds_count_nested_spans_once():
    timeline = Timeline()
    span = "/jax/core/compile/jaxpr_trace_duration"
    timeline._on_span(span, 1.0, 4.0, fun_name="train_step")  # holds the next one
    timeline._on_span(span, 2.0, 3.0, fun_name="inner")
    timeline._on_span(span, 5.0, 6.0, fun_name="test_step")
    elsewhere = threading.Thread(target=timeline._on_span, args=(span, 0.0, 10.0),
                                 kwargs={"fun_name": "apply"})
    elsewhere.start()
    elsewhere.join()
    assert timeline.main_thread_program_seconds(0.0, 10.0) == 4.0
    assert timeline.main_thread_program_seconds(3.5, 5.5) == 1.0  # clipped to the part


def test_the_block_names_each_part_once_and_adds_up():
    timeline = Timeline()
    timeline.begin(100.0, from_process_start=False)
    timeline.mark("framework_import", at=102.0)
    timeline.mark("steps_trace_and_lower", at=104.0)
    timeline._on_span("/jax/core/compile/jaxpr_trace_duration", 102.5, 103.5,
                      fun_name="train_step")
    block = startup.block(timeline, Done(105.0, 106.5, steps=4), ended_at=110.0, backend="jax",
                          cuts={"a_cut": True})
    assert block["parts"] == [
        {"part": "framework_import", "seconds": 2.0, "program_seconds": 0.0},
        {"part": "steps_trace_and_lower", "seconds": 2.0, "program_seconds": 1.0},
        {"part": "fit_setup", "seconds": 1.0, "program_seconds": 0.0},
        {"part": "first_step", "seconds": 1.5, "program_seconds": 0.0}]
    assert block["seconds_to_first_step"] == 6.5 == sum(p["seconds"] for p in block["parts"])
    assert block["run_seconds"] == 10.0 and block["share_of_run"] == 0.65
    assert block["steps_in_first_call"] == 4 and block["cuts"] == {"a_cut": True}
    assert block["programs"][0]["program"] == "train_step" and block["note"] is None
    assert json.loads(json.dumps(block)) == block  # JSON as it is
    tensorflow = startup.block(timeline, Done(105.0, 106.5), 110.0, backend="tensorflow")
    assert tensorflow["programs"] == [] and "first_step holds" in tensorflow["note"]
    assert all("program_seconds" not in p for p in tensorflow["parts"])
    assert startup.block(timeline, Done(105.0, None), 110.0, backend="jax") is None
    assert startup.block(timeline, None, 110.0, backend="jax") is None


def test_the_card_and_the_closing_line_say_the_same_parts(tmp_path):
    from app.run.summary import startup_lines
    from callbacks.records import events

    timeline = Timeline()
    timeline.begin(100.0, from_process_start=False)
    timeline.mark("framework_import", at=103.0)
    timeline.mark("compile_wait", at=107.0)
    timeline._on_span("/jax/core/compile/backend_compile_duration", 103.0, 106.0,
                      fun_name="jit(train_step)")
    block = startup.block(timeline, Done(107.5, 108.0), ended_at=112.0, backend="jax")
    text = startup.card_markdown(block)
    assert "**Start-up: 8.00 s to the first step** (67% of the run's 12.0 s)" in text
    assert "| compile_wait | 4.000 | 50.0% | 3.000 |" in text  # its compile: this thread
    assert "| train_step | 0 | 0.000 | 0 | 0.000 | 1 | 3.000 |" in text
    (line,) = startup_lines({"startup": block})
    assert line.startswith("start-up: 8.0 s before the first step, 67% of the run's 12.0 s: "
                           "compile_wait 4.0 s, framework_import 3.0 s, fit_setup 0.5 s; "
                           "XLA compiled 1 program in 3.0 s")
    assert startup_lines({"startup": {**block, "share_of_run": 0.5}}) == []
    assert startup_lines({"startup": None}) == [] and startup_lines({}) == []
    startup.write_card(str(tmp_path / "train"), block)
    (path,) = events.event_files(str(tmp_path / "train"))
    (value,) = [v for e in events.read_events(path) for v in e.summary.value]
    assert value.tag == "startup/text_summary" or value.tag == "startup"
    assert value.metadata.plugin_data.plugin_name == "text"
    assert value.tensor.string_val[0].decode() == text


def test_the_cuts_switch_reads_in_order_and_refuses_a_stranger(monkeypatch):
    from app.engine import cold_start

    monkeypatch.setattr(cold_start, "CUTS", {"one": (True, "a"), "two": (True, "b"),
                                             "three": (False, "c")})
    assert cold_start.cuts("") == {"one": True, "two": True, "three": False}  # defaults
    assert cold_start.cuts("-two") == {"one": True, "two": False, "three": False}
    assert cold_start.cuts("none,two") == {"one": False, "two": True, "three": False}
    assert cold_start.cuts("all, -one ,three") == {"one": False, "two": True, "three": True}
    with pytest.raises(ValueError) as raised:
        cold_start.cuts("-two,fourth")
    assert str(raised.value) == (
        "BENCH_STARTUP_CUTS='-two,fourth': 'fourth' is not a start-up cut; accepted: all, "
        "none, and NAME or -NAME (on, off) for each of one, two, three, comma-separated")
    monkeypatch.setenv("BENCH_STARTUP_CUTS", "-one")
    assert cold_start.cuts() == {"one": False, "two": True, "three": False}
    assert cold_start.cut_on("two") and not cold_start.cut_on("one")
