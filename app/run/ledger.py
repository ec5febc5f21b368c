"""The billing ledger: wall-clock time of every attempt of a run, kill-proof.

A cloud bills every second a machine is held, including work lost to a kill. So
billed time is not kept in checkpoints alone: <logdir>/billing.json lists each
attempt (when it started, the step it resumed from, when it was last seen alive),
and a daemon thread refreshes "last seen" every few seconds. A run killed with
SIGKILL loses at most that interval from its bill; the next attempt charges the
earlier ones from this file. The ledger opens as soon as the run folder is the
run's, before the model is built or restored: an attempt killed while it builds is
billed. (An attempt killed before its flags, devices and data were checked cannot
bill itself: a run refused by those checks must leave nothing behind.)

The ledger is read back as untrusted (callbacks/records/untrusted.py): an attempt
whose times are not finite or not plausible (before 2020, in the future, ending
before they start, over a year long: `check_attempt`) is dropped. A damaged
billing.json, or one holding such an attempt, never changes the bill silently: it
is kept aside with one warning line, every valid attempt that can still be read
from it is recovered, and where the newest checkpoint has billed more than those
attempts add up to, the difference is charged as one recovered attempt. So the
bill is never infinite nor negative.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time

from app.run.rundir import write_json_atomic
from callbacks.figures.bill import attempts_seconds, unbilled_seconds
from callbacks.records import durable, untrusted

LEDGER_FILE = "billing.json"
HEARTBEAT_SECONDS = 2.0


class Ledger:
    """Records this attempt in <logdir>/billing.json and keeps it current.

    Opened as soon as the run folder is the run's, before the model is built (an
    attempt killed while it builds or restores is billed all the same); where the
    attempt resumes from is known only once its checkpoint is restored, and is
    recorded then (`set_resumed_from`).

    Args:
        logdir: the run folder (must exist).
        started_at: `time.time()` when this attempt's process started.
        resumed_from: {"epoch": .., "step": ..} where this attempt starts, if known.
        checkpoint_billed_seconds: billed seconds recorded by the checkpoint this
            attempt resumes from (a floor for a damaged or missing ledger), if known.
    """

    def __init__(self, logdir: str, started_at: float, resumed_from: dict | None = None,
                 checkpoint_billed_seconds: float = 0.0):
        self.path = os.path.join(logdir, LEDGER_FILE)
        earlier, self._intact = read_ledger(logdir)
        self.attempts = _with_shortfall(earlier, self._intact, checkpoint_billed_seconds)
        self.attempts.append({"started_at": started_at, "last_seen": time.time(),
                              "pid": os.getpid()})
        if resumed_from is not None:
            self._record_resumed_from(resumed_from)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._write()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="ledger")
        self._thread.start()

    def set_resumed_from(self, point: dict, checkpoint_billed_seconds: float = 0.0) -> None:
        """Records where this attempt starts (`point`, e.g. {"epoch", "step", "seed"})
        once its checkpoint is restored, and charges what that checkpoint has billed
        beyond the earlier attempts where the ledger was damaged or missing (as
        `attempts_before` does). Call it once, before `billed_seconds_before` is read.
        """
        with self._lock:
            self._record_resumed_from(point)
            self.attempts[:-1] = _with_shortfall(self.attempts[:-1], self._intact,
                                                 checkpoint_billed_seconds)
        self._write()

    def _record_resumed_from(self, point: dict) -> None:
        current = self.attempts[-1]  # the file's order: started_at, last_seen, resumed_from, pid
        self.attempts[-1] = {"started_at": current["started_at"],
                             "last_seen": current["last_seen"], "resumed_from": dict(point),
                             **{k: v for k, v in current.items()
                                if k not in ("started_at", "last_seen", "resumed_from")}}

    @property
    def billed_seconds_before(self) -> float:
        """Seconds billed by the earlier attempts."""
        return attempts_seconds(self.attempts[:-1])

    def _write(self, at: float | None = None):
        with self._lock:
            self.attempts[-1]["last_seen"] = time.time() if at is None else at
            write_json_atomic(self.path, {"attempts": self.attempts})

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._write()
            except OSError:
                pass  # a full disk must not kill training; the next beat retries

    def close(self, status: str, at: float | None = None) -> list[dict]:
        """Stops the heartbeat, records how this attempt ended and when (`at`, a
        `time.time()`: where its bill ends, the summary's; default now); returns all
        attempts.

        Never raises: it runs while another error may be on its way out, which it
        must not hide. A failure to record is a warning.
        """
        self._stop.set()
        self._thread.join(timeout=5)
        self.attempts[-1]["status"] = status
        try:
            self._write(at)
        except OSError as error:
            if os.path.isdir(os.path.dirname(self.path)):  # a lost folder is said elsewhere
                durable.warn(f"could not record the end of this attempt in {self.path}: "
                             f"{error.strerror or error}")
        return self.attempts


def attempts_before(logdir: str, checkpoint_billed_seconds: float = 0.0) -> list[dict]:
    """The earlier attempts to bill: the ledger's valid ones (`read_ledger`), plus, where
    the ledger was damaged or missing and the newest checkpoint billed more than they
    add up to, the difference as one attempt "recovered from the checkpoint".

    Args:
        logdir: the run folder.
        checkpoint_billed_seconds: what the checkpoint resumed from has billed (a
            figure that is not finite or is negative counts as 0).
    """
    attempts, intact = read_ledger(logdir)
    return _with_shortfall(attempts, intact, checkpoint_billed_seconds)


def _with_shortfall(attempts: list[dict], intact: bool, checkpoint_billed_seconds) -> list[dict]:
    """`attempts`, plus the checkpoint's billed seconds beyond them as one attempt where
    the ledger was not intact (see `attempts_before`)."""
    floor = checkpoint_billed_seconds
    if not (isinstance(floor, (int, float)) and math.isfinite(floor)) or floor < 0:
        floor = 0.0
    shortfall = unbilled_seconds(attempts, floor)
    if not intact and shortfall > 0:
        attempts = [*attempts, {"started_at": 0.0, "last_seen": shortfall,
                                "status": _RECOVERED}]
    return attempts


# What an attempt's times may be. A ledger is read back as untrusted (edited by hand,
# written by a machine whose clock was wrong, damaged): an attempt outside these
# bounds is dropped with a warning, and the newest checkpoint's billed time, which
# `attempts_before` charges as a shortfall, keeps the bill from going down for it.
EARLIEST = 1577836800.0  # 2020-01-01 UTC: before this app existed
CLOCK_SLACK_SECONDS = 3600.0  # another host's clock ahead of this one's (NTP keeps skew far below)
# One attempt is one process. A year is far beyond any training job this app is for
# (ResNet-50 on ImageNet takes hours to days) and beyond how long a cloud VM runs
# between host maintenance events; a longer one is a clock that jumped or an edit.
# Dropping a real one loses nothing the newest checkpoint has billed.
MAX_ATTEMPT_SECONDS = 366 * 86400.0
MAX_LEDGER_BYTES = 16 << 20  # the app writes ~200 bytes per attempt
_RECOVER_MAX_CHARS = 4 << 20  # recovery scans at most this much of a damaged file


def check_attempt(value, now: float | None = None) -> dict:
    """One attempt of a ledger, checked; the fields the app reads, typed.

    Raises:
        RecordError: naming what is wrong (one line).
    """
    now = time.time() if now is None else now
    latest = now + CLOCK_SLACK_SECONDS
    started = untrusted.field(value, "started_at", "number")
    seen = untrusted.field(value, "last_seen", "number")
    for name, when in (("started_at", started), ("last_seen", seen)):
        if not EARLIEST <= when <= latest:
            raise untrusted.RecordError(
                f"{name!r} holds {when:.10g} ({_date(when)}); accepted: a time from "
                f"{_date(EARLIEST)} to an hour from now ({_date(latest)})")
    if seen < started:
        raise untrusted.RecordError(f"'last_seen' ({_date(seen)}) is before 'started_at' "
                                    f"({_date(started)})")
    if seen - started > MAX_ATTEMPT_SECONDS:
        raise untrusted.RecordError(f"an attempt of {(seen - started) / 86400:,.0f} days "
                                    f"(at most {MAX_ATTEMPT_SECONDS / 86400:.0f} accepted)")
    attempt = {"started_at": float(started), "last_seen": float(seen)}
    # The rest is carried into summary.json as it was, where it has the app's types.
    resumed = value.get("resumed_from")
    if isinstance(resumed, dict) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in resumed.values()):
        attempt["resumed_from"] = resumed
    pid, status = value.get("pid"), value.get("status")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
        attempt["pid"] = pid
    if isinstance(status, str) and len(status) <= 200:
        attempt["status"] = status
    return attempt


def _date(when: float) -> str:
    """A time as a UTC date and time, or "out of the calendar" where it has none."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))
    except (OverflowError, OSError, ValueError):
        return "out of the calendar"


def _recovered_attempt(value) -> dict | None:
    """The shortfall attempt written by an earlier `Ledger` ("recovered from the
    checkpoint": no start time, `last_seen` = the seconds), checked, or None."""
    if not (isinstance(value, dict) and value.get("status") == _RECOVERED
            and value.get("started_at") == 0 and "pid" not in value):
        return None
    seconds = untrusted.field(value, "last_seen", "number", low=0,
                              high=time.time() + CLOCK_SLACK_SECONDS - EARLIEST)
    return {"started_at": 0.0, "last_seen": float(seconds), "status": _RECOVERED}


_RECOVERED = "recovered from the checkpoint"


def _checked(values: list) -> tuple[list[dict], list[str]]:
    """(the attempts that pass `check_attempt`, why each other one failed)."""
    kept, problems = [], []
    for value in values:
        try:
            kept.append(_recovered_attempt(value) or check_attempt(value))
        except untrusted.RecordError as error:
            problems.append(str(error))
    return kept, problems


# An object nested at most two deep (an attempt and its resumed_from) with no braces
# in its strings: what the app writes per attempt. Matched, not decoded from every
# "{", so that a file of 100,000 brackets is scanned in linear time.
_ATTEMPT_TEXT = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


def _recover(text: str) -> list:
    """Every attempt-shaped object that still parses in a damaged ledger's text."""
    found, index = [], 0
    while (match := _ATTEMPT_TEXT.search(text, index)) is not None:
        if '"started_at"' not in match.group():
            index = match.end()  # nothing attempt-like in it, nor inside it
            continue
        try:
            value = untrusted.loads(match.group())
        except untrusted.RecordError:
            value = None
        if isinstance(value, dict) and "started_at" in value:
            found.append(value)
            index = match.end()
        else:  # e.g. the outer {"attempts": [...]} of a one-level file: look inside it
            index = match.start() + 1
    return found


def read_ledger(logdir: str) -> tuple[list[dict], bool]:
    """(the valid attempts recorded in `logdir`, whether the file was intact or absent).

    A file that is damaged or holds an attempt that fails `check_attempt` (a time not
    finite, before 2020, in the future, ending before it starts, longer than
    MAX_ATTEMPT_SECONDS) is set aside (kept, renamed), every valid attempt still
    readable in it is returned, and one warning line says so. The bill is then
    never infinite nor negative: every attempt returned lasts 0 to a year.
    """
    path = os.path.join(logdir, LEDGER_FILE)
    if not os.path.lexists(path):
        return [], not _has_checkpoints(logdir)
    text, problem = "", None
    try:
        data = untrusted.read_bytes(path, MAX_LEDGER_BYTES)
        text = data.decode("utf-8", "replace")
        record = untrusted.loads(data)
        values = untrusted.field(record, "attempts", "list")
    except untrusted.RecordError as error:
        problem, values = str(error), _recover(text[:_RECOVER_MAX_CHARS])
    except OSError as error:  # unreadable (permissions): its name is kept all the same
        problem, values = f"cannot be read ({error.strerror or error})", []
    attempts, dropped = _checked(values)
    if problem is None and not dropped:
        return attempts, True
    aside = durable.set_aside(path)
    why = problem or f"{len(dropped)} attempt(s) invalid, the first: {dropped[0]}"
    if problem and dropped:
        why += f"; {len(dropped)} invalid attempt(s) dropped, the first: {dropped[0]}"
    durable.warn(f"{path} is damaged ({why}); kept as {aside}; {len(attempts)} attempt(s) "
                 "recovered from it")
    return attempts, False


def _has_checkpoints(logdir: str) -> bool:
    return os.path.isdir(os.path.join(logdir, "checkpoints"))
