"""Bring your own model: `python app/main.py --model=examples/my_model.py:make_model`.

The app calls `make_model(num_classes, image_size)` once per run (and again on resume,
then loads the checkpoint's weights into what it returns), inside the distribution
scope with the run's dtype policy already set. Return a `keras.Model` that

- takes (batch, image_size, image_size, 3) float32 images, already normalized with
  ImageNet's mean and standard deviation by the app's input pipelines (add no
  Rescaling or Normalization of your own);
- returns one output of `num_classes` logits (no softmax: the app's loss applies it),
  best in float32 (`dtype="float32"` on the last layer) under mixed precision.

The app does the rest: its recipe (--optimizer=auto means AdamW for models it did not
write), its BatchNorm in place of Keras's BatchNormalization (--batchnorm_statistics),
FLOPs counted from the compiled step for MFU, checkpoints and resume. A model saved
with `model.save("my_model.keras")` runs as `--model=my_model.keras`; if it has layers
of your own, register them (`@keras.saving.register_keras_serializable()`) in a file
like this one and return `keras.saving.load_model(path, compile=False)` from it.
"""

import keras
from keras import layers


def _conv_bn_relu(x, filters, stride, name):
    x = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False,
                      name=name + "_conv")(x)
    x = layers.BatchNormalization(name=name + "_bn")(x)
    return layers.ReLU(name=name + "_relu")(x)


def make_model(num_classes: int, image_size: int) -> keras.Model:
    """A small all-convolutional classifier: three 3x3 stages, global pooling, logits."""
    inputs = keras.Input((image_size, image_size, 3), name="images")
    x = _conv_bn_relu(inputs, 32, 1, "stage1")
    x = _conv_bn_relu(x, 64, 2, "stage2")
    x = _conv_bn_relu(x, 128, 2, "stage3")
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="my_model")
