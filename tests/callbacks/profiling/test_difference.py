"""callbacks/profiling/difference.py: which kind of work made one run slower than
another, with both times and rates: by hand (the same batch, batches that differ,
breakdowns still traced), and on two real run folders whose breakdowns differ in a
known way (a model of Dense layers, then the same with 8x wider layers: its matrix
products grow most), through `app/report.py A B`."""

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, run_cli

from callbacks.profiling import breakdown, difference

H100 = "NVIDIA H100 80GB HBM3"


def _run(batch, step, parts, traced=None, peak=989.0):
    found = {"step_ms": traced or step, "devices": 1, "device_kind": H100, "parts": parts}
    if traced is None:
        found["traced_step_ms"] = step
    return {"breakdown": found, "global_batch_size": batch, "step_time_ms": step,
            "peak_tflops_per_device": peak}


def test_the_kind_whose_time_changed_most_with_both_rates():
    """Two machines A and B, the same batch: B is slower (57.1 -> 62.0 ms a
    step), its convolutions 14.5 -> 21.3 ms a step, the kind whose time rose most (idle
    and normalization rose less)."""
    a = _run(256, 57.1, {"convolutions": {"ms": 14.5, "share": 0.25, "tflops_per_sec": 306.6},
                         "normalization": {"ms": 10.0, "share": 0.18, "gb_per_sec": 1675.0},
                         "idle": {"ms": 2.0, "share": 0.04}})
    b = _run(256, 62.0, {"convolutions": {"ms": 21.3, "share": 0.34, "tflops_per_sec": 207.7},
                         "normalization": {"ms": 12.0, "share": 0.19, "gb_per_sec": 1396.0},
                         "idle": {"ms": 4.0, "share": 0.06}})
    change = difference.largest_change(a, b)
    assert change["kind"] == "convolutions" and change["same_batch"]
    assert (change["before_ms"], change["after_ms"]) == (14.5, 21.3)
    assert change["before_us"] == pytest.approx(14.5e3 / 256, abs=1e-3)
    assert change["before_rate"] == {"tflops_per_sec": 306.6, "share_of_peak": 0.31}
    assert change["words"] == ("convolutions 14.5 -> 21.3 ms a step (at 307 -> 208 TFLOP/s, "
                               "31% -> 21% of peak), the kind whose time an image rose most "
                               "as images/sec fell to 0.92x")
    # a kind bound by memory against the bandwidth; one side without a rate
    b["breakdown"]["parts"]["normalization"] = {"ms": 30.0, "share": 0.4}
    change = difference.largest_change(a, b)
    assert change["words"].startswith("normalization 10.0 -> 30.0 ms a step (at 1,675 -> "
                                      "unknown GB/s), ")


def test_batches_that_differ_compare_an_images_time():
    """A rung from batch 128 to 1,024: convolutions take more a step (40 -> 200 ms) but
    less an image (312.5 -> 195.3 us); elementwise work a step 10 -> 150 ms, an image
    78.1 -> 146.5 us; an image takes 468.8 -> 351.6 us (1.33x the images/sec):
    convolutions' time an image fell most."""
    a = _run(128, 60.0, {"convolutions": {"ms": 40.0, "share": 0.67},
                         "elementwise and other": {"ms": 10.0, "share": 0.17}})
    b = _run(1024, 360.0, {"convolutions": {"ms": 200.0, "share": 0.56},
                           "elementwise and other": {"ms": 150.0, "share": 0.42}})
    change = difference.largest_change(a, b)
    assert change["kind"] == "convolutions" and not change["same_batch"]
    assert change["words"] == ("convolutions 312.5 -> 195.3 us an image, the kind whose "
                               "time an image fell most as images/sec rose to 1.33x")
    # the ladder reads these three keys (app/modes/ladder.py's why lines)
    assert (change["before_us"], change["after_us"]) == (312.5, 195.312)


def test_a_traced_breakdown_is_set_against_its_timed_step_first():
    """A row as a sweep point keeps it (traced, unreconciled): 20 ms of traced idle
    that the timed step (30 ms, busy 28 ms) does not have; the other run's idle is 3
    ms: idle changed little (2 -> 3 ms), matrix products most."""
    a = _run(64, 30.0, {"matrix products": {"ms": 28.0, "share": 0.58},
                        "idle": {"ms": 20.0, "share": 0.42}}, traced=48.0)
    b = _run(64, 45.0, {"matrix products": {"ms": 42.0, "share": 0.93},
                        "idle": {"ms": 3.0, "share": 0.07}})
    assert difference.of_timed_step(a)["parts"]["idle"]["ms"] == 2.0
    assert difference.largest_change(a, b)["kind"] == "matrix products"
    assert difference.largest_change(a, {"breakdown": None}) is None
    assert difference.largest_change(a, {**b, "global_batch_size": True}) is None


DENSE = textwrap.dedent('''\
    import keras

    def make_model(num_classes, image_size):
        inputs = keras.Input((image_size, image_size, 3))
        x = keras.layers.Flatten()(inputs)
        for i in range(3):
            x = keras.layers.Dense(WIDTH, name=f"wide_{i}")(x)
        return keras.Model(inputs, keras.layers.Dense(num_classes, dtype="float32")(x))
    ''')


def test_the_report_of_two_runs_names_the_kind_that_changed_most(tmp_path):
    """Two runs of Dense layers only, 256 then 2,048 units wide (the second's matrix
    products 8-64x the first's FLOPs): the report names matrix products, with both
    times an image and both achieved rates, and each step's line; a damaged breakdown
    in a third folder is a caveat, not a traceback."""
    import shutil

    summaries = []
    for width in (256, 2048):
        source = tmp_path / f"dense_{width}.py"
        source.write_text(DENSE.replace("WIDTH", str(width)))
        logdir = tmp_path / f"dense-{width}"
        done = run_cli("--backend=jax", f"--model={source}:make_model", f"--logdir={logdir}",
                       "--dataset=synthetic", "--image_size=32", "--global_batch_size=64",
                       "--epochs=1", "--steps_per_epoch=8", "--validation_steps=-1",
                       "--profile_steps=4,6", "--verbose=0")
        assert done.returncode == 0, done.stderr[-3000:]
        summaries.append(json.loads((logdir / "summary.json").read_text()))
    narrow, wide = summaries
    change = difference.largest_change(narrow, wide)
    assert change["kind"] == "matrix products" and change["after_us"] > change["before_us"]
    assert "tflops_per_sec" in change["before_rate"] and "tflops_per_sec" in change["after_rate"]
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "dense-2048", damaged)
    summary = json.loads((damaged / "summary.json").read_text())
    summary["profile"]["breakdown"]["parts"] = {"convolutions": {"ms": -1, "share": 7}}
    (damaged / "summary.json").write_text(json.dumps(summary))
    done = subprocess.run([sys.executable, "app/report.py", str(tmp_path / "dense-256"),
                           str(tmp_path / "dense-2048"), str(damaged),
                           "--out", str(tmp_path / "report")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report" / "report.md").read_text()
    assert "the largest change is " + change["words"] in page, page
    assert breakdown.line(wide["profile"]["breakdown"]) in page
    assert ("its step breakdown: 'ms' holds int -1; accepted: number in \\[0, 1000000000.0\\]; "
            "left out") in page  # (Markdown escapes the brackets)
