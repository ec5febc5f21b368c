"""The model: every value of --model, checked, then built, and what it trains with.

| --model | what | file |
| --- | --- | --- |
| small_resnet, resnet18/34/50 | the app's ResNets (v1.5), with its fast layers | resnet.py |
| vit_ti16, vit_s16, vit_b16, vit_l16 | the app's ViTs, pre-norm, patch 16, mean-pooled | vit.py |
| applications:NAME | any keras.applications image classifier, from scratch | applications.py |
| FILE.py:FUNCTION, FILE.keras | a user's model: a function, or a saved model | user.py |

`check_model(config)` checks what can be checked before any device starts; it
imports Keras only for the values that need it (no array is made). `make_model` builds
(inside the distribution scope, after the dtype policy is set). Models the app did not
write get its BatchNorm and logits (adapt.py). The app's own models draw their initial
weights with numpy on the host (host_init.py) and build the layers that dominate a step
from one implementation or another (layer_set.py: FAST, KERAS). This file imports no
Keras: the run's checks import it before the backend starts.

The package's modules:
- resnet.py, vit.py: the app's ResNets and ViTs;
- applications.py: keras.applications classifiers, from scratch;
- user.py: a user's model, from a function or a saved .keras file;
- adapt.py: the app's BatchNorm and logits for a model the app did not write;
- host_init.py: the ResNets' initial weights, drawn with numpy on the host;
- layer_set.py: which implementation builds the layers that dominate a step;
- layers.py: faster drop-in layers for ResNet training (Keras ops only);
- recipe.py: the training recipe: optimizer, learning-rate schedule, loss and metrics;
- flops.py: training FLOPs per image, counted from the training step's XLA HLO;
- memory.py: what a process may hold and still take, and a training step's lower bound;
- errors.py: ModelError, a --model that cannot be built, in one line.
"""

from __future__ import annotations

import contextlib

from app.models.errors import ModelError  # noqa: F401 (re-exported)
from app.models.layer_set import FAST, KERAS, LayerSet  # noqa: F401 (re-exported)
from flags.config import MODELS, model_kind


def kind(name: str) -> str | None:
    """resnet, vit, applications, python (FILE.py:FUNCTION), saved (FILE.keras), or None."""
    return model_kind(name)


def check_model(config) -> None:
    """The semantic checks of --model (flags.config checked its form): the file exists
    and imports, the function exists and takes (num_classes, image_size), the
    keras.applications name exists, a saved model's classes are all registered.

    Call after app.engine.distribute.prepare_backend(config) (it may import Keras)
    and before any device is used.

    Raises:
        ModelError: one line naming what was received and what is accepted.
    """
    _check(config.model, config.image_size)


def check_model_builds(config, shape: tuple[int, int] | None) -> None:
    """A user's FILE.py:FUNCTION model built once, before the run folder exists, for
    `shape` (classes, image side) as the data check knows it; skipped where it does
    not (None: a TFDS dataset, whose classes its builder gives later) and for models
    the app wrote. Call after the devices are chosen (building makes variables).

    Raises:
        ModelError: the function raised (one line naming its file and line), or
            returned no classifier of the data's classes.
    """
    if kind(config.model) == "python" and shape is not None:
        from app.models import user

        user.check_builds(config.model, *shape)


def _check(name: str, image_size: int) -> None:
    if kind(name) == "applications":
        from app.models import applications

        applications.check(name)
    elif kind(name) == "python":
        from app.models import user

        user.check_python(name)
    elif kind(name) == "saved":
        from app.models import user

        user.check_saved(name, image_size)


def make_model(name: str, num_classes: int, image_size: int,
               layer_set: LayerSet = FAST) -> "keras.Model":  # noqa: F821
    """Builds the model called `name` (any value of --model).

    Call inside the distribution scope, after the dtype policy is set.

    Args:
        layer_set: FAST (the default) or KERAS layers, or any mix (benchmarks); for
            models the app did not write, its BatchNorm statistics settings only.

    Raises:
        ModelError: a user's model that is not a classifier of num_classes logits, or
            a family that refuses this image size.
    """
    family = kind(name)
    if family is None:
        raise ModelError(f"unknown model {name!r}; accepted: {', '.join(MODELS)}, "
                         "applications:NAME, FILE.py:FUNCTION, FILE.keras")
    if family == "resnet":
        from app.models import resnet

        if name == "small_resnet":
            return resnet.make_small_resnet(num_classes, image_size, layer_set)
        return resnet.make_resnet(name, num_classes, image_size, layer_set)
    if family == "vit":
        from app.models import vit

        try:
            return vit.make_vit(name, num_classes, image_size)
        except ValueError as error:
            raise ModelError(f"--model={name}: {error}")
    from app.models import adapt, applications, user

    _check(name, image_size)  # (again: a caller may not have run check_model)
    if family == "applications":
        model = applications.make_application(name, num_classes, image_size)
    elif family == "python":
        model = user.make_python(name, num_classes, image_size)
    else:
        model = user.make_saved(name, num_classes, image_size)
    return adapt.with_app_layers(model, layer_set, name)


@contextlib.contextmanager
def models_built_aside():
    """Within the block, a model built (and dropped) leaves Keras's layer-name counters
    as they were: the run's own build names its layers as if this one had not
    happened (a checkpoint's weights are found by those names)."""
    from keras.src.backend.common import global_state

    uids = dict(global_state.get_global_attribute("object_name_uids") or {})
    try:
        yield
    finally:
        counters = global_state.get_global_attribute("object_name_uids")
        if counters is not None:
            counters.clear()
            counters.update(uids)
