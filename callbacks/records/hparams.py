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
- a session's group (the table's row, its "Trial ID") is unique to its run folder:
  the plugin averages the sessions of one group into one row, and groups by name,
  so two sweeps' "global_batch_size=32" points or two runs of one folder name would
  be one row of mixed figures. The name starts with what tells the rows apart (the
  point's settings) and ends with the folder's name and a digest of its path
  (`trial_id`): the table's column shows about 16 characters;
- the settings a campaign varies (a sweep's axes, what the ladder's rungs change)
  are marked `differs`: the plugin lists those columns first and ticks the first
  five, so a sweep's axis is never hidden behind its constant settings;
- how the run ended is a column, "status" (completed, preempted, failed, ...), and
  a session-end record where TensorBoard has a word for it: completed -> Success,
  diverged or failed -> Failure. TensorBoard's four statuses (Unknown, Success,
  Failure, Running) have none for a run stopped by a signal (preempted,
  interrupted) whose rerun resumes it: "Running" would say a process trains now. Its
  session has no end record (Unknown, as a run in its first attempt) and its status
  column says which;
- integers are text, right-aligned with spaces to INT_WIDTH: TensorBoard's HParams
  protocol has no integer type (summary_v2 writes an int as FLOAT64, its
  "TODO(#1998): Add int dtype") and its table prints every number to 5 significant
  digits, so a batch of 64 read "64.000". As text it reads "64" (a table cell
  collapses the leading spaces), and the padding keeps text's order numeric (the
  plugin sorts and the parallel-coordinates axis orders text as text: "128" would
  come before "64"). Read back, a value's int() is the setting (`setting_value`).
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

# summary.json's status -> TensorBoard's; a stopped run's has none (module docstring)
# (a point's row status: ok, out of memory, "skipped: <why>", "failed: <why>")
STATUSES = {"completed": "STATUS_SUCCESS", "diverged": "STATUS_FAILURE",
            "failed": "STATUS_FAILURE", "ok": "STATUS_SUCCESS",
            "out of memory": "STATUS_FAILURE", "skipped": "STATUS_FAILURE"}
INT_WIDTH = 10  # digits of the largest batch (flags/ranges.py's MAX_BATCH, 2**31)
STATUS_CHARS = 80  # of a status column's text (a point's reason can be long)
PATH_DIGEST_CHARS = 6


def trial_id(logdir: str, label: str | None = None, run_folder: str | None = None) -> str:
    """The group name of the session in `logdir`: `label` (a point's settings, a rung's
    name), then its run folder's name (`run_folder`, default `logdir`) and a digest of
    `logdir`'s absolute path, e.g. "batch 32 · grid (3f2a1c)" for a sweep's point, or
    "small_resnet-digits-jax-1a2b3c4d (9e8d7c)" for a run."""
    import hashlib

    path = os.path.realpath(logdir)
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()
    name = os.path.basename(os.path.realpath(run_folder or logdir))
    folder = f"{name} ({digest[:PATH_DIGEST_CHARS]})"
    return f"{label} · {folder}" if label else folder


def setting_value(value):
    """A setting as the record holds it: an int as right-aligned text (module
    docstring), a float, text or a bool as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:>{INT_WIDTH}}"
    return value


def figure_tag(key: str) -> str:
    """The tag of one of the run's figures (HPARAM_FIGURES) in the run folder."""
    return f"{RUN}/{key}"


def write_record(logdir: str, settings: dict, figures: dict | None = None,
                 status: str | None = None, started_at: float | None = None,
                 step: int = 0, columns: dict | None = None,
                 metrics: dict | None = None, label: str | None = None,
                 varying=(), run_folder: str | None = None) -> str:
    """Writes the run's HParams record into `logdir` (the run folder), replacing any
    earlier one; returns the new file's path.

    Args:
        settings: {name: str/int/float/bool or None} (None values are left out).
        figures: {HPARAM_FIGURES key: number or None}, e.g. the summary dict.
        status: how the run (this attempt) ended, its "status" column (None: running);
            one of STATUSES (before any ": <why>") also ends its session.
        started_at: `time.time()` when the run's first attempt started.
        step: where the figures sit on the x axis (epochs completed).
        columns: {setting: description} the table declares; default SETTINGS.
        metrics: {key: (label, unit, text)} its figure columns; default HPARAM_FIGURES.
        label: what tells this session from the others of its folder (a point's
            settings), the start of its group's name (`trial_id`); None for a run's.
        varying: the settings whose columns come first (marked `differs`).
        run_folder: the run folder `logdir` is in (a point's), named in its group.
    """
    older = events.event_files(logdir)
    writer = events.EventWriter(logdir)
    try:
        values = {k: setting_value(v) for k, v in settings.items() if v is not None}
        values["status"] = str(status or "running")[:STATUS_CHARS]
        writer.summary(hp.hparams_pb(values, trial_id=trial_id(logdir, label, run_folder),
                                     start_time_secs=int(started_at or time.time())))
        writer.summary(_experiment(columns or SETTINGS, metrics or HPARAM_FIGURES,
                                   set(varying)))
        for key, (_, unit, text) in (metrics or HPARAM_FIGURES).items():
            value = (figures or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.scalar(figure_tag(key), value, step,
                              description=f"{text} *Unit: {unit}.*")
        ended = STATUSES.get(str(status).partition(":")[0])
        if ended:
            writer.summary(_session_end(getattr(api_pb2, ended)), step)
    finally:
        writer.close()
    for path in older:
        os.remove(path)
    return writer.path


def _experiment(columns: dict, metrics: dict, varying: set):
    """The experiment record: the setting columns (those in `varying` marked `differs`,
    so listed first) and the figure columns (hp.hparams_config_pb has no `differs`)."""
    experiment = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name=name, description=text,
                                         differs=name in varying)
                      for name, text in columns.items()],
        metric_infos=[hp.Metric(figure_tag(key), group="", display_name=label,
                                description=f"{text} *Unit: {unit}.*").as_proto()
                      for key, (label, unit, text) in metrics.items()])
    return hp._summary_pb(metadata.EXPERIMENT_TAG,
                          plugin_data_pb2.HParamsPluginData(experiment=experiment))


def _session_end(status: int):
    """The session-end record (the plugin's v1 `session_end_pb`, which needs TensorFlow)."""
    info = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=time.time())
    return hp._summary_pb(metadata.SESSION_END_INFO_TAG,
                          plugin_data_pb2.HParamsPluginData(session_end_info=info))
