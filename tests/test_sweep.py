"""The throughput sweep on CPU, tiny: sizes, table, JSON, plot and TensorBoard made."""

import json

from conftest import run_cli

from app.engine import memory
from callbacks.records import events


def test_sweep_measures_every_size_and_reports_the_rest(tmp_path):
    logdir = tmp_path / "sweep"
    done = run_cli("--backend=jax", "--num_devices=2", "--model=small_resnet",
                   "--dataset=synthetic", "--image_size=16", "--sweep_batch_sizes=8,5,4",
                   "--steps_per_epoch=6", f"--logdir={logdir}")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((logdir / "sweep.json").read_text())
    rows = {r["global_batch_size"]: r for r in result["sweep"]}
    assert list(rows) == [4, 5, 8]  # smallest first
    assert rows[5]["status"] == "skipped: not divisible by 2 replicas"
    for size in (4, 8):
        assert rows[size]["status"] == "ok" and rows[size]["images_per_sec"] > 0
        assert rows[size]["per_device_batch_size"] == size // 2
        assert rows[size]["step_time_ms"] > 0 and rows[size]["mfu"] is None  # no CPU peak
    assert result["best"]["global_batch_size"] in (4, 8)
    assert result["largest_batch_that_fits"] == 8
    assert json.loads((logdir / "summary.json").read_text()) == result
    assert (logdir / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points = {(v.tag, e.step) for path in events.event_files(str(logdir / "sweep"))
              for e in events.read_events(path) for v in e.summary.value}
    assert ("sweep_throughput/images_per_sec_vs_batch", 8) in points
    described = {v.tag: v.metadata.summary_description
                 for path in events.event_files(str(logdir / "sweep"))
                 for e in events.read_events(path) for v in e.summary.value}
    assert "Unit: images/second" in described["sweep_throughput/images_per_sec_vs_batch"]
    assert "python -m tensorboard.main --logdir" in done.stdout  # works as printed
    assert "global batch per device  images/sec" in done.stdout  # the table
    assert "skipped: not divisible by 2 replicas" in done.stdout


def test_out_of_memory_errors_are_recognised_and_others_are_not():
    assert memory.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while "
                                                "trying to allocate 81.5GiB"))
    assert not memory.is_out_of_memory(ValueError("shapes do not match"))
