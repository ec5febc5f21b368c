"""A user's model: FILE.py:FUNCTION or FILE.keras.

- FILE.py:FUNCTION: FUNCTION(num_classes, image_size) returns a `keras.Model` taking
  (batch, image_size, image_size, 3) images, normalized as every pipeline of the app
  normalizes them (ImageNet mean and standard deviation), and returning logits of
  num_classes (no softmax: the loss applies it). The file's folder joins sys.path, so
  it may import its neighbours; a module it imports may register custom layers.
- FILE.keras: a model saved by Keras (`model.save("x.keras")`), loaded with its
  weights, its output made logits of the data's classes (app/models/adapt.py),
  its float32 layers computing in the run's --precision.

Checked before any device starts (`check_python`, `check_saved`): the file, the
function and its signature, every class the saved model names known to Keras. A
checkpoint holds weights only: a resumed run builds the model again the same way
(the function called again, the file loaded again) and loads them, so custom layers
need no registration to resume, only to load a .keras file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
import zipfile

import keras

from app.models.errors import ModelError
from app.models.adapt import as_logits, ends_in_softmax


def split_python(value: str) -> tuple[str, str]:
    """FILE.py:FUNCTION -> (FILE.py, FUNCTION)."""
    path, _, function = value.rpartition(":")
    return path, function


def _module(value: str):
    """The user's file imported (once per process) under a name of its own."""
    path = os.path.abspath(split_python(value)[0])
    name = "bench_user_model_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    if not os.path.isfile(path):
        raise ModelError(f"--model={value}: {path} is not a file; accepted: FILE.py:FUNCTION "
                         "with FILE.py an existing Python file")
    if os.path.dirname(path) not in sys.path:
        sys.path.append(os.path.dirname(path))  # its neighbours import, ours still win
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - any failure of the user's code is one line
        del sys.modules[name]
        reason = (str(error).strip().splitlines() or [""])[0]
        raise ModelError(f"--model={value}: importing {path} failed "
                         f"({type(error).__name__}: {reason})")
    return module


def _function(value: str):
    module, function = _module(value), split_python(value)[1]
    found = getattr(module, function, None)
    if not callable(found):
        names = sorted(n for n, v in vars(module).items()
                       if inspect.isfunction(v) and not n.startswith("_"))
        raise ModelError(f"--model={value}: {split_python(value)[0]} has no function "
                         f"{function!r}; its functions: {', '.join(names) or 'none'}")
    return found


def check_python(value: str) -> None:
    """FILE.py exists and imports, FUNCTION is in it and takes (num_classes, image_size).

    Raises:
        ModelError: one line naming what was received and what is accepted.
    """
    function = _function(value)
    try:
        inspect.signature(function).bind(10, 32)
    except TypeError:
        raise ModelError(f"--model={value}: {split_python(value)[1]}"
                         f"{inspect.signature(function)} cannot be called as "
                         "FUNCTION(num_classes, image_size); accepted: a function of those two")
    except ValueError:  # no signature to read (a builtin): calling it will tell
        pass


def _output_width(model: keras.Model, image_size: int):
    """The last axis of the model's one output (None where it has several)."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):  # a subclassed model: call it symbolically
        outputs = [model(keras.Input((image_size, image_size, 3)))]
    outputs = keras.tree.flatten(outputs)
    return outputs[0].shape[-1] if len(outputs) == 1 else None


def _raised_where(error: BaseException, path: str) -> str:
    """" at FILE:LINE" of the user's file's deepest frame in the traceback (else of
    the deepest frame: the error came from a module the file called)."""
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(path)]
    frame = (own or frames or [None])[-1]
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""


def make_python(value: str, num_classes: int, image_size: int) -> keras.Model:
    """FUNCTION(num_classes, image_size), checked to be a classifier of num_classes logits.

    Raises:
        ModelError: it raised, returned no keras.Model, or another output, or a softmax.
    """
    function = _function(value)
    try:
        model = function(num_classes, image_size)
    except Exception as error:  # noqa: BLE001 - any failure of the user's code is one line
        reason = (str(error).strip().splitlines() or [""])[0]
        raise ModelError(f"--model={value} raised {type(error).__name__}"
                         f"{_raised_where(error, split_python(value)[0])}"
                         f"{': ' + reason if reason else ''}") from None
    if not isinstance(model, keras.Model):
        raise ModelError(f"--model={value} returned {type(model).__name__}; accepted: a "
                         "keras.Model")
    width = _output_width(model, image_size)
    if width != num_classes:
        raise ModelError(f"--model={value} returned a model with output width {width}; the "
                         f"data has {num_classes} classes (one output of num_classes logits)")
    if ends_in_softmax(model):
        raise ModelError(f"--model={value} returned a model ending in a softmax; return "
                         "logits (the app's loss applies the softmax)")
    return model


def check_builds(value: str, num_classes: int, image_size: int) -> None:
    """Builds FILE.py:FUNCTION's model once at the door (before the run folder exists)
    and drops it: what would fail in the run fails here, in one line. Keras's layer
    name counters are put back, so the run's own build names its layers as if this
    one had not happened (the checkpoint's weights are found by those names).

    Raises:
        ModelError: as make_python.
    """
    from app.models import models_built_aside

    with models_built_aside():
        make_python(value, num_classes, image_size)


# ------------------------------------------------------------------ FILE.keras
def _saved_config(value: str) -> dict:
    if not os.path.isfile(value):
        raise ModelError(f"--model={value} is not a file; accepted: FILE.keras, a model "
                         "saved with model.save('FILE.keras')")
    try:
        with zipfile.ZipFile(value) as archive:
            return json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError) as error:
        raise ModelError(f"--model={value} is not a Keras .keras file ({error}); accepted: "
                         "a model saved with model.save('FILE.keras')")


def _objects(node):
    """Every serialized object (a dict with class_name and config) inside `node`."""
    if isinstance(node, dict):
        if "class_name" in node and "config" in node:
            yield node
        for child in node.values():
            yield from _objects(child)
    elif isinstance(node, list):
        for child in node:
            yield from _objects(child)


def _unknown_classes(config: dict) -> list[str]:
    """The custom classes the saved model names that no imported module registered."""
    from app.models import layers as _fast  # noqa: F401 - registers the app's own layers
    from app.models import vit as _vit  # noqa: F401

    missing = []
    for node in _objects(config):
        module = node.get("module") or "builtins"
        if module.split(".")[0] in ("keras", "builtins"):
            continue
        name = node.get("registered_name") or node["class_name"]
        if keras.saving.get_registered_object(name) is None and name not in missing:
            missing.append(name)
    return missing


def _input_size(config: dict):
    for node in _objects(config):
        if node["class_name"] == "InputLayer":
            shape = node["config"].get("batch_shape") or [None, None]
            return shape[1]
    return None


def check_saved(value: str, image_size: int) -> None:
    """FILE.keras reads as a Keras model whose classes are all known, for this image size.

    Raises:
        ModelError: one line naming what to register or which size it takes.
    """
    config = _saved_config(value)
    missing = _unknown_classes(config)
    if missing:
        raise ModelError(
            f"--model={value} uses {', '.join(missing)}, which no module registered; pass "
            "--model=FILE.py:FUNCTION instead, with FILE.py registering it "
            "(@keras.saving.register_keras_serializable()) and FUNCTION returning "
            f"keras.saving.load_model({value!r}, compile=False)")
    size = _input_size(config)
    if image_size and size and size != image_size:
        raise ModelError(f"--model={value} takes {size}x{size} images; received "
                         f"--image_size={image_size} (pass --image_size={size})")


def _with_policy(node, policy: str):
    """The saved config with each layer's float dtype policy set to the run's."""
    if isinstance(node, list):
        return [_with_policy(child, policy) for child in node]
    if not isinstance(node, dict):
        return node
    if node.get("class_name") == "DTypePolicy" and node["config"].get("name") in (
            "float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16"):
        return {**node, "config": {**node["config"], "name": policy}}
    return {key: _with_policy(child, policy) for key, child in node.items()}


def make_saved(value: str, num_classes: int, image_size: int) -> keras.Model:
    """FILE.keras loaded (weights included), computing in the global dtype policy, with
    float32 logits of `num_classes`.

    Raises:
        ModelError: the file does not load, or takes another image size.
    """
    config = _with_policy(_saved_config(value), keras.config.dtype_policy().name)
    config.pop("compile_config", None)  # the app compiles with its own recipe
    try:
        model = keras.saving.deserialize_keras_object(config)
        model.load_weights(value)
        model = as_logits(model, num_classes, value)
    except ValueError as error:
        raise ModelError(f"--model={value} does not load as an image classifier: "
                         f"{(str(error).strip().splitlines() or [''])[0]}")
    size = model.input_shape[1]
    if size is not None and size != image_size:
        raise ModelError(f"--model={value} takes {size}x{size} images, the data "
                         f"{image_size}x{image_size}; pass --image_size={size}")
    return model
