"""applications:NAME: any image classifier of `keras.applications`, trained from scratch.

Built with weights=None (nothing is downloaded), the classifier on top with the
data's classes and classifier_activation=None (logits: the loss applies the softmax),
for square images of the run's size. Every pipeline of the app hands the model images
already normalized with ImageNet's mean and standard deviation, so the model's own
input preprocessing is turned off where it has a switch (include_preprocessing=False:
ConvNeXt, EfficientNetV2, MobileNetV3). EfficientNetB0-B7 have no switch: they start
with Rescaling(1/255) and a Normalization layer that, with weights=None, is the
identity; a Rescaling(255) put before them cancels the first, so they too see the
app's normalized images (`tests/app/models/test_models.py` checks it). The other families
(ResNet, VGG, DenseNet, Inception, Xception, MobileNet, NASNet) leave preprocessing
to a separate `preprocess_input` function, which the app does not call.
"""

from __future__ import annotations

import inspect

import keras

from app.models.errors import ModelError
from flags.config import did_you_mean

PREFIX = "applications:"


def classifiers() -> list[str]:
    """The names of keras.applications' image classifiers (their builders take
    classes and classifier_activation)."""
    names = []
    for name in dir(keras.applications):
        build = getattr(keras.applications, name)
        if name[:1].isupper() and callable(build):
            parameters = inspect.signature(build).parameters
            if {"classes", "classifier_activation", "weights"} <= set(parameters):
                names.append(name)
    return names


def check(value: str) -> None:
    """applications:NAME names a classifier of this Keras.

    Raises:
        ModelError: naming the ones there are.
    """
    name, accepted = value[len(PREFIX):], classifiers()
    if name not in accepted:
        raise ModelError(f"--model={value}: keras.applications {keras.__version__} has no "
                         f"image classifier {name!r}{did_you_mean(name, accepted)}; accepted: "
                         f"applications:NAME for NAME in {', '.join(accepted)}")


def make_application(value: str, num_classes: int, image_size: int) -> keras.Model:
    """The keras.applications model `value` names, for the app's inputs and loss.

    Raises:
        ModelError: the family refuses this image size (e.g. Inception's 75 px minimum).
    """
    name = value[len(PREFIX):]
    build = getattr(keras.applications, name)
    options = dict(weights=None, include_top=True, classes=num_classes,
                   input_shape=(image_size, image_size, 3), classifier_activation=None)
    if "include_preprocessing" in inspect.signature(build).parameters:
        options["include_preprocessing"] = False
    try:
        model = build(**options)
    except ValueError as error:
        raise ModelError(f"--model={value} at --image_size={image_size}: "
                         f"{(str(error).strip().splitlines() or [''])[0]}")
    if name.startswith("EfficientNetB"):
        # No switch: its Rescaling(1/255) is undone, its Normalization (weights=None)
        # is the identity, so the model sees the app's normalized images.
        inputs = keras.Input((image_size, image_size, 3), name="images")
        model = keras.Model(inputs, model(keras.layers.Rescaling(255.0)(inputs)), name=name)
    return model
