"""The frozen config: every check, and the values derived from the flags."""

import dataclasses

import pytest

from app.pricing import prices
from flags import FLAGS, Config, ConfigError, config_from_flags, define_flags

BAD = [
    ({"global_batch_size": 0}, "--global_batch_size=0"),
    ({"global_batch_size": -8}, "--global_batch_size=-8"),
    ({"epochs": -1}, "--epochs=-1"),
    ({"epochs": 0}, "--epochs=0"),
    ({"steps_per_epoch": -3}, "--steps_per_epoch=-3"),
    ({"steps_per_execution": -1}, "--steps_per_execution=-1"),
    ({"steps_per_epoch": 10, "steps_per_execution": 4}, "not a multiple"),
    ({"validation_steps": -2}, "--validation_steps=-2"),
    ({"num_devices": -1}, "--num_devices=-1"),
    ({"model": "resnet51"}, "--model='resnet51' is unknown"),
    ({"dataset": "cifar"}, "--dataset='cifar' is unknown"),
    ({"dataset": "tfds:"}, "--dataset='tfds:' is unknown"),
    ({"dataset": "tfds:MNIST!"}, "expected tfds:NAME"),
    ({"dataset": "folder:"}, "--dataset='folder:' is unknown"),
    ({"image_size": 4}, "--image_size=4"),
    ({"image_size": 4096}, "--image_size=4096"),
    ({"accelerator": "xpu"}, "--accelerator='xpu'"),
    ({"backend": "torch"}, "--backend='torch'"),
    ({"precision": "float8"}, "--precision='float8'"),
    ({"precision": "mixed_float16", "accelerator": "tpu"}, "not supported on TPU"),
    ({"base_learning_rate": 0.0}, "--base_learning_rate=0.0"),
    ({"momentum": 1.0}, "--momentum=1.0"),
    ({"weight_decay": -1e-4}, "--weight_decay=-0.0001"),
    ({"label_smoothing": 1.0}, "--label_smoothing=1.0"),
    ({"warmup_epochs": -1.0}, "--warmup_epochs=-1.0"),
    ({"num_processes": 0}, "--num_processes=0"),
    ({"num_processes": 2, "process_id": 2, "backend": "jax",
      "coordinator_address": "h:1"}, "--process_id=2"),
    ({"num_processes": 2, "backend": "tensorflow", "coordinator_address": "h:1"},
     "needs --backend=jax"),
    ({"num_processes": 2, "backend": "jax"}, "needs HOST:PORT"),
    ({"num_processes": 2, "backend": "jax", "coordinator_address": "nohost"}, "HOST:PORT"),
    ({"target_top1": [1.5]}, "--target_top1 has 1.5"),
    ({"target_top1": [0.0]}, "--target_top1 has 0.0"),
    ({"machine": "gcp-tpu-v9"}, "--machine='gcp-tpu-v9' is not in the price catalog"),
    ({"pricing": "reserved"}, "--pricing='reserved'"),
    ({"machine": "aws-p3.8xlarge", "pricing": "spot"}, "has no price for --machine"),
    ({"machine": "nvidia-l4"}, "in the catalog; accepted: --price_per_hour_usd"),
    ({"price_per_hour_usd": -1.0}, "--price_per_hour_usd=-1.0"),
    ({"peak_tflops_per_device": 0.0}, "--peak_tflops_per_device=0.0"),
    ({"profile_steps": "5"}, "expected START,STOP"),
    ({"profile_steps": "5,3"}, "need 1 <= START <= STOP"),
    ({"profile_steps": "0,3"}, "need 1 <= START <= STOP"),
    ({"checkpoint_every_steps": -5}, "--checkpoint_every_steps=-5"),
    ({"log_every_steps": 0}, "--log_every_steps=0"),
    ({"sweep_batch_sizes": [64, 0], "dataset": "synthetic"}, "--sweep_batch_sizes has 0"),
    ({"benchmark": "input", "dataset": "synthetic"}, "has none"),
    ({"seed": -1}, "--seed=-1"),
]


@pytest.mark.parametrize("values, message", BAD, ids=[m for _, m in BAD])
def test_bad_values_raise_one_line_naming_the_value(values, message):
    with pytest.raises(ConfigError) as error:
        # The price catalog is checked apart (app/pricing/prices.py), before anything runs.
        prices.check_config(Config(logdir="/tmp/unused", data_dir="/tmp/unused", **values))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_config_is_frozen_and_derives_values():
    config = Config(global_batch_size=1024, base_learning_rate=0.1, logdir="x", data_dir="d")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 3
    assert config.learning_rate == pytest.approx(0.4)
    assert config.policy == "float32"
    assert Config(accelerator="gpu", logdir="x").policy == "mixed_bfloat16"
    assert Config(accelerator="tpu", logdir="x").policy == "mixed_bfloat16"
    assert Config(precision="float32", accelerator="tpu", logdir="x").policy == "float32"
    assert Config(profile_steps="3,5", logdir="x").profile_range == (3, 5)
    assert config.manual_dir == "d/downloads/manual"


def test_default_logdir_names_the_run_by_its_settings():
    """The same settings name the same folder (rerunning resumes it); others do not."""
    config = Config(model="resnet50", dataset="synthetic", backend="jax")
    assert config.logdir.startswith("runs/resnet50-synthetic-jax-")
    assert Config(model="resnet50", dataset="synthetic", backend="jax",
                  verbose="2").logdir == config.logdir  # resumable fields do not count
    assert Config(model="resnet50", dataset="synthetic", backend="jax",
                  epochs=3).logdir != config.logdir
    assert Config(dataset="tfds:mnist:3.0.1").dataset_name == "mnist"
    assert Config(dataset="folder:/data/flowers/").dataset_name == "flowers"


def test_differences_ignore_fields_that_may_change_on_resume():
    config = Config(logdir="a", epochs=5)
    saved = config.to_dict()
    assert config.replace(logdir="b", verbose="2", profile_steps="1,2").differences(saved) == []
    assert config.replace(epochs=6).differences(saved) == ["epochs"]
    del saved["seed"], saved["verbose"]  # a config.json with settings deleted
    assert config.differences(saved) == ["seed"]


def test_flags_parse_into_the_same_config():
    define_flags()
    FLAGS.unparse_flags()
    FLAGS(["main", "--global_batch_size=128", "--target_top1=0.5,0.75",
           "--sweep_batch_sizes=8,16", "--dataset=synthetic", "--logdir=/tmp/x"])
    try:
        config = config_from_flags(FLAGS)
    finally:
        FLAGS.unparse_flags()
    assert config.global_batch_size == 128
    assert config.target_top1 == (0.5, 0.75)
    assert config.sweep_batch_sizes == (8, 16)
    assert config == Config(global_batch_size=128, target_top1=(0.5, 0.75),
                            sweep_batch_sizes=(8, 16), dataset="synthetic", logdir="/tmp/x")


def test_non_numeric_list_flags_are_one_line_errors():
    define_flags()
    FLAGS.unparse_flags()
    FLAGS(["main", "--target_top1=high"])
    try:
        with pytest.raises(ConfigError, match="--target_top1 has 'high'"):
            config_from_flags(FLAGS)
    finally:
        FLAGS.unparse_flags()


@pytest.mark.parametrize("name", ["imagenet_resnet50.flags", "h200_sweep.flags"])
def test_the_committed_flagfiles_are_valid_configs(name):
    import os

    from conftest import ROOT

    define_flags()
    FLAGS.unparse_flags()
    path = os.path.join(ROOT, "configs", name)
    FLAGS(["main", f"--flagfile={path}", "--logdir=/tmp/unused"])
    try:
        config = config_from_flags(FLAGS)
    finally:
        FLAGS.unparse_flags()
    assert config.model == "resnet50"


@pytest.mark.parametrize("name, accelerator, device", [
    ("h100.flags", "gpu", "H100"), ("h200.flags", "gpu", "H200"), ("cpu.flags", "cpu", "CPU")])
def test_each_machines_flagfile_is_a_valid_config_priced_as_its_device(name, accelerator,
                                                                       device):
    """configs/ holds one flagfile per machine the project measures on: its settings
    parse into a config, and the catalog row it names sells that device."""
    import os

    from conftest import ROOT

    from app.pricing.catalog import load_catalog

    define_flags()
    FLAGS.unparse_flags()
    FLAGS(["main", f"--flagfile={os.path.join(ROOT, 'configs', name)}", "--logdir=/tmp/unused"])
    try:
        config = config_from_flags(FLAGS)
    finally:
        FLAGS.unparse_flags()
    assert config.accelerator == accelerator
    assert device in load_catalog()[config.machine].device


SEEDING = """
import sys, numpy, keras
from app.run.context import set_random_seed
set_random_seed(keras, 1234)
first = (numpy.random.rand(), float(keras.random.uniform(())))
from keras.src.utils.rng_utils import get_random_seed
assert get_random_seed() == 1234
set_random_seed(keras, 1234)
assert (numpy.random.rand(), float(keras.random.uniform(()))) == first, first
from keras.src.utils import module_utils
print("tensorflow" in sys.modules, module_utils.tensorflow._available)
"""


def test_seeding_on_jax_leaves_tensorflow_unimported_and_still_seeds():
    """Keras's set_random_seed imports TensorFlow (installed here) to seed it; on the
    JAX path the app seeds Python, NumPy and Keras alone, and Keras may still ask
    for TensorFlow later (its lazy module is left undecided)."""
    import os
    import subprocess
    import sys

    from tests.conftest import PATIENCE_SECONDS, ROOT

    result = subprocess.run([sys.executable, "-c", SEEDING], capture_output=True, text=True,
                            cwd=ROOT, timeout=PATIENCE_SECONDS, check=False,
                            env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "None"]


@pytest.mark.parametrize("given, backend, pipeline, steps, expected", [
    (0, "jax", "device", 117, 13),  # Fashion-MNIST at 512: 117 = 9 x 13
    (0, "jax", "device", 64, 8),  # 16 would leave 4 calls an epoch: too few marks to time
    (0, "jax", "device", 256, 16),
    (0, "jax", "device", 4, 1),
    (0, "jax", "device", 97, 1),  # a prime: no divisor up to 16 but 1
    (0, "jax", "grain", 117, 1),  # the host feeds every step
    (0, "tensorflow", "device", 117, 1),
    (3, "jax", "grain", 117, 3),  # the flag's own value wins
])
def test_auto_steps_per_execution_divides_the_epoch_where_the_data_is_on_the_device(
        given, backend, pipeline, steps, expected):
    from app.engine.data import steps_per_execution

    config = Config(backend=backend, steps_per_execution=given)
    chosen = steps_per_execution(config, pipeline, steps)
    assert chosen == expected and steps % chosen == 0
    profiled = dataclasses.replace(config, profile_steps="3,5")
    assert steps_per_execution(profiled, pipeline, steps) == (given or 1)  # a trace: each step


def test_repeats_belong_to_the_benchmark_modes_and_leave_old_run_folders_as_they_were():
    """--repeats=N is a benchmark's (a sweep point, a ladder rung, --benchmark=input):
    a training run refuses it in one line. At its default it changes neither a run
    folder's name nor its resume: a config.json written before the flag existed lacks
    it and still matches."""
    with pytest.raises(ConfigError, match=r"^--repeats=3 repeats a benchmark's timed window; "
                                          r"accepted with --sweep"):
        Config(repeats=3)
    for mode in ({"sweep_batch_sizes": (8,)}, {"benchmark": "ladder"},
                 {"benchmark": "input", "dataset": "digits"}):
        Config(**{"dataset": "synthetic", **mode}, repeats=3)
    assert Config(dataset="synthetic", sweep_batch_sizes=(8,)).sweep_point({}).repeats == 1
    plain = Config()
    before_the_flag = {k: v for k, v in plain.to_dict().items() if k != "repeats"}
    assert plain.differences(before_the_flag) == []
    assert plain.logdir.endswith("-ed284d72")  # README's command 1 folder, as before
    sweep = Config(dataset="synthetic", sweep_batch_sizes=(8,))
    assert sweep.replace(repeats=3).fingerprint != sweep.fingerprint  # not resumed as one
    assert sweep.replace(repeats=3).differences(sweep.to_dict()) == ["repeats"]
