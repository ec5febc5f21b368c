"""The billing ledger: wall-clock time of every attempt of a run, kill-proof.

A cloud bills every second a machine is held, including work lost to a kill. So
billed time is not kept in checkpoints alone: <logdir>/billing.json lists each
attempt (when it started, the step it resumed from, when it was last seen alive),
and a daemon thread refreshes "last seen" every few seconds. A run killed with
SIGKILL loses at most that interval from its bill; the next attempt charges the
earlier ones from this file. (An attempt killed before its flags, devices and data
were checked cannot bill itself: nothing may be written before those checks.)
"""

from __future__ import annotations

import os
import threading
import time

from app.run.rundir import read_json, write_json_atomic

LEDGER_FILE = "billing.json"
HEARTBEAT_SECONDS = 2.0


class Ledger:
    """Records this attempt in <logdir>/billing.json and keeps it current.

    Args:
        logdir: the run folder (must exist).
        started_at: `time.time()` when this attempt's process started.
        resumed_from: {"epoch": .., "step": ..} where this attempt starts.
    """

    def __init__(self, logdir: str, started_at: float, resumed_from: dict):
        self.path = os.path.join(logdir, LEDGER_FILE)
        self.attempts = read_ledger(logdir)
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
        return sum(max(0.0, a["last_seen"] - a["started_at"]) for a in self.attempts[:-1])

    def _write(self):
        with self._lock:
            self.attempts[-1]["last_seen"] = time.time()
            write_json_atomic(self.path, {"attempts": self.attempts})

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._write()
            except OSError:
                pass  # a full disk must not kill training; the next beat retries

    def close(self, status: str) -> list[dict]:
        """Stops the heartbeat, records how this attempt ended; returns all attempts."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.attempts[-1]["status"] = status
        self._write()
        return self.attempts


def read_ledger(logdir: str) -> list[dict]:
    path = os.path.join(logdir, LEDGER_FILE)
    if not os.path.exists(path):
        return []
    try:
        return list(read_json(path).get("attempts", []))
    except (OSError, ValueError):
        return []
