"""The "why" of a speed change names the kind of work that moved with the speed.

`largest_change` (callbacks/profiling/difference.py) named the kind whose time an image
changed most either way, which could point against the measured speed: TensorFlow ran
1.08x as fast as JAX, and the named change was JAX's normalization 19.9 -> 3.9 ms a
step (TensorFlow's fused BatchNorm op against XLA's fusions: kinds the two backends do
not split alike); in the ladder, bf16 ran 1.08x as fast, and its why read `elementwise
and other 3.9 -> 13.6 ms`. Here, what a user reads: the ladder's table and rows
(app/modes/ladder.py) and the report's sentence (app/report/page.py) of records written
by hand, where the change largest either way points against the speed.
"""

import json

from app import report
from app.modes import ladder

H100 = "NVIDIA H100 80GB HBM3"


def breakdown(step_ms, parts):
    """A breakdown set against its timed step, as summary.json keeps it."""
    return {"step_ms": step_ms, "traced_step_ms": step_ms, "devices": 1,
            "device_kind": H100,
            "parts": {kind: {"ms": ms, "share": round(ms / step_ms, 4)}
                      for kind, ms in parts.items()}}


# float32 at 64 ms a step of 64 images (1,000 images/sec); bf16 at 59.26 ms (1,080:
# 1.08x): its convolutions 40 -> 32 ms and normalization 15 -> 11 fell, its elementwise
# work 3.9 -> 13.6 rose (the largest change either way: +9.7 ms against -8).
FLOAT32 = {"convolutions": 40.0, "normalization": 15.0, "elementwise and other": 3.9,
           "idle": 5.1}
BF16 = {"convolutions": 32.0, "normalization": 11.0, "elementwise and other": 13.6,
        "idle": 2.66}


def rung(name, rate, step_ms, parts):
    return {"rung": name, "point": name, "changes": f"the {name} rung", "status": "ok",
            "images_per_sec": rate, "global_batch_size": 64, "step_time_ms": step_ms,
            "backend": "jax", "breakdown": breakdown(step_ms, parts)}


def test_a_faster_rung_names_the_kind_whose_time_fell_most():
    rows = ladder.with_gains([rung("float32", 1000.0, 64.0, FLOAT32),
                              rung("mixed_bfloat16", 1080.0, 59.26, BF16)])
    change = rows[1]["largest_change"]
    assert rows[1]["gain_over_previous"] == 1.08
    assert (change["kind"], change["direction"]) == ("convolutions", "fell")
    assert change["words"] == ("convolutions 40.0 -> 32.0 ms a step, the kind whose time "
                               "an image fell most as images/sec rose to 1.08x")
    table = ladder.format_table(rows)
    assert f"  mixed_bfloat16: {change['words']} (step 59.3 ms" in table, table
    assert "elementwise and other 3.9 -> 13.6" not in table


def test_a_slower_rung_names_the_kind_whose_time_rose_most():
    """The other way: from bf16 to float32 (0.926x), elementwise work fell most (13.6 ->
    3.9) but the convolutions rose most (32 -> 40): they are named."""
    rows = ladder.with_gains([rung("mixed_bfloat16", 1080.0, 59.26, BF16),
                              rung("float32", 1000.0, 64.0, FLOAT32)])
    change = rows[1]["largest_change"]
    assert rows[1]["kept"] is False
    assert change["words"] == ("convolutions 32.0 -> 40.0 ms a step, the kind whose time "
                               "an image rose most as images/sec fell to 0.93x")


def run_folder(folder, backend, rate, step_ms, parts):
    """A run folder as app/run/summary.py writes it, with the fields the report reads."""
    folder.mkdir()
    summary = {"backend": backend, "accelerator": "gpu", "device_kind": H100,
               "num_processes": 1, "num_replicas": 1, "model": "resnet50",
               "dataset": "synthetic", "image_size": 224, "precision": "mixed_bfloat16",
               "global_batch_size": 64, "epochs": 1, "epochs_completed": 1,
               "status": "completed", "images_per_sec": rate, "step_time_ms": step_ms,
               "step_time_stderr_ms": 0.1, "peak_tflops_per_device": 989.0,
               "attempts": [{"started_at": 1796000000.0, "pid": 1}],
               "profile": {"steps": [4, 6], "breakdown": breakdown(step_ms, parts)}}
    (folder / "summary.json").write_text(json.dumps(summary))
    return report.load_run(str(folder))


# JAX at 64 ms a step (1,000 images/sec), normalization in XLA's fusions 19.9 ms;
# TensorFlow at 59.26 ms (1,080: 1.08x), its fused BatchNorm op 3.9 ms, its
# convolutions longer.
JAX = {"convolutions": 30.0, "normalization": 19.9, "elementwise and other": 10.0,
       "idle": 4.1}
TENSORFLOW = {"convolutions": 40.0, "normalization": 3.9, "elementwise and other": 12.0,
              "idle": 3.36}


def test_two_backends_kinds_are_said_not_comparable(tmp_path):
    runs = [run_folder(tmp_path / "jax", "jax", 1000.0, 64.0, JAX),
            run_folder(tmp_path / "tf", "tensorflow", 1080.0, 59.26, TENSORFLOW)]
    report.write(runs, [], str(tmp_path / "report"))
    page = (tmp_path / "report" / "report.md").read_text()
    assert ("the largest change is not named: the kinds of work are not comparable "
            "between jax and tensorflow (each backend splits its step into ops its own "
            "way: TensorFlow's executor by its own ops, XLA by its fused ones)") in page, page
    assert "normalization 19.9 -> 3.9" not in page


def test_one_backends_report_names_the_kind_that_moved_with_the_speed(tmp_path):
    runs = [run_folder(tmp_path / "f32", "jax", 1000.0, 64.0, FLOAT32),
            run_folder(tmp_path / "bf16", "jax", 1080.0, 59.26, BF16)]
    report.write(runs, [], str(tmp_path / "report"))
    page = (tmp_path / "report" / "report.md").read_text()
    assert ("the largest change is convolutions 40.0 -> 32.0 ms a step, the kind whose "
            "time an image fell most as images/sec rose to 1.08x") in page, page
