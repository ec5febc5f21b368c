"""TensorBoard's HParams record of a run, in its run folder (a helper, not a callback).

The HParams dashboard lists sessions: folders holding a session-start record (the
settings). It takes its columns from the first experiment record it finds, and
each session's value of a column from the last point of that column's tag in the
session's folder joined with the column's group. So that several runs share one
table, filled, whether TensorBoard reads one run folder (`--logdir RUN`: the
session is ".") or a folder of runs (`--logdir runs`: the session is the run's
name):
- every run declares the same columns (dashboard.SETTINGS and HPARAM_FIGURES),
  whatever it measured;
- the run's figures (summary.json's) are tags "run/<key>" in the run folder
  itself, with an empty group, so session and folder are one;
- the status goes in a session-end record: completed -> Success, diverged or
  failed -> Failure, and a run stopped by a signal (preempted, interrupted) ->
  Running. TensorBoard has four statuses (Unknown, Success, Failure, Running); such
  a run has not failed and its session is not over: rerunning the command resumes it
  in the same folder, and the record is then replaced with how it ended. "Running"
  there means unfinished, not that a process is training now (summary.json's
  status says which); Unknown is left to a run still in its first attempt;
- every number is a number: TensorBoard's HParams protocol has no integer type
  (summary_v2 writes an int as FLOAT64, its "TODO(#1998): Add int dtype"), and its
  table prints every number to 5 significant digits, so a batch of 64 reads
  "64.000" there. Settings stay numbers all the same (as text, 128 would sort before
  64 and the interval filter and the parallel-coordinates axis would be lost); read
  back, 64 is exactly 64.
TensorBoard keeps the first metadata it reads of a tag, so a run's record is
written whole, into a new file, and the older files are removed: at the start of
a new run (settings, no figures yet), then at the end of each attempt.
"""

from __future__ import annotations

import os
import time

# Imported with the module (when the callbacks are), not when a run ends: what runs
# after the bill closes must take milliseconds. (summary_v2 needs no TensorFlow;
# the plugin's v1 `summary` module imports it.)
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from tensorboard.plugins.hparams import summary_v2 as hp

from callbacks.records import events
from callbacks.records.dashboard import HPARAM_FIGURES, RUN, SETTINGS

# summary.json's status -> TensorBoard's (module docstring: why a stopped run is Running)
STATUSES = {"completed": "STATUS_SUCCESS", "diverged": "STATUS_FAILURE",
            "failed": "STATUS_FAILURE", "preempted": "STATUS_RUNNING",
            "interrupted": "STATUS_RUNNING"}


def figure_tag(key: str) -> str:
    """The tag of one of the run's figures (HPARAM_FIGURES) in the run folder."""
    return f"{RUN}/{key}"


def write_record(logdir: str, settings: dict, figures: dict | None = None,
                 status: str | None = None, started_at: float | None = None,
                 step: int = 0, columns: dict | None = None,
                 metrics: dict | None = None) -> str:
    """Writes the run's HParams record into `logdir` (the run folder), replacing any
    earlier one; returns the new file's path.

    Args:
        settings: {name: str/int/float/bool or None} (None values are left out).
        figures: {HPARAM_FIGURES key: number or None}, e.g. the summary dict.
        status: how the run (this attempt) ended: a STATUSES key, or anything else
            for no status (Unknown).
        started_at: `time.time()` when the run's first attempt started.
        step: where the figures sit on the x axis (epochs completed).
        columns: {setting: description} the table declares; default SETTINGS.
        metrics: {key: (label, unit, text)} its figure columns; default HPARAM_FIGURES.
    """
    older = events.event_files(logdir)
    writer = events.EventWriter(logdir)
    try:
        values = {k: v for k, v in settings.items() if v is not None}
        writer.summary(hp.hparams_pb(values, trial_id=os.path.basename(os.path.normpath(
            logdir)), start_time_secs=int(started_at or time.time())))
        metric_columns = [hp.Metric(figure_tag(key), group="", display_name=label,
                             description=f"{text} *Unit: {unit}.*")
                   for key, (label, unit, text) in (metrics or HPARAM_FIGURES).items()]
        writer.summary(hp.hparams_config_pb(
            hparams=[hp.HParam(name, description=text)
                     for name, text in (columns or SETTINGS).items()],
            metrics=metric_columns))
        for key, (_, unit, text) in (metrics or HPARAM_FIGURES).items():
            value = (figures or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.scalar(figure_tag(key), value, step,
                              description=f"{text} *Unit: {unit}.*")
        if status in STATUSES:
            writer.summary(_session_end(getattr(api_pb2, STATUSES[status])), step)
    finally:
        writer.close()
    for path in older:
        os.remove(path)
    return writer.path


def _session_end(status: int):
    """The session-end record (the plugin's v1 `session_end_pb`, which needs TensorFlow)."""
    info = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=time.time())
    return hp._summary_pb(metadata.SESSION_END_INFO_TAG,
                          plugin_data_pb2.HParamsPluginData(session_end_info=info))
