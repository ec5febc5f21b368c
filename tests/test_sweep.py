"""The throughput sweep on CPU, tiny: sizes, table, JSON, plot and TensorBoard made."""

import json
import signal
import time

import pytest
from conftest import error_lines, run_cli
from processes import run, snapshot, start, strict_json

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


def _until(process, prefix) -> str:
    """Reads the process's stdout up to the first line starting with `prefix`."""
    for line in process.stdout:
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting {prefix!r}: {process.communicate()[1][-2000:]}")


def _interrupted(process) -> tuple[float, str]:
    """Sends Ctrl-C; (seconds until the process ended, its error line)."""
    sent = time.time()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 75, stderr[-2000:]
    (line,) = error_lines(stderr)
    return time.time() - sent, line


@pytest.mark.slow
def test_ctrl_c_stops_a_sweep_in_seconds_keeps_its_points_and_the_rerun_does_the_rest(
        tmp_path):
    """Ctrl-C right after a size finished, then 2 s into the next size: each time the
    sweep stops at the next step boundary (not after the 25 s grace, not by finishing;
    the next size's warm-up fit, compile included, has no step hooks: at most its
    length), keeps the finished point, and the rerun measures only what is left; a
    finished sweep's rerun says it is complete and measures nothing."""
    logdir = tmp_path / "sweep"
    args = ["--model=small_resnet", "--dataset=synthetic", "--image_size=16",
            "--sweep_batch_sizes=8,16,32", "--steps_per_epoch=40", f"--logdir={logdir}"]

    def rows():
        return {r["global_batch_size"]: r for r in strict_json(logdir / "sweep.json")["sweep"]}

    first = start(args)
    _until(first, "[sweep] global batch 8:")
    time.sleep(0.2)
    seconds, line = _interrupted(first)
    assert seconds < 20 and "preempted (SIGINT)" in line, (seconds, line)
    assert f"1 finished size(s) kept in {logdir}/sweep.json" in line
    kept = rows()
    assert list(kept) == [8] and kept[8]["status"] == "ok"
    assert strict_json(logdir / "sweep.json")["sizes_left"] == [16, 32]

    second = start(args)
    assert "1 of 3 sizes measured before (8)" in _until(second, "[sweep] resuming:")
    _until(second, "[sweep] small_resnet")  # the model is built: size 16 is next
    time.sleep(2)
    seconds, line = _interrupted(second)
    assert seconds < 20 and "stopped at global batch 16" in line, (seconds, line)
    assert rows() == kept  # size 16 was not finished: dropped, size 8 kept as it was

    done = run(args)
    assert done.returncode == 0, done.stderr[-2000:]
    final = rows()
    assert list(final) == [8, 16, 32] and final[8] == kept[8]
    assert all(r["status"] == "ok" for r in final.values())
    assert "[sweep] global batch 8:" not in done.stdout  # not measured again

    before = snapshot(logdir)
    again = run(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"sweep is complete: {logdir} holds its sweep.json" in again.stdout
    assert "global batch per device  images/sec" in again.stdout  # its table again
    assert snapshot(logdir) == before
