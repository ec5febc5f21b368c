"""Which implementation of the layers that dominate a step a model is built with.

Kept apart from the model files and free of Keras, so the run's checks
(`app.models.check_model`) and the recipe can name it before the backend starts.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class LayerSet:
    """Which implementation of the layers that dominate a step (see app/models/layers.py).

    batchnorm: "keras", "fast" (bf16 apply) or "fast_f32" (float32 apply);
    pool: "keras", "slices" (nine slices, the gradient XLA derives) or "argmax"
    (nine slices, the hand-written gradient); stem: "keras", "s2d" (space-to-depth)
    or "s2d16" (space-to-depth with its 12 channels zero-padded to 16);
    batchnorm_groups: BatchNorm statistics per slice of the batch, one slice per
    replica (JAX's data parallelism; 1 = over the whole batch);
    batchnorm_synchronized: statistics over every replica of a TensorFlow strategy;
    relu_in_batchnorm: each ReLU that follows a BatchNorm directly is computed in it
    ("fast" BatchNorms only; one hand-written gradient for the two);
    small_map_conv: a model the app did not write gets SmallMapGroupedConv2D for its
    grouped convolutions on maps no larger than their kernel (ConvNeXt's last stage).

    The ViTs use none of these; a model the app did not write (applications:, a
    user's file) gets its BatchNormalization layers replaced by the app's BatchNorm
    with `batchnorm_groups` and `batchnorm_synchronized` (app/models/adapt.py).
    """

    batchnorm: str = "fast"
    pool: str = "argmax"
    stem: str = "s2d16"
    batchnorm_groups: int = 1
    batchnorm_synchronized: bool = False
    relu_in_batchnorm: bool = False
    small_map_conv: bool = True


FAST = LayerSet()
KERAS = LayerSet("keras", "keras", "keras", small_map_conv=False)
