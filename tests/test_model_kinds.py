"""Every kind of --model, end to end on both backends: a built-in ResNet and ViT,
applications:NAME, FILE.py:FUNCTION and FILE.keras each train two steps, resume from
a checkpoint, and report the FLOPs a count by hand gives; bad values are one line,
exit 2. TensorFlow runs in this process; JAX runs the real CLI with TensorFlow
unimportable, as on the GPU hosts."""

import json
import os
import shutil

import pytest
from conftest import ROOT, error_lines, run_cli, run_python
from flops_by_hand import train_flops_per_image as by_hand

from app import main as app
from app import models
from flags import Config

NO_TF = {"PYTHONPATH": os.path.join(os.path.dirname(__file__), "no_tensorflow")}
EXAMPLE = os.path.join(ROOT, "examples", "my_model.py")
SAVED_CLASSES = 7  # the saved model's; digits has 10: its head is replaced


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """examples/my_model.py's model with 7 classes, saved as a .keras file."""
    path = str(tmp_path_factory.mktemp("saved") / "mine.keras")
    models.make_model(f"{EXAMPLE}:make_model", SAVED_CLASSES, 16).save(path)
    return path


def kinds(saved):
    """(--model, image size) of each kind."""
    return [("small_resnet", 16), ("vit_ti16", 32), ("applications:MobileNet", 32),
            (f"{EXAMPLE}:make_model", 16), (saved, 16)]


KIND_IDS = ["resnet", "vit", "applications", "python", "saved"]


def expected_flops(model, size):
    """The hand count of the model the run builds (its head: the data's 10 classes)."""
    return by_hand(models.make_model(model, 10, size))


def resume_from_the_first_checkpoint(logdir):
    """Makes the finished run look killed after its first step: its summary and last
    checkpoint gone, so the rerun loads the first checkpoint and trains step 2."""
    os.remove(os.path.join(logdir, "summary.json"))
    shutil.rmtree(os.path.join(logdir, "checkpoints", "ckpt-0000000002"))


@pytest.mark.parametrize("index", range(5), ids=KIND_IDS)
def test_each_kind_trains_resumes_and_counts_its_flops_on_tensorflow(digits_dir, tmp_path,
                                                                   saved_model, index, capsys):
    model, size = kinds(saved_model)[index]
    config = Config(model=model, data_dir=digits_dir, logdir=str(tmp_path / "run"),
                    image_size=size, epochs=2, steps_per_epoch=1, validation_steps=1,
                    global_batch_size=16, verbose="0", seed=1)
    models.check_model(config)
    first = app.run(config)
    assert first["status"] == "completed" and first["epochs_completed"] == 2
    resume_from_the_first_checkpoint(config.logdir)
    again = app.run(config)
    assert again["status"] == "completed" and len(again["attempts"]) == 2
    assert "resuming from" in capsys.readouterr().out
    assert again["train_flops_per_image"] == pytest.approx(expected_flops(model, size),
                                                           rel=0.02)


@pytest.mark.parametrize("index", range(5), ids=KIND_IDS)
def test_each_kind_trains_resumes_and_counts_its_flops_on_jax(digits_dir, tmp_path,
                                                             saved_model, index):
    model, size = kinds(saved_model)[index]
    logdir = tmp_path / "run"
    flags = [f"--model={model}", f"--data_dir={digits_dir}", f"--logdir={logdir}",
             f"--image_size={size}", "--epochs=2", "--steps_per_epoch=1",
             "--validation_steps=1", "--global_batch_size=16", "--verbose=0", "--seed=1",
             "--backend=jax"]
    first = run_cli(*flags, env=NO_TF)
    assert first.returncode == 0, first.stderr[-3000:]
    if model == saved_model:
        assert (f"model: {saved_model} has {SAVED_CLASSES} classes, the data 10: its head "
                "'logits' is replaced by a new Dense(10)") in first.stdout
    resume_from_the_first_checkpoint(str(logdir))
    again = run_cli(*flags, env=NO_TF)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stdout and "ckpt-0000000001" in again.stdout
    summary = json.loads((logdir / "summary.json").read_text())
    assert "tensorflow" not in summary["versions"] and len(summary["attempts"]) == 2
    assert summary["train_flops_per_image"] == pytest.approx(expected_flops(model, size),
                                                             rel=0.02)


CUSTOM = '''
import keras


@keras.saving.register_keras_serializable("mine")
class Twice(keras.layers.Layer):
    def call(self, x):
        return 2 * x


def make_model(num_classes, image_size):
    inputs = keras.Input((image_size, image_size, 3))
    x = keras.layers.GlobalAveragePooling2D()(Twice()(inputs))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


def two_outputs(num_classes, image_size):
    inputs = keras.Input((image_size, image_size, 3))
    return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(inputs)))


def one_argument(num_classes):
    return None
'''


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """A user's file with a custom layer, and a .keras file saved from it."""
    folder = tmp_path_factory.mktemp("custom")
    (folder / "custom.py").write_text(CUSTOM)
    run_python(f"import sys; sys.path.insert(0, {str(folder)!r}); import custom\n"
               f"custom.make_model(10, 16).save({str(folder / 'custom.keras')!r}); print(0)",
               {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", **NO_TF})
    return folder


@pytest.mark.parametrize("model, message", [
    ("vgg16", "--model='vgg16' is unknown; accepted: small_resnet, resnet18"),
    ("{folder}/custom.py:one_argument", "one_argument(num_classes) cannot be called as "
                                        "FUNCTION(num_classes, image_size)"),
    ("{folder}/custom.keras", "uses mine>Twice, which no module registered; pass "
                              "--model=FILE.py:FUNCTION instead"),
    ("{folder}/custom.py:two_outputs", "returned a model with output width 3; the data has "
                                       "10 classes"),
])
def test_a_bad_model_is_one_line_and_exit_2(digits_dir, tmp_path, custom, model, message):
    """From the command line (the other mistakes: tests/app/models/test_models.py, in-process)."""
    logdir = tmp_path / "run"
    done = run_cli(f"--model={model.format(folder=custom)}", f"--data_dir={digits_dir}",
                   f"--logdir={logdir}", "--image_size=16", "--epochs=1", "--verbose=0")
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1 and message in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_custom_layer_in_a_keras_file_loads_through_the_file_that_registers_it(
        digits_dir, tmp_path, custom):
    """What the error above tells the user to do: FILE.py registers the layer and
    returns keras.saving.load_model(FILE.keras)."""
    loader = tmp_path / "load.py"
    loader.write_text(f"import sys\nsys.path.insert(0, {str(custom)!r})\nimport custom  # noqa\n"
                      "import keras\n\n\ndef make_model(num_classes, image_size):\n"
                      f"    return keras.saving.load_model({str(custom / 'custom.keras')!r}, "
                      "compile=False)\n")
    done = run_cli(f"--model={loader}:make_model", f"--data_dir={digits_dir}",
                   f"--logdir={tmp_path / 'run'}", "--image_size=16", "--epochs=1",
                   "--steps_per_epoch=1", "--validation_steps=1", "--verbose=0",
                   "--backend=jax", env=NO_TF)
    assert done.returncode == 0, done.stderr[-3000:]
