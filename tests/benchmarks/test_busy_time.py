"""benchmarks/busy_time.py: the GPU's busy time in each execution of the training step,
by hand on spans laid out as xprof's trace viewer gives them: two streams overlapping
(counted once), a gap (not busy), a kernel outside every execution (not counted)."""

import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import busy_time  # noqa: E402


def _span(thread, ts, dur, name="k"):
    return {"thread": thread, "ts": ts, "dur": dur, "name": name}


def test_each_executions_busy_time_is_its_streams_union():
    spans = [_span("XLA Modules", 0, 1000, "jit_train_step(42)"),
             _span("XLA Modules", 2000, 1000, "jit_train_step(42)"),
             _span("XLA Modules", 1500, 100, "jit_other(7)"),
             _span("Stream #7(Compute)", 0, 300), _span("Stream #7(Compute)", 500, 400),
             _span("Stream #9(Copy)", 200, 200),  # 200-400 overlaps 0-300 by 100
             _span("Stream #7(Compute)", 1200, 300),  # between executions
             _span("Stream #7(Compute)", 2900, 300),  # runs past the second's end
             _span("Host threads", 0, 3000)]
    assert busy_time.busy_per_execution(spans) == [{"ms": 1.0, "busy_ms": 0.8},
                                                   {"ms": 1.0, "busy_ms": 0.1}]
