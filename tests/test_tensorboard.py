"""A real TensorBoard server, on loopback, reading runs made here on both backends:
scalars by group, the HParams dashboard, and the profiler's step-time breakdown."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import run_cli, tiny_flags


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            import gzip
            raw = gzip.decompress(raw)
        return json.loads(raw)


@pytest.fixture(scope="module")
def runs(digits_dir, tmp_path_factory):
    """Two runs (TensorFlow and JAX) with a trace of steps 3..5, in one folder."""
    root = tmp_path_factory.mktemp("tb")
    for backend in ("tensorflow", "jax"):
        done = run_cli(*tiny_flags(digits_dir, root / backend, f"--backend={backend}",
                                   "--steps_per_epoch=8", "--profile_steps=3,5",
                                   "--peak_tflops_per_device=1.0", "--log_every_steps=4"))
        assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def server(runs):
    executable = shutil.which("tensorboard", path=os.path.dirname(sys.executable))
    port = free_port()
    process = subprocess.Popen([executable, "--logdir", str(runs), "--host", "127.0.0.1",
                                "--port", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            fetch(base + "/data/plugins_listing")
            break
        except OSError:
            if process.poll() is not None or time.time() > deadline:
                process.kill()
                pytest.fail(f"tensorboard did not start: {process.stderr.read()[-2000:]}")
            time.sleep(1)
    yield base
    process.terminate()
    process.wait(timeout=30)


def test_scalars_are_grouped_and_named_for_the_study(server):
    tags = fetch(server + "/data/plugin/scalars/tags")
    for run in ("tensorflow", "jax"):
        assert {"throughput/images_per_sec", "accuracy/val_top1", "cost/cost_usd",
                "utilization/mfu", "optimizer/learning_rate", "loss/loss"} <= set(tags[run])
        assert "throughput/images_per_sec" in tags[run + "/steps"]
    points = fetch(server + "/data/plugin/scalars/scalars?run=jax&tag=accuracy/val_top1")
    assert [p[1] for p in points] == [1, 2]  # one point per epoch, in order


def test_hparams_list_each_run_settings_against_its_figures(server):
    experiment = fetch(server + "/data/plugin/hparams/experiment", {"experimentName": ""})
    names = {h["name"] for h in experiment["hparamInfos"]}
    assert {"accelerator", "backend", "global_batch_size", "precision",
            "price_per_hour_usd"} <= names
    metrics = {m["name"]["tag"] for m in experiment["metricInfos"]}
    assert {"accuracy/val_top1", "throughput/images_per_sec", "cost/cost_usd",
            "utilization/mfu"} <= metrics
    groups = fetch(server + "/data/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN"], "colParams": [],
        "startIndex": 0, "sliceSize": 10})["sessionGroups"]
    backends = sorted(g["hparams"]["backend"] for g in groups)
    assert backends == ["jax", "tensorflow"]


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_the_profile_of_steps_3_to_5_has_a_step_time_breakdown(server, backend):
    plugins = fetch(server + "/data/plugins_listing")
    assert plugins["profile"]["enabled"]
    profile_runs = fetch(server + "/data/plugin/profile/runs")
    run = next(r for r in profile_runs if r.startswith(backend + "/"))
    assert "overview_page" in fetch(server + f"/data/plugin/profile/run_tools?run={run}")
    host = fetch(server + f"/data/plugin/profile/hosts?run={run}&tag=overview_page")[0]
    tables = fetch(server + f"/data/plugin/profile/data?run={run}&tag=overview_page"
                            f"&host={host['hostname']}")
    steps = next(t for t in tables if any(c["id"] == "stepnum" for c in t.get("cols", [])))
    assert [row["c"][0]["v"] for row in steps["rows"]] == ["train 3", "train 4", "train 5"]
