"""What the app does to a model it did not write (applications:NAME, a user's file).

- `with_app_layers`: its Keras BatchNormalization layers become the app's BatchNorm
  (app/models/layers.py), with the same variables and settings, so that
  --batchnorm_statistics means for it what it means for the built-in ResNets:
  per_replica, each replica's slice of the batch (Keras's own layer on JAX would
  normalize over the whole sharded batch, an all-reduce per layer), or global; and
  on TensorFlow the moving statistics averaged over the replicas (Keras's own layer
  keeps one copy per replica under MirroredStrategy, and the checkpoint replica 0's).
  Its grouped convolutions on maps no larger than their kernel (ConvNeXt's last
  stage) become app/models/layers.py's SmallMapGroupedConv2D (the same numbers; XLA's
  GPU compiler otherwise runs their filter gradient 40x slower), where the LayerSet
  says so (small_map_conv). The other layers are reused as they are (no copy, no
  config round trip).
- `as_logits`: a saved model's output made float32 logits of the data's classes: a
  final softmax dropped, a head of another class count replaced (one line on stdout).
"""

from __future__ import annotations

import keras
from keras import layers

from app.models import layers as fast
from app.models.layer_set import LayerSet


def _swappable(layer) -> bool:
    """A plain Keras BatchNormalization over the last axis (what app BatchNorm computes)."""
    if type(layer) is not layers.BatchNormalization or getattr(layer, "renorm", False):
        return False
    try:
        rank = len(layer.input.shape)
    except (AttributeError, ValueError):  # called more than once: no single input
        return False
    return layer.axis in (-1, rank - 1)


def _app_batchnorm(layer, ls: LayerSet):
    return fast.BatchNorm(
        apply_in_compute_dtype=True, groups=ls.batchnorm_groups,
        synchronized=ls.batchnorm_synchronized, axis=layer.axis, momentum=layer.momentum,
        epsilon=layer.epsilon, center=layer.center, scale=layer.scale,
        beta_initializer=layer.beta_initializer, gamma_initializer=layer.gamma_initializer,
        moving_mean_initializer=layer.moving_mean_initializer,
        moving_variance_initializer=layer.moving_variance_initializer,
        beta_regularizer=layer.beta_regularizer, gamma_regularizer=layer.gamma_regularizer,
        beta_constraint=layer.beta_constraint, gamma_constraint=layer.gamma_constraint,
        name=layer.name, trainable=layer.trainable, dtype=layer.dtype_policy)


def _replaced(layer, ls: LayerSet) -> bool:
    """Whether the app swaps `layer` for one of its own (`_replacement`)."""
    return _swappable(layer) or (ls.small_map_conv and fast.is_small_map_grouped_conv(layer))


def _replacement(layer, ls: LayerSet):
    """The app's layer for `layer` (a new one); call where `_replaced`."""
    if _swappable(layer):
        return _app_batchnorm(layer, ls)
    return fast.SmallMapGroupedConv2D.from_config(layer.get_config())


def with_app_layers(model: keras.Model, ls: LayerSet, label: str) -> keras.Model:
    """`model` with its BatchNormalization layers replaced by the app's, and its grouped
    convolutions on small maps by SmallMapGroupedConv2D (weights kept).

    A model that is not functional (subclassed) keeps its layers, said in one line.
    """
    swapped = {}

    def clone(layer):
        if not _replaced(layer, ls):
            return layer  # reused: the same object, the same variables
        swapped[layer] = _replacement(layer, ls)
        return swapped[layer]

    if not any(_replaced(layer, ls) for layer in model._flatten_layers(include_self=False)):
        return model
    try:
        new = keras.models.clone_model(model, clone_function=clone, recursive=True)
    except ValueError as error:  # a subclassed model: Keras clones only functional ones
        print(f"model: {label} keeps Keras's BatchNormalization ({str(error).splitlines()[0]}): "
              "statistics over the whole batch on JAX, per replica on TensorFlow")
        return model
    for old, layer in swapped.items():
        layer.set_weights(old.get_weights())
    return new


def _is_softmax(layer) -> bool:
    if isinstance(layer, layers.Softmax):
        return True
    activation = getattr(layer, "activation", None)
    return getattr(activation, "__name__", "") == "softmax"


def ends_in_softmax(model: keras.Model) -> bool:
    return _is_softmax(model.layers[-1])


def as_logits(model: keras.Model, num_classes: int, label: str) -> keras.Model:
    """`model` ending in a linear float32 Dense of `num_classes` units.

    A trailing Softmax (or softmax Activation) is dropped and a softmax Dense made
    linear with its weights kept; a Dense of another width is replaced by a new one
    (zeros: every class starts equal). Each change is one line on stdout.
    """
    x, last = model.outputs[0], model.layers[-1]
    while isinstance(last, (layers.Softmax, layers.Activation)) and _is_softmax(last):
        print(f"model: {label} ends in a softmax ({last.name}); dropped, the loss takes logits")
        x = last.input
        last = x._keras_history.operation
    if not isinstance(last, layers.Dense):
        raise ValueError(f"{label} does not end in a Dense layer (its last is "
                         f"{type(last).__name__} {last.name!r}); the app cannot give it "
                         f"{num_classes} classes")
    linear = getattr(last.activation, "__name__", "") == "linear"
    if last.units == num_classes and linear and last.dtype_policy.compute_dtype == "float32":
        return model if x is model.outputs[0] else keras.Model(model.inputs, x, name=model.name)
    head = layers.Dense(num_classes, dtype="float32", kernel_initializer="zeros",
                        name=f"{last.name}_logits")
    logits = head(last.input)
    if last.units == num_classes:
        head.set_weights(last.get_weights())
        print(f"model: {label}'s head {last.name!r} made linear float32 logits (weights kept)")
    else:
        print(f"model: {label} has {last.units} classes, the data {num_classes}: its head "
              f"{last.name!r} is replaced by a new Dense({num_classes})")
    return keras.Model(model.inputs, logits, name=model.name)
