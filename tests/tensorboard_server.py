"""A real TensorBoard server on loopback for the tests, and its HTTP API."""

import contextlib
import gzip
import json
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import PATIENCE_SECONDS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, body=None):
    """GET (or POST `body` as JSON) and decode the JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        return json.loads(raw)


def _start(command, cwd):
    """(process, base URL) of `command` on a free loopback port, once its API answers;
    a port taken between the choice and TensorBoard's bind (another test's server) is
    chosen again."""
    for _ in range(3):
        port = free_port()
        process = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(port)],
                                   cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + PATIENCE_SECONDS
        while True:
            try:
                fetch(base + "/data/plugins_listing")
                return process, base
            except OSError:
                if process.poll() is not None or time.time() > deadline:
                    process.kill()
                    stderr = process.communicate()[1]
                    if "could not bind" in stderr:
                        break  # the port went to someone else: another one
                    pytest.fail(f"tensorboard did not start: {stderr[-2000:]}")
                time.sleep(0.5)
    pytest.fail(f"tensorboard found no free port: {stderr[-2000:]}")


@contextlib.contextmanager
def serving(command: list, cwd=None):
    """Starts `command` (a TensorBoard command line, without --host/--port) on a free
    loopback port; yields its base URL once the API answers (polled for up to
    PATIENCE_SECONDS: its start takes seconds, more on a loaded machine)."""
    process, base = _start(command, cwd)
    try:
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


STATUSES = ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]


def hparams_table(server):
    """(the HParams columns, {session name: session}) as the dashboard gets them."""
    experiment = fetch(server + "/data/plugin/hparams/experiment", {"experimentName": ""})
    groups = fetch(server + "/data/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": STATUSES, "colParams": [],
        "startIndex": 0, "sliceSize": 10})["sessionGroups"]
    sessions = {s["name"]: {**s, "hparams": g["hparams"], "group": g["name"]}
                for g in groups for s in g["sessions"]}
    return experiment, sessions


def hparams_sessions(logdir, groups=None) -> dict:
    """{session: (hparams, {metric tag: last value})} as TensorBoard itself reads the
    folder: its event multiplexer and the hparams plugin's metadata parser; `groups`,
    a dict, gets {session: its group's name}."""
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    from tensorboard.plugins.hparams import metadata
    from tensorboard.util import tensor_util

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    sessions = {}
    for run_name, tags in multiplexer.PluginRunToTagToContent(metadata.PLUGIN_NAME).items():
        if metadata.SESSION_START_INFO_TAG not in tags:
            continue
        info = metadata.parse_session_start_info_plugin_data(
            tags[metadata.SESSION_START_INFO_TAG])
        values = {k: (v.string_value if v.HasField("string_value") else v.number_value)
                  for k, v in info.hparams.items()}
        metrics = {tag: float(tensor_util.make_ndarray(
            multiplexer.Tensors(run_name, tag)[-1].tensor_proto))
            for tag in multiplexer.GetAccumulator(run_name).Tags()["tensors"]
            if tag.startswith("run/")}
        sessions[run_name] = (values, metrics)
        if groups is not None:
            groups[run_name] = info.group_name
    return sessions
