"""The throughput sweep on CPU, tiny: sizes, table, JSON, plot and TensorBoard made."""

import json
import os
import signal
import time

import pytest
from conftest import error_lines, run_cli
from processes import run, snapshot, start, strict_json
from tensorboard_server import hparams_sessions

from app.models import memory
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
    # every point records its machine, as a training run does; the summary what they share
    for row in rows.values():
        assert row["machine_state"]["device_kind"] == "cpu"
        assert row["machine_state"]["not_sampled"] == "a CPU run: no accelerator to sample"
        assert row["machine_state"]["software"]["jax"]
    assert result["machine_state"]["host"] == rows[4]["machine_state"]["host"]
    assert result["machine_state"]["timed_window"] is None
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


def _until(process, prefix, containing="") -> str:
    """Reads the process's stdout up to the first line starting with `prefix` that holds
    `containing` (a point's result line, " images/sec", not its progress lines)."""
    for line in process.stdout:
        if line.startswith(prefix) and containing in line:
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
    the model's build and the warm-up fit's compile have none: at most their length),
    keeps the finished point, and the rerun measures only what is left; a
    finished sweep's rerun says it is complete and measures nothing."""
    logdir = tmp_path / "sweep"
    args = ["--model=small_resnet", "--dataset=synthetic", "--image_size=16",
            "--sweep_batch_sizes=8,16,32", "--steps_per_epoch=40", f"--logdir={logdir}"]

    def rows():
        return {r["global_batch_size"]: r for r in strict_json(logdir / "sweep.json")["sweep"]}

    first = start(args)
    _until(first, "[sweep] global batch 8:", " images/sec")
    time.sleep(0.2)
    seconds, line = _interrupted(first)
    assert seconds < 20, (seconds, line)
    # one honest line: where it stopped, what is done, the one command that resumes
    said, resume = line.split("; resume with: ")
    assert said == ("error: preempted (SIGINT) at point 2 of 3 (global_batch_size=16); "
                    f"1 of 3 points done, kept in {logdir}/sweep.json"), line
    assert resume.endswith(" ".join(args)) and "app/main.py" in resume, line
    kept = rows()
    assert list(kept) == [8] and kept[8]["status"] == "ok"
    assert strict_json(logdir / "sweep.json")["sizes_left"] == [16, 32]

    second = start(args)
    assert ("1 of 3 points measured before (global_batch_size=8)"
            in _until(second, "[sweep] resuming:"))
    _until(second, "[sweep] small_resnet")  # the model is built: size 16 is next
    time.sleep(2)
    seconds, line = _interrupted(second)
    assert seconds < 20 and "at point 2 of 3 (global_batch_size=16); 1 of 3 points done" \
        in line, (seconds, line)
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


# ----------------------------------------------------------- --sweep=FLAG=v1,v2 grids
NO_TF = os.path.join(os.path.dirname(__file__), "no_tensorflow")
GRID = ["--model=small_resnet", "--dataset=synthetic", "--image_size=8",
        "--sweep=precision=float32,mixed_bfloat16", "--sweep=global_batch_size=16,8",
        "--steps_per_epoch=4"]
GRID_POINTS = [{"precision": p, "global_batch_size": b}
               for p in ("float32", "mixed_bfloat16") for b in (8, 16)]


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_2x2_grid_yields_4_points_in_sweep_json_and_in_hparams(tmp_path, backend):
    logdir = tmp_path / "grid"
    # the JAX path imports no TensorFlow (it stands in for an H200 host without it)
    done = run_cli(f"--backend={backend}", *GRID, f"--logdir={logdir}",
                   env={"PYTHONPATH": NO_TF} if backend == "jax" else None)
    assert done.returncode == 0, done.stderr[-3000:]
    result = strict_json(logdir / "sweep.json")
    assert result["axes"] == {"precision": ["float32", "mixed_bfloat16"],
                              "global_batch_size": [8, 16]}  # the batch axis ascending
    assert [r["settings"] for r in result["sweep"]] == GRID_POINTS
    for row in result["sweep"]:
        assert row["status"] == "ok" and row["images_per_sec"] > 0
        assert row["precision"] == row["settings"]["precision"]
        assert row["global_batch_size"] == row["settings"]["global_batch_size"]
        assert row["steps_per_execution"] == 1 and row["image_size"] == 8
    assert result["points_left"] == [] and result["status"] == "completed"
    sessions = hparams_sessions(logdir)
    assert len(sessions) == 4
    for row in result["sweep"]:
        values, metrics = sessions[f"points/{row['point']}"]
        assert values["precision"] == row["precision"]
        assert int(values["global_batch_size"]) == row["global_batch_size"]  # text, "  8"
        assert values["status"] == "ok"
        assert values["backend"] == backend and values["model"] == "small_resnet"
        assert metrics["run/images_per_sec"] == pytest.approx(row["images_per_sec"])
        assert metrics["run/step_time_ms"] == pytest.approx(row["step_time_ms"])
    for axis in ("precision", "global_batch_size"):
        assert (logdir / f"sweep-{axis}.png").read_bytes()[:4] == b"\x89PNG"
    assert "     precision global batch per device  images/sec" in done.stdout


@pytest.mark.slow
def test_ctrl_c_after_the_first_point_keeps_it_and_the_rerun_measures_the_other_3(tmp_path):
    logdir = tmp_path / "grid"
    args = ["--backend=jax", *GRID, f"--logdir={logdir}"]
    first = start(args)
    _until(first, "[sweep] precision float32, global batch 8:", " images/sec")
    seconds, line = _interrupted(first)
    assert "at point 2 of 4 (" in line and "1 of 4 points done, kept" in line, line
    assert line.count("resume") == 1 and seconds < 20, (seconds, line)
    kept = strict_json(logdir / "sweep.json")
    assert [r["settings"] for r in kept["sweep"]] == GRID_POINTS[:1]
    assert len(kept["points_left"]) == 3

    done = run(args)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = [line for line in done.stdout.splitlines()
                if line.startswith("[sweep] precision") and " images/sec" in line]
    assert measured and len(measured) == 3 and "float32, global batch 8:" not in measured[0]
    final = strict_json(logdir / "sweep.json")
    assert [r["settings"] for r in final["sweep"]] == GRID_POINTS
    assert final["sweep"][0] == kept["sweep"][0]  # kept as it was
    assert len(hparams_sessions(logdir)) == 4

    before = snapshot(logdir)
    again = run(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"sweep is complete: {logdir} holds its sweep.json" in again.stdout
    assert "[sweep] precision" not in again.stdout  # nothing measured
    assert "global batch per device  images/sec" in again.stdout
    assert snapshot(logdir) == before


def test_a_point_that_cannot_run_is_recorded_and_the_rest_go_on(tmp_path):
    """Not divisible over 2 replicas, and a batch the host's memory refuses (the check
    a plain run gets): both rows, with why; the sizes between are measured."""
    logdir = tmp_path / "sweep"
    huge = 10**9  # 10^9 images of 8x8x3 float32: 768 GB
    done = run_cli("--backend=jax", "--num_devices=2", "--model=small_resnet",
                   "--dataset=synthetic", "--image_size=8",
                   f"--sweep=global_batch_size=5,{huge},4", "--steps_per_epoch=4",
                   f"--logdir={logdir}")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["settings"]["global_batch_size"]: r for r in strict_json(
        logdir / "sweep.json")["sweep"]}
    assert list(rows) == [4, 5, huge]
    assert rows[4]["status"] == "ok"
    assert rows[5]["status"] == "skipped: not divisible by 2 replicas"
    assert rows[huge]["status"].startswith("skipped: one batch of 1,000,000,000 images")
    assert "more than this host's" in rows[huge]["status"]


@pytest.mark.parametrize("axis, message", [
    ("precsion=float32", "--sweep=precsion=float32: --precsion is not a flag; accepted: "
                         "precision, global_batch_size"),
    ("dataset=digits,synthetic", "--dataset changes what the job is (its data, length, "
                                 "recipe or outcome), not how fast it runs; accepted: "
                                 "precision,"),
    ("seed=1,2", "--seed changes what the job is"),
    ("epochs=1,2", "--epochs changes what the job is"),
    ("precision=", "expected FLAG=v1,v2,... with no empty value"),
    ("precision", "expected FLAG=v1,v2,... with no empty value"),
    ("precision=float32,,mixed_bfloat16", "with no empty value"),
    ("precision=float64", "--sweep=precision=float64: --precision='float64' is unknown; "
                          "accepted: auto, float32"),
    ("global_batch_size=0", "--sweep=global_batch_size=0: --global_batch_size=0 must be"),
    ("global_batch_size=big", "'big' is not a number; accepted: integers"),
    ("global_batch_size=8,8", "a value is given twice"),
    ("model=vit_ti16", "--model=vit_ti16 cuts images into 16x16 patches"),
    ("backend=jax,tensorflow", "--backend is fixed for the whole process"),
    ("input_pipeline=grain,device", "--sweep=input_pipeline=grain,device: "
                                    "--dataset=synthetic has no input pipeline to vary"),
])
def test_a_bad_axis_is_one_line_before_anything_runs(tmp_path, axis, message):
    logdir = tmp_path / "never"
    done = run_cli("--dataset=synthetic", "--image_size=8", f"--sweep={axis}",
                   f"--logdir={logdir}")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = error_lines(done.stderr)
    assert message in line, line
    assert not logdir.exists()


@pytest.mark.parametrize("args, message", [
    (["--sweep=global_batch_size=8", "--sweep=global_batch_size=16"], "names --global_batch_"
                                                                      "size twice"),
    (["--sweep=global_batch_size=8", "--sweep_batch_sizes=16"], "names --global_batch_size "
                                                                "twice"),
    (["--sweep=precision=float32", "--benchmark=ladder"], "two modes"),
])
def test_the_same_flag_twice_or_two_modes_is_one_line(tmp_path, args, message):
    done = run_cli("--dataset=synthetic", *args, f"--logdir={tmp_path / 'never'}")
    assert done.returncode == 2 and message in error_lines(done.stderr)[0], done.stderr[-2000:]


def test_a_model_value_that_cannot_be_built_is_one_line_before_anything_is_written(tmp_path):
    done = run_cli("--backend=jax", "--dataset=synthetic", "--image_size=8",
                   "--sweep=model=small_resnet,nowhere.py:make_model",
                   f"--logdir={tmp_path / 'never'}", env={"PYTHONPATH": NO_TF})
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = error_lines(done.stderr)
    assert line.startswith("error: --sweep=model=nowhere.py:make_model: "), line
    assert not (tmp_path / "never").exists()


def test_an_input_pipeline_axis_on_digits_yields_its_points_in_sweep_json_and_hparams(
        tmp_path):
    """On a real dataset each point reads it through its own pipeline: device (held in
    the device's memory) and grain (decoded on the host), both measured; the row
    says which pipeline fed it, and TensorBoard's HParams table has both."""
    logdir = tmp_path / "pipelines"
    done = run_cli("--backend=jax", "--model=small_resnet", "--dataset=digits",
                   "--image_size=8", "--global_batch_size=16", "--steps_per_epoch=4",
                   "--sweep=input_pipeline=device,grain", f"--logdir={logdir}",
                   env={"PYTHONPATH": NO_TF})  # neither pipeline needs TensorFlow on JAX
    assert done.returncode == 0, done.stderr[-3000:]
    result = strict_json(logdir / "sweep.json")
    assert result["dataset"] == "digits" and result["image_size"] == 8
    assert result["axes"] == {"input_pipeline": ["device", "grain"]}
    rows = result["sweep"]
    assert [r["settings"] for r in rows] == [{"input_pipeline": "device"},
                                             {"input_pipeline": "grain"}]
    for row in rows:
        assert row["status"] == "ok" and row["images_per_sec"] > 0, row
        assert row["input_pipeline"] == row["settings"]["input_pipeline"]  # what fed it
        assert row["image_size"] == 8 and row["global_batch_size"] == 16
    assert "held in host memory" in done.stdout  # the device pipeline's line (a CPU)
    sessions = hparams_sessions(logdir)
    assert len(sessions) == 2
    for row in rows:
        values, metrics = sessions[f"points/{row['point']}"]
        assert values["input_pipeline"] == row["input_pipeline"]
        assert values["dataset"] == "digits" and values["backend"] == "jax"
        assert metrics["run/images_per_sec"] == pytest.approx(row["images_per_sec"])
    assert (logdir / "sweep-input_pipeline.png").read_bytes()[:4] == b"\x89PNG"


def test_a_pipeline_that_cannot_apply_here_is_a_point_that_did_not_run_with_why(tmp_path):
    """--input_pipeline=gpu on a CPU: a plain run refuses it; the sweep records the
    point as skipped with that reason (an unknown pipeline is refused up front)."""
    logdir = tmp_path / "gpu"
    done = run_cli("--backend=jax", "--dataset=digits", "--image_size=8",
                   "--sweep=input_pipeline=gpu", f"--logdir={logdir}",
                   env={"PYTHONPATH": NO_TF})
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = strict_json(logdir / "sweep.json")["sweep"]
    assert row["status"].startswith("skipped: --input_pipeline=gpu decodes JPEGs on the GPU"
                                    " through JAX; it needs --backend=jax --accelerator=gpu")
    unknown = run_cli("--dataset=digits", "--sweep=input_pipeline=fast",
                      f"--logdir={tmp_path / 'never'}")
    assert unknown.returncode == 2
    (line,) = error_lines(unknown.stderr)
    assert "--input_pipeline='fast' is unknown; accepted: auto, tf.data, grain" in line, line
    assert not (tmp_path / "never").exists()


def test_a_points_images_per_sec_is_what_a_plain_run_of_its_settings_reports(tmp_path):
    """A model whose step sleeps 50 ms (tests/sleepy_model.py): the sweep's point at
    batch 8, measured in one process with another point, against a plain run of batch
    8 in a process of its own: the same within 15% (their windows differ by a step or
    two; the step's time is fixed); batch 16's point is about twice as fast."""
    model = "--model=tests/sleepy_model.py:make_model"
    common = ["--backend=jax", model, "--dataset=synthetic", "--image_size=8",
              "--steps_per_epoch=10"]
    plain = run_cli(*common, "--global_batch_size=8", "--epochs=1", "--verbose=0",
                    f"--logdir={tmp_path / 'plain'}")
    assert plain.returncode == 0, plain.stderr[-2000:]
    swept = run_cli(*common, "--sweep=global_batch_size=8,16", f"--logdir={tmp_path / 's'}")
    assert swept.returncode == 0, swept.stderr[-2000:]
    expected = strict_json(tmp_path / "plain" / "summary.json")["images_per_sec"]
    rows = {r["global_batch_size"]: r for r in strict_json(tmp_path / "s" / "sweep.json")["sweep"]}
    assert rows[8]["images_per_sec"] == pytest.approx(expected, rel=0.15)
    assert 8 / 0.05 * 0.7 < expected < 8 / 0.05  # the sleep is the step
    assert rows[16]["images_per_sec"] == pytest.approx(2 * rows[8]["images_per_sec"], rel=0.25)


def test_a_points_xla_autotuning_is_its_compile_option_and_only_in_its_block():
    """jax.jit's compiler_options carry a point's choice (XLA_FLAGS are read once per
    process); XLA accepts the option's name; outside the block Keras compiles as before."""
    import jax.numpy as jnp
    from keras.src.backend.jax import trainer

    from app.engine import autotune

    plain = trainer.jit
    with autotune.compiled_with("heuristic"):
        assert trainer.jit.keywords == {"compiler_options": {autotune.OPTION: True}}
        assert float(trainer.jit(lambda x: x * 2)(jnp.ones(2)).sum()) == 4.0
    assert trainer.jit is plain
    with autotune.compiled_with(None):  # no GPU kernels to pick: nothing changes
        assert trainer.jit is plain
    assert autotune.OPTION in autotune.HEURISTIC_FLAG
