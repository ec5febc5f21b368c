"""The profiler's own tools, called as TensorBoard's Profile tab calls them: xprof's
converters read a trace session's *.xplane.pb into its events (`trace_viewer`) and
each traced HLO module into text (`graph_viewer`'s HloProto text, with metadata).

xprof is imported where it is called: the package installs with
tensorboard-plugin-profile, and a run that profiles nothing never loads it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import sys
import tempfile


class ProfileError(ValueError):
    """A profile folder the breakdown cannot read (its message is one line)."""


def session(profile_folder: str) -> list[str]:
    """The xplane files of a trace session: `profile_folder` itself where it is one
    (the session a run wrote and named: callbacks/profiler.py), else the newest
    session under it (logdir/plugins/profile)."""
    own = sorted(glob.glob(os.path.join(profile_folder, "*.xplane.pb")))
    if own:
        return own
    sessions = sorted(glob.glob(os.path.join(profile_folder, "*", "")))
    for folder in reversed(sessions):
        paths = sorted(glob.glob(os.path.join(folder, "*.xplane.pb")))
        if paths:
            return paths
    raise ProfileError(f"no trace (*.xplane.pb) under {profile_folder}")


# What xprof's converters log on every call through absl to the process's stderr
# (e.g. "No UnifiedProfileProcessor registered for tool: trace_viewer": it then takes
# its older path, which serves): not a fault, and a ladder prints it for every rung.
CONVERTER_NOISE = re.compile(r"No (Unified)?ProfileProcessor registered for tool|"
                             r"All log messages before absl::InitializeLog")


@contextlib.contextmanager
def _converter_log():
    """Within the block, what is written to file descriptor 2 (the converters' C++
    logging) is caught; afterwards every line but CONVERTER_NOISE is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for text in caught.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not CONVERTER_NOISE.search(text):
                    sys.stderr.write(text)


def _tool(paths: list[str], tool: str, options: dict | None = None):
    from xprof.convert import raw_to_tool_data

    with _converter_log():
        data, _ = raw_to_tool_data.xspace_to_tool_data(paths, tool, options or {})
    if data is None:
        return None
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def modules_text(paths: list[str], names: set[str]) -> dict[str, str]:
    """Each named HLO module's text (with metadata) from graph_viewer, by module name."""
    from xprof.convert import raw_to_tool_data

    with _converter_log():  # writes NAME(ID).hlo_proto.pb beside them
        raw_to_tool_data.xspace_to_tool_names(paths)
    folder = os.path.dirname(paths[0])
    texts = {}
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".hlo_proto.pb"):
            continue
        module = file[:-len(".hlo_proto.pb")]
        if module.split("(")[0] not in names:
            continue
        try:
            texts[module.split("(")[0]] = _tool(paths, "graph_viewer", {
                "graph_viewer_options": {"type": "pbtxt", "module_name": module}}) or ""
        except ValueError:
            continue
    return texts


def events(paths: list[str]) -> list[dict]:
    """The trace's events (trace_viewer's JSON), device ops and host step markers."""
    text = _tool(paths, "trace_viewer")
    if not text:
        raise ProfileError("the profiler's trace viewer returned no events")
    trace = json.loads(text)
    return trace.get("traceEvents", []) if isinstance(trace, dict) else trace

