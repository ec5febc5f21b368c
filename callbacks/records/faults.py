"""Fault injection for the resilience tests: SIGKILL this process at a named point.

`BENCH_KILL_AT=<point>[:<n>]` in the environment kills the process with SIGKILL
the n-th time (default: the first) it reaches `point`, so a test can kill a real
run at an exact moment: "checkpoint_committed" (just after a checkpoint's rename
is synced) or "metrics_line" (just before an epoch's line is written). Unset, as
always outside tests, `reached` returns at once.
"""

from __future__ import annotations

import os
import signal

_POINT, _, _NTH = os.environ.get("BENCH_KILL_AT", "").partition(":")
_seen = {}


def reached(point: str) -> None:
    """Kills this process here if the environment asks for it."""
    if point != _POINT:
        return
    _seen[point] = _seen.get(point, 0) + 1
    if _seen[point] == int(_NTH or 1):
        os.kill(os.getpid(), signal.SIGKILL)
