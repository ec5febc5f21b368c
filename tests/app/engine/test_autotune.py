"""--xla_autotune (app/engine/autotune.py): which runs XLA autotunes, which take the
libraries' first deterministic kernels, and that the choice reaches XLA before JAX
starts; the dataset checks that tell it how many images a run plans to see."""

import os

import pytest

from app.engine import autotune
from conftest import run_python
from flags import Config, ConfigError
from fashion_files import DEBIAN, write_fashion

GPU_JAX = dict(accelerator="gpu", backend="jax", logdir="x")


@pytest.mark.parametrize("changes, examples, expected", [
    ({}, 60_000, "heuristic"),  # the small ResNet, 15 epochs of Fashion-MNIST: 0.9 M images
    ({"model": "resnet50"}, 60_000, "heuristic"),
    ({"epochs": 34}, 60_000, "measured"),  # 2.04 M images: autotuning pays
    ({"model": "resnet50", "dataset": "imagenet2012"}, 1_281_167, "measured"),
    ({"steps_per_epoch": 100, "global_batch_size": 256}, None, "heuristic"),  # 0.38 M
    ({"steps_per_epoch": 1000, "global_batch_size": 256}, None, "measured"),  # 3.84 M
    ({}, None, "measured"),  # the size is unknown
    ({"model": "resnet50", "dataset": "synthetic"}, None, "measured"),  # measuring speed
    # the benchmark modes compile one program inside fit: XLA's own autotuning
    ({"model": "resnet50", "dataset": "synthetic", "sweep_batch_sizes": (64,)}, None, "full"),
    ({"benchmark": "input"}, 60_000, "full"),
    ({"benchmark": "probe"}, 60_000, "full"),
    ({"model": "vit_s16"}, 60_000, "measured"),  # measured on the ResNets only
    ({"model": "applications:ConvNeXtTiny"}, 60_000, "measured"),  # may hold select-and-scatter
    ({"xla_autotune": "full"}, 60_000, "full"),
    ({"xla_autotune": "heuristic", "model": "applications:ConvNeXtTiny"}, 10**9, "heuristic"),
    ({"accelerator": "cpu"}, 60_000, None),  # no GPU kernels to pick
    ({"backend": "tensorflow"}, 60_000, None),
    ({"accelerator": "tpu"}, 60_000, None),
])
def test_auto_autotunes_unless_a_short_run_trains_the_apps_resnets(changes, examples,
                                                                    expected, monkeypatch):
    """auto: the measured choice (XLA's autotuned step against its heuristic one) where it
    took XLA's full autotuning before; a user's full or heuristic is theirs."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert autotune.choose(Config(**{**GPU_JAX, **changes}), examples) == expected


def test_the_heuristic_is_refused_for_the_vits_on_a_gpu_in_one_line(tmp_path):
    """XLA's heuristic program of the ViTs' cuDNN fused attention compiled, then raised
    when it ran (ViT-B/16 on an H100, 2026-12-07): refused before anything is built, on
    the GPU only (elsewhere the setting picks no kernels)."""
    from conftest import error_lines, run_cli

    with pytest.raises(ConfigError, match="cannot train the built-in ViTs on a GPU"):
        Config(**GPU_JAX, model="vit_b16", xla_autotune="heuristic")
    for other in ({"xla_autotune": "full"}, {"accelerator": "cpu"},
                  {"model": "applications:ConvNeXtTiny"}):
        Config(**{**GPU_JAX, "model": "vit_b16", "xla_autotune": "heuristic", **other})
    logdir = tmp_path / "never"
    done = run_cli("--backend=jax", "--accelerator=gpu", "--model=vit_b16",
                   "--xla_autotune=heuristic", f"--logdir={logdir}")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "accepted with them: auto (the default: measured) or full" \
        in lines[0], done.stderr[-2000:]
    assert not logdir.exists()


def test_a_users_own_xla_flag_stands_and_is_reported(monkeypatch):
    for flag in ("--xla_gpu_autotune_level=1", "--xla_gpu_deterministic_ops=true"):
        monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to=/tmp/x {flag}")
        config = Config(**GPU_JAX, xla_autotune="heuristic")
        assert autotune.choose(config, 60_000) == "xla_flags"
        autotune.apply("xla_flags")
        assert os.environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {flag}"


def test_heuristic_adds_xlas_flag_to_the_users_others(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    autotune.apply("heuristic")
    assert os.environ["XLA_FLAGS"] == ("--xla_dump_to=/tmp/x "
                                       "--xla_gpu_exclude_nondeterministic_ops=true")
    monkeypatch.delenv("XLA_FLAGS")
    autotune.apply("full")
    assert "XLA_FLAGS" not in os.environ


def test_an_unknown_mode_is_one_line():
    with pytest.raises(ConfigError) as error:
        Config(logdir="x", xla_autotune="fast")
    assert str(error.value) == ("--xla_autotune='fast' is unknown; accepted: auto, full, "
                                "heuristic")


def test_the_checks_count_the_training_images(digits_dir, tmp_path):
    """What the rule is told, against each dataset's own count once built."""
    from preprocessing.datasets import check_dataset
    from preprocessing.datasets.folder import list_split
    from preprocessing.spec import InputSpec

    write_fashion(tmp_path / "fashion", train=96)
    assert check_dataset("fashion_mnist", InputSpec(str(tmp_path / "fashion"), 0)) == 96
    write_fashion(tmp_path / "plain", train=40, gzipped=False)
    assert check_dataset("fashion_mnist", InputSpec(str(tmp_path / "plain"), 0)) == 40
    if os.path.isdir(DEBIAN):  # Debian's real files (.ci/run installs them)
        assert check_dataset("fashion_mnist", InputSpec(str(tmp_path / "none"), 0)) == 60_000
    root = os.path.join(digits_dir, "digits")
    assert check_dataset("digits", InputSpec(digits_dir, 0)) == 1437
    assert check_dataset(f"folder:{root}", InputSpec(digits_dir, 0)) == len(
        list_split(root, "train")[0])
    assert check_dataset("synthetic", InputSpec(digits_dir, 0)) is None


CHOSEN_BEFORE_JAX = """
import json, os, sys
from flags import Config
from app.run import context
config = Config(accelerator="gpu", backend="jax", dataset="fashion_mnist",
                data_dir=sys.argv[1], logdir=sys.argv[2])
try:
    context.prepare(config, 0.0)
    error = None
except Exception as raised:  # this host has no GPU: the device check says so after
    error = type(raised).__name__
print(json.dumps({"xla_flags": os.environ.get("XLA_FLAGS", ""), "error": error,
                  "jax_backend_started": "jax" in sys.modules and __import__("jax")._src
                  .xla_bridge._backends != {}}))
"""


def test_the_choice_is_in_xla_flags_before_jax_starts(tmp_path):
    write_fashion(tmp_path / "fashion", train=96)
    code = CHOSEN_BEFORE_JAX.replace("sys.argv[1]", repr(str(tmp_path / "fashion"))).replace(
        "sys.argv[2]", repr(str(tmp_path / "run")))
    result = run_python(code, {"XLA_FLAGS": "--xla_dump_to=/tmp/x", "CUDA_VISIBLE_DEVICES": ""})
    flags = result["xla_flags"].split()
    assert flags[0] == "--xla_dump_to=/tmp/x" and flags.count(autotune.HEURISTIC_FLAG) == 1
    assert result["error"] == "TopologyError" and not result["jax_backend_started"]


def test_kernels_loaded_and_kept_reach_xla_flags_and_a_users_own_stands(tmp_path, monkeypatch):
    """--kernels_from and --keep_kernels become XLA's load and dump flags (absolute
    paths, the run folder's for the dump), before JAX starts; a kept run turns off the
    per-fusion autotune cache JAX keeps, so the file is all this run's autotuning."""
    dumped = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures",
                          "autotune_h100_head.textproto")
    # setenv first: monkeypatch then restores each variable as it was before the test
    # (delenv of an absent one records nothing, and the flags set below outlived the
    # test: a later run in this process loaded the fixture's kernels).
    for name in ("XLA_FLAGS", "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    config = Config(backend="jax", kernels_from=dumped, keep_kernels=True, logdir="x")
    done = autotune.set_kernel_flags(config, str(tmp_path / "run"))
    kept = str(tmp_path / "run" / "kernels" / "autotune.textproto")
    assert done == {"loaded_from": os.path.abspath(dumped), "kept_to": kept}
    assert os.environ["XLA_FLAGS"].split() == [
        f"--xla_gpu_load_autotune_results_from={os.path.abspath(dumped)}",
        f"--xla_gpu_dump_autotune_results_to={kept}"]
    assert os.environ["JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"] == "none"
    # XLA writes the file into a folder it does not make (a GPU run's first compile
    # failed NOT_FOUND without it): the folder is there before JAX starts
    assert os.path.isdir(os.path.dirname(kept))
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_load_autotune_results_from=/mine.pb")
    assert autotune.set_kernel_flags(config, "run")["loaded_from"] is None  # theirs stands
    assert os.environ["XLA_FLAGS"].startswith("--xla_gpu_load_autotune_results_from=/mine.pb ")
    monkeypatch.delenv("XLA_FLAGS")
    assert autotune.set_kernel_flags(Config(logdir="x"), "run") == {"loaded_from": None,
                                                                    "kept_to": None}
    assert "XLA_FLAGS" not in os.environ
