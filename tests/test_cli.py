"""`python app/main.py` as a user runs it: real processes, both backends, every error path."""

import json
import os

import pytest
from conftest import error_lines, run_cli, tiny_flags
from processes import snapshot


@pytest.fixture(scope="module")
def existing_run(digits_dir, tmp_path_factory):
    """A finished tiny run whose folder the bad commands must leave untouched."""
    logdir = str(tmp_path_factory.mktemp("existing") / "run")
    done = run_cli(*tiny_flags(digits_dir, logdir, "--epochs=1"))
    assert done.returncode == 0, done.stderr[-3000:]
    return logdir


@pytest.mark.slow
def test_default_job_learns_the_digits_and_prices_the_target(digits_dir, tmp_path):
    """The README's default job (all defaults but the folders), with a 0.9 target."""
    logdir = tmp_path / "default"
    done = run_cli(f"--data_dir={digits_dir}", f"--logdir={logdir}", "--target_top1=0.9")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["best_val_top1"] >= 0.97
    target = summary["targets"][0]
    assert target["reached"] and 1 <= target["epoch"] <= summary["epochs_completed"]
    assert 0 < target["cost_usd"] <= summary["cost_usd"]
    expected = summary["price_per_hour_usd"] * summary["billed_seconds"] / 3600
    assert summary["cost_usd"] == pytest.approx(expected, rel=0.02)
    # Billed time covers the whole process, start-up included.
    assert summary["billed_seconds"] >= summary["wall_seconds"] * 0.98
    assert "throughput:" in done.stdout and "top-1:" in done.stdout and "cost: $" in done.stdout
    assert f"-m tensorboard.main --logdir {logdir}" in done.stdout  # works as printed


@pytest.mark.parametrize("backend, strategy", [("tensorflow", "MirroredStrategy"),
                                               ("jax", "DataParallel")])
def test_two_replicas_on_cpu(digits_dir, tmp_path, backend, strategy):
    logdir = tmp_path / backend
    done = run_cli(*tiny_flags(digits_dir, logdir, f"--backend={backend}", "--num_devices=2",
                               "--global_batch_size=32"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["backend"] == backend and summary["strategy"] == strategy
    assert summary["num_replicas"] == 2 and summary["per_replica_batch_size"] == 16
    assert summary["epochs_completed"] == 2 and summary["val_top1"] is not None
    assert "replicas=2" in done.stdout
    # Two logical devices of one CPU host are one machine on the bill.
    assert summary["machines"] == 1 and summary["price_per_hour_usd"] == 0.194236


def test_jax_synthetic_run_never_imports_tensorflow(tmp_path):
    logdir = tmp_path / "jax-synthetic"
    done = run_cli("--backend=jax", "--dataset=synthetic", "--image_size=32",
                   "--global_batch_size=8", "--epochs=1", "--steps_per_epoch=8",
                   "--validation_steps=2", "--steps_per_execution=2", "--verbose=0",
                   f"--logdir={logdir}",
                   env={"PYTHONPATH": os.path.join(os.path.dirname(__file__), "no_tensorflow")})
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["backend"] == "jax" and summary["dataset"] == "synthetic"
    assert "tensorflow" not in summary["versions"] and summary["versions"]["jax"]
    assert summary["images_per_sec"] > 0
    # One window for the rate and the step time; the wall clock counts evaluation too.
    assert summary["step_time_ms"] == pytest.approx(8e3 / summary["images_per_sec"], rel=1e-3)
    assert 0 < summary["images_per_sec_wall"] < summary["images_per_sec"]
    with open(logdir / "metrics.jsonl") as f:
        assert json.loads(f.readline())["images_per_sec_wall"] > 0


def bad_cases(tmp):
    """(flags, the message expected). Flag mistakes are caught before anything runs;
    the rest once the devices, folders or data are looked at."""
    blocker = os.path.join(tmp, "a_file")
    empty = os.path.join(tmp, "empty_folder")
    not_a_run = os.path.join(tmp, "not_a_run")
    return [
        (["--global_batch_size=0"], "--global_batch_size=0 must be a positive integer"),
        (["--global_batch_size=63", "--num_devices=2", "NEW"], "not divisible by the 2 replicas"),
        (["--model=resnet9000"], "--model='resnet9000' is unknown; accepted: small_resnet"),
        (["--dataset=cifar10"], "--dataset='cifar10' is unknown"),
        (["--epochs=-1"], "--epochs=-1 must be at least 1"),
        (["--steps_per_execution=-1"], "--steps_per_execution=-1 must be >= 0 (0 = auto)"),
        (["--steps_per_epoch=10", "--steps_per_execution=4"], "not a multiple of"),
        (["--image_size=3"], "--image_size=3 is out of range"),
        (["--target_top1=2"], "--target_top1 has 2.0"),
        (["--target_top1=high"], "--target_top1 has 'high'"),
        (["--machine=nope"], "--machine='nope' is not in the price catalog"),
        (["--machine=aws-p3.8xlarge", "--pricing=spot"], "--pricing=spot has no price for "
         "--machine=aws-p3.8xlarge in the catalog; accepted: on_demand, or --price_per_hour_usd"),
        (["--profile_steps=5,2"], "need 1 <= START <= STOP"),
        (["--seed=-5"], "--seed=-5 is out of range"),
        (["--label_smoothing=1.5"], "--label_smoothing=1.5 must be in [0, 1)"),
        (["--num_processes=2"], "multi-host training needs --backend=jax"),
        (["--num_processes=2", "--backend=jax"], "needs HOST:PORT of process 0"),
        (["--sweep_batch_sizes=8,x", "--dataset=synthetic"], "--sweep_batch_sizes has 'x'"),
        (["--benchmark=input", "--dataset=synthetic"], "--dataset=synthetic has none"),
        (["surplus"], "unexpected argument(s) 'surplus'"),
        # Found when folders, devices and data are looked at (still before any write).
        ([f"--logdir={blocker}/run"], "cannot be created or written"),
        ([f"--logdir={blocker}"], "is a file"),
        ([f"--logdir={not_a_run}"], "is not a run folder"),
        (["--epochs=9"], "holds a run with another config (--epochs=1->9)"),
        ([f"--data_dir={blocker}/data", "NEW"], "cannot be created or written"),
        ([f"--dataset=folder:{tmp}/missing", "NEW"], "is not a folder"),
        ([f"--dataset=folder:{empty}", "NEW"], "has no label folders"),
        (["--accelerator=gpu", "NEW"], "--accelerator=gpu but this host has no GPU"),
        # The CPU's row sells on-demand only: refused as the named row is, not "unknown".
        (["--pricing=spot", "NEW"], "--pricing=spot has no price for --machine=auto (catalog "
         "row gcp-n2-standard-4, for 'cpu') in the catalog; accepted: on_demand, or "
         "--price_per_hour_usd"),
        (["--accelerator=tpu", "NEW"], "--accelerator=tpu --tpu=local: no TPU reachable"),
        (["--validation_steps=-7"], "--validation_steps=-7 must be >= -1"),
        (["--backend=jax", "--accelerator=gpu", "NEW"], "--accelerator=gpu but this host has no GPU"),
        (["--backend=jax", "--accelerator=tpu", "NEW"],
         "--accelerator=tpu but no TPU device is visible"),
        (["--global_batch_size=4096", "--steps_per_epoch=0", "NEW"],
         "more than the 1437 training images"),
    ]


def test_every_bad_input_is_one_line_a_nonzero_exit_and_touches_nothing(
        digits_dir, existing_run, tmp_path):
    """Each mistake: exit 2, one "error:" line naming the value, no traceback; the
    existing run folder is byte-for-byte unchanged and no new folder appears."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "empty_folder" / "train").mkdir(parents=True)
    (tmp_path / "not_a_run").mkdir()
    (tmp_path / "not_a_run" / "notes.txt").write_text("mine")
    before = snapshot(existing_run)
    failures = []
    for index, (args, message) in enumerate(bad_cases(str(tmp_path))):
        new = tmp_path / f"new-{index}"
        if "NEW" in args:  # a fresh folder, which must not be created
            args = [a for a in args if a != "NEW"] + [f"--logdir={new}"]
        elif not any(a.startswith("--logdir") for a in args):
            args = args + [f"--logdir={existing_run}"]
        done = run_cli(*tiny_flags(digits_dir, existing_run, "--epochs=1"), *args)
        errors = error_lines(done.stderr)
        if (done.returncode != 2 or len(errors) != 1 or message not in errors[0]
                or "Traceback" in done.stderr or new.exists()):
            failures.append((args, done.returncode, errors, done.stderr[-600:]))
    assert not failures, failures
    assert len(bad_cases(str(tmp_path))) >= 25
    assert snapshot(existing_run) == before
    assert (tmp_path / "not_a_run" / "notes.txt").read_text() == "mine"


def test_a_different_config_in_an_existing_run_folder_is_refused(digits_dir, existing_run):
    before = snapshot(existing_run)
    done = run_cli(*tiny_flags(digits_dir, existing_run, "--epochs=5"))
    assert done.returncode == 2
    assert "holds a run with another config (--epochs=1->5)" in error_lines(done.stderr)[0]
    assert snapshot(existing_run) == before


def test_absl_flag_errors_name_the_flag_and_exit_nonzero():
    done = run_cli("--accelerator=xpu")
    assert done.returncode != 0
    assert "--accelerator" in done.stderr and "cpu|gpu|tpu" in done.stderr
    assert "Traceback" not in done.stderr


def test_helpfull_and_flagfile_work_as_absl_users_expect(tmp_path, digits_dir):
    done = run_cli("--helpfull")  # absl prints the help and exits with its own code
    assert "--global_batch_size" in done.stdout and "Images per step" in done.stdout
    assert "--price_per_hour_usd" in done.stdout
    flagfile = tmp_path / "run.flags"
    flagfile.write_text("\n".join(tiny_flags(digits_dir, tmp_path / "ff", "--epochs=1")))
    done = run_cli(f"--flagfile={flagfile}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "ff" / "config.json").read_text())["epochs"] == 1


def test_a_run_folder_that_cannot_be_made_is_one_line_and_exit_2(digits_dir):
    """As root /proc looks writable, so the preflight passes; making the folder fails."""
    done = run_cli(*tiny_flags(digits_dir, "/proc/forbidden/run", "--epochs=1"))
    errors = error_lines(done.stderr)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(errors) == 1 and "--logdir=/proc/forbidden/run cannot be created" in errors[0]
    assert "Traceback" not in done.stderr


def _cache_entries(folder) -> set:
    return {name for _, _, names in os.walk(folder) for name in names}


def test_jax_keeps_compiled_programs_so_a_second_run_compiles_nothing(digits_dir, tmp_path):
    """With no JAX_COMPILATION_CACHE_DIR, the JAX path caches every compiled program under
    ~/.cache (XDG_CACHE_HOME here): the first run fills it, the same run again finds every
    program there (it adds no entry), the summary names the folder; an empty
    JAX_COMPILATION_CACHE_DIR turns it off, and one that cannot be made is not named. The
    training FLOPs are kept beside the programs."""
    import subprocess
    import sys

    from conftest import PATIENCE_SECONDS, ROOT

    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                        "KERAS_BACKEND")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "home-cache")
    folder = tmp_path / "home-cache" / "keras-accelerator-bench" / "xla"

    def run(name, **extra):
        logdir = tmp_path / name
        done = subprocess.run(
            [sys.executable, os.path.join(ROOT, "app", "main.py"),
             *tiny_flags(digits_dir, logdir, "--backend=jax", "--epochs=1", "--seed=3")],
            capture_output=True, text=True, timeout=PATIENCE_SECONDS, cwd=ROOT,
            env={**env, **extra})
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads((logdir / "summary.json").read_text())

    first = run("first")
    filled = _cache_entries(folder)
    assert first["compilation_cache_dir"] == str(folder) and len(filled) >= 5
    second = run("second")
    assert second["compilation_cache_dir"] == str(folder)
    assert _cache_entries(folder) == filled  # every program was found, none compiled anew
    # the training FLOPs too: counted once, read back the second time, the same figure
    assert len(os.listdir(folder / "app-train-flops")) == 1
    assert second["train_gflops_per_image"] == first["train_gflops_per_image"] > 0
    off = run("off", JAX_COMPILATION_CACHE_DIR="")
    assert off["compilation_cache_dir"] is None and _cache_entries(folder) == filled
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a cache folder that cannot be made: none is named
    assert run("blocked", XDG_CACHE_HOME=str(blocked))["compilation_cache_dir"] is None
