"""The billing ledger: wall-clock time of every attempt of a run, kill-proof.

A cloud bills every second a machine is held, including work lost to a kill. So
billed time is not kept in checkpoints alone: <logdir>/billing.json lists each
attempt (when it started, the step it resumed from, when it was last seen alive),
and a daemon thread refreshes "last seen" every few seconds. A run killed with
SIGKILL loses at most that interval from its bill; the next attempt charges the
earlier ones from this file. (An attempt killed before its flags, devices and data
were checked cannot bill itself: nothing may be written before those checks.)

A damaged billing.json never lowers the bill silently: it is kept aside, every
attempt that can still be read from it is recovered, and where the newest
checkpoint has billed more than those attempts add up to, the difference is
charged as one recovered attempt.
"""

from __future__ import annotations

import json
import os
import threading
import time

from app.run.rundir import write_json_atomic
from callbacks.records import durable

LEDGER_FILE = "billing.json"
HEARTBEAT_SECONDS = 2.0


class Ledger:
    """Records this attempt in <logdir>/billing.json and keeps it current.

    Args:
        logdir: the run folder (must exist).
        started_at: `time.time()` when this attempt's process started.
        resumed_from: {"epoch": .., "step": ..} where this attempt starts.
        checkpoint_billed_seconds: billed seconds recorded by the checkpoint this
            attempt resumes from (a floor for a damaged or missing ledger).
    """

    def __init__(self, logdir: str, started_at: float, resumed_from: dict,
                 checkpoint_billed_seconds: float = 0.0):
        self.path = os.path.join(logdir, LEDGER_FILE)
        self.attempts, intact = read_ledger(logdir)
        shortfall = checkpoint_billed_seconds - _billed(self.attempts)
        if not intact and shortfall > 0:
            self.attempts.append({"started_at": 0.0, "last_seen": shortfall,
                                  "status": "recovered from the checkpoint"})
        self.attempts.append({"started_at": started_at, "last_seen": time.time(),
                              "resumed_from": resumed_from, "pid": os.getpid()})
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._write()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="ledger")
        self._thread.start()

    @property
    def billed_seconds_before(self) -> float:
        """Seconds billed by the earlier attempts."""
        return _billed(self.attempts[:-1])

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


def _billed(attempts: list[dict]) -> float:
    return sum(max(0.0, a["last_seen"] - a["started_at"]) for a in attempts)


def _is_attempt(value) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(k), (int, float)) and not isinstance(value.get(k), bool)
        for k in ("started_at", "last_seen"))


def _recover(text: str) -> list[dict]:
    """Every attempt object that still parses in a damaged ledger's text."""
    decoder, found, index = json.JSONDecoder(), [], text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            value, end = None, index + 1
        if _is_attempt(value):
            found.append(value)
            index = text.find("{", end)
        else:
            index = text.find("{", index + 1)
    return found


def read_ledger(logdir: str) -> tuple[list[dict], bool]:
    """(the attempts recorded in `logdir`, whether the file was intact or absent).

    A damaged file is set aside (kept, renamed) with a warning, and every attempt
    that can still be read from it is returned.
    """
    path = os.path.join(logdir, LEDGER_FILE)
    if not os.path.exists(path):
        return [], not _has_checkpoints(logdir)
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    try:
        attempts = json.loads(text)["attempts"]
        if isinstance(attempts, list) and all(_is_attempt(a) for a in attempts):
            return attempts, True
    except (ValueError, TypeError, KeyError):
        pass
    attempts = _recover(text)
    aside = durable.set_aside(path)
    durable.warn(f"{path} is damaged; kept as {aside}; {len(attempts)} attempt(s) recovered "
                 "from it")
    return attempts, False


def _has_checkpoints(logdir: str) -> bool:
    return os.path.isdir(os.path.join(logdir, "checkpoints"))
