"""The training recipe: optimizer, learning-rate schedule, loss and metrics.

Two optimizers, each with its recipe (flags.config.RECIPES; --optimizer=auto is the
model family's): SGD with momentum (not Nesterov) for the ResNets, AdamW for the ViTs
and every model the app did not write. Both take a learning rate for 256 images scaled
with the global batch (flags.config.batch_scale: linearly from 256 up as Goyal et al.,
by the square root below), a linear warm-up, then cosine decay
to zero or the classic step schedule; decoupled weight decay that skips every 1-D
variable (biases, BatchNorm and LayerNorm scales and offsets, layer scales) and
position embeddings; and, where --gradient_clip_norm > 0, the gradients' global norm
clipped. Label smoothing; the loss, top-1 (and top-5 with many classes) as weighted
metrics, so the weight-0 padding of the last validation batch is ignored by all three.
"""

from __future__ import annotations

import dataclasses
import math
import os

import keras
from keras import ops

# Step schedule: divide by 10 at these fractions of the run (epochs 30, 60, 80 of 90).
STEP_BOUNDARIES = (1 / 3, 2 / 3, 8 / 9)
# Weight decay skips every 1-D variable and these (by Keras variable name).
NO_DECAY_NAMES = ("position_embedding",)
ADAMW_BETAS = (0.9, 0.999)  # DeiT's and ViT's
# Short runs (tests/preprocessing/datasets/test_fashion_mnist.py's one epoch of 300 steps
# learns on three seeds). The learning-rate warm-up lasts --warmup_epochs but at
# most this fraction of the run's steps (untouched: ImageNet's 5 of 90 epochs, digits'
# 1 of 15; AdamW's 5 of a 15-epoch run become 3; a tenth measured no better on
# Fashion-MNIST's 300 steps: 0.739-0.753 against 0.748-0.75). Uncapped, a
# one-epoch run of the SGD recipe (1 warm-up epoch) spent its whole run climbing,
# ended at the peak rate and never decayed, and its BatchNorm moving statistics (an
# average over the last ~10 steps) lagged weights still moving fast: Fashion-MNIST,
# 1 epoch of 300 steps, val top-1 0.61 from the moving statistics against 0.70 from
# statistics recomputed for the final weights; capped, 0.74-0.75 and the two agree.
MAX_WARMUP_FRACTION = 0.2
# BatchNorm's moving averages weigh their initial values (mean 0, variance 1) by
# momentum**n after n steps and average over the last 1 / (1 - momentum) steps (their
# horizon). Validation comes after every epoch, so the horizon is kept to at most this
# fraction of an epoch: after the first epoch the initial values weigh <= e**-5 (0.7%).
# A momentum is lowered, never raised, and never below MIN_BATCHNORM_MOMENTUM.
BATCHNORM_HORIZON_EPOCHS = 0.2
MIN_BATCHNORM_MOMENTUM = 0.5


@keras.saving.register_keras_serializable("bench")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak` over `warmup_steps`, then cosine or step decay."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, kind: str = "cosine"):
        if kind not in ("cosine", "step"):
            raise ValueError(f"kind must be cosine or step, received {kind!r}")
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = max(int(total_steps), 1)
        self.kind = kind

    def __call__(self, step):
        if isinstance(step, (int, float)):  # a plain step: host arithmetic, no device op
            return self.host_value(step)
        step = ops.cast(step, "float32")
        warm = self.peak * (step + 1.0) / max(self.warmup_steps, 1)
        decay_steps = max(self.total_steps - self.warmup_steps, 1)
        progress = ops.clip((step - self.warmup_steps) / decay_steps, 0.0, 1.0)
        if self.kind == "cosine":
            decayed = 0.5 * self.peak * (1.0 + ops.cos(math.pi * progress))
        else:
            drops = sum(ops.cast(progress >= b, "float32") for b in STEP_BOUNDARIES)
            decayed = self.peak * ops.power(0.1, drops)
        return ops.where(step < self.warmup_steps, warm, decayed)

    def host_value(self, step: int | float) -> float:
        """The rate at `step`, as __call__ computes it, in Python floats.

        The learning-rate callback reads the rate once an epoch: computed by __call__
        outside the compiled step, each of its ~10 operations was a program of its own,
        compiled on first use (~1 s of an H200's cold start). tests/app/models/test_recipe.py
        checks the two agree.
        """
        step = float(step)
        if step < self.warmup_steps:
            return self.peak * (step + 1.0) / max(self.warmup_steps, 1)
        decay_steps = max(self.total_steps - self.warmup_steps, 1)
        progress = min(max((step - self.warmup_steps) / decay_steps, 0.0), 1.0)
        if self.kind == "cosine":
            return 0.5 * self.peak * (1.0 + math.cos(math.pi * progress))
        return self.peak * 0.1 ** sum(progress >= b for b in STEP_BOUNDARIES)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps, "kind": self.kind}


@keras.saving.register_keras_serializable("bench")
class SmoothedSparseCrossentropy(keras.losses.Loss):
    """Cross-entropy of integer labels against logits, with label smoothing.

    (Keras's SparseCategoricalCrossentropy has no label smoothing.)
    """

    def __init__(self, num_classes: int, label_smoothing: float = 0.0, name="crossentropy",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_classes = num_classes
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        labels = ops.one_hot(ops.cast(ops.reshape(y_true, (-1,)), "int32"), self.num_classes)
        return keras.losses.categorical_crossentropy(
            labels, y_pred, from_logits=True, label_smoothing=self.label_smoothing)

    def per_image(self, y_true, y_pred):
        """The loss of each image, in float32 (as the loss itself computes it)."""
        return self.call(y_true, ops.cast(y_pred, "float32"))

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes,
                "label_smoothing": self.label_smoothing}


def no_decay_variables(model) -> list:
    """The trainable variables weight decay leaves alone: every 1-D one (biases, norm
    scales and offsets, layer scales) and position embeddings."""
    return [v for v in model.trainable_variables
            if len(v.shape) <= 1 or any(n in v.name for n in NO_DECAY_NAMES)]


def make_optimizer(config, model, warmup_steps: int, total_steps: int):
    """--optimizer (resolved: sgd or adamw) on a warm-up schedule, decay skipping
    no_decay_variables(model), the global norm clipped to --gradient_clip_norm (0: not)."""
    schedule = WarmupSchedule(config.learning_rate, warmup_steps, total_steps,
                              config.lr_schedule)
    clip = config.gradient_clip_norm or None
    if config.optimizer == "adamw":
        optimizer = keras.optimizers.AdamW(
            learning_rate=schedule, weight_decay=config.weight_decay, beta_1=ADAMW_BETAS[0],
            beta_2=ADAMW_BETAS[1], global_clipnorm=clip)
    else:
        optimizer = keras.optimizers.SGD(
            learning_rate=schedule, momentum=config.momentum,
            weight_decay=config.weight_decay or None, global_clipnorm=clip)
    if config.weight_decay:
        optimizer.exclude_from_weight_decay(var_list=no_decay_variables(model))
    return optimizer


def warmup_steps_for(config, steps_per_epoch: int) -> int:
    """The learning-rate warm-up's steps: --warmup_epochs, at most MAX_WARMUP_FRACTION
    of the run's steps (so a short run warms up for a fraction of itself, then decays)."""
    asked = int(round(config.warmup_epochs * steps_per_epoch))
    return min(asked, int(MAX_WARMUP_FRACTION * steps_per_epoch * config.epochs))


def batchnorm_momentum_cap(steps_per_epoch: int) -> float:
    """The highest BatchNorm momentum whose horizon, 1 / (1 - momentum) steps, is at most
    BATCHNORM_HORIZON_EPOCHS of an epoch (not below MIN_BATCHNORM_MOMENTUM)."""
    horizon = BATCHNORM_HORIZON_EPOCHS * steps_per_epoch
    return max(MIN_BATCHNORM_MOMENTUM, 1.0 - 1.0 / horizon) if horizon > 1 else \
        MIN_BATCHNORM_MOMENTUM


def _batchnorms(model) -> list:
    return [layer for layer in model._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, keras.layers.BatchNormalization)]


def batchnorm_momentum(model) -> float | None:
    """The highest BatchNorm momentum in `model` (None: it has no BatchNorm)."""
    return max((float(layer.momentum) for layer in _batchnorms(model)), default=None)


def fit_batchnorm_to_epoch(model, steps_per_epoch: int) -> None:
    """Lowers every BatchNorm's momentum (nested models' too) to batchnorm_momentum_cap.
    Call before the steps are traced: the momentum is a constant of the compiled step.

    An epoch of 20 steps with the ResNets' momentum 0.9 evaluated moving statistics in
    which the initial mean 0 and variance 1 still weighed 0.9**20 = 12%.
    """
    cap = batchnorm_momentum_cap(steps_per_epoch)
    for layer in _batchnorms(model):
        layer.momentum = min(float(layer.momentum), cap)


def recipe_facts(config, steps_per_epoch: int | None = None) -> dict:
    """The recipe this run resolved (flags.config.RECIPES), for summary.json; with
    `steps_per_epoch`, the warm-up's steps too."""
    facts = {"optimizer": config.optimizer, "base_learning_rate": config.base_learning_rate,
             "peak_learning_rate": config.learning_rate, "warmup_epochs": config.warmup_epochs,
             "weight_decay": config.weight_decay,
             "gradient_clip_norm": config.gradient_clip_norm,
             "label_smoothing": config.label_smoothing,
             "momentum": config.momentum if config.optimizer == "sgd" else None}
    if steps_per_epoch:
        facts["warmup_steps"] = warmup_steps_for(config, steps_per_epoch)
    return facts


def compile_model(model, config, num_classes: int, steps_per_epoch: int,
                  jit_compile="auto"):
    """Compiles `model` with the recipe for `config` (call inside the strategy scope).

    Args:
        jit_compile: as Topology.jit_compile says ("auto" but where XLA breaks fit).
    """
    total_steps = steps_per_epoch * config.epochs
    warmup_steps = warmup_steps_for(config, steps_per_epoch)
    loss = SmoothedSparseCrossentropy(num_classes, config.label_smoothing)
    # Keras's own "loss" log averages each batch's mean loss weighted by the batch's
    # size, so the weight-0 padding images of the last validation batch would count
    # in val_loss's denominator. This weighted mean of each image's loss, named
    # "loss", takes its place in the logs (Keras merges the compiled metrics' results
    # after its loss tracker's); tests/app/modes/test_train.py checks val_loss against an
    # independent evaluation. Training batches have no padding: the figure is the same.
    metrics = [keras.metrics.MeanMetricWrapper(loss.per_image, name="loss"),
               keras.metrics.SparseCategoricalAccuracy(name="top1")]
    if num_classes >= 100:
        metrics.append(keras.metrics.SparseTopKCategoricalAccuracy(k=5, name="top5"))
    model.compile(
        optimizer=make_optimizer(config, model, warmup_steps, total_steps),
        loss=loss,
        weighted_metrics=metrics,
        steps_per_execution=config.steps_per_execution or 1,  # auto unresolved: one
        jit_compile=jit_compile,
    )
    if keras.config.backend() == "jax":
        _build_optimizer_on_host(model)
    return model


def _build_optimizer_on_host(model) -> None:
    """Makes the optimizer's variables now, their zeros from the host.

    Keras makes them in fit from the "zeros" initializer, which JAX computes op by op:
    one compiled program per variable shape (13 for the small ResNet, ~60 ms each on
    an H200 from cold). Under this scope "zeros" is host_init.Constant (0.0, from numpy,
    put on the device as it is); fit finds the optimizer built and builds nothing."""
    from app.models import host_init

    with keras.saving.custom_object_scope({"zeros": host_init.Constant}):
        model.optimizer.build(model.trainable_variables)


def layer_set(config, topology):
    """The model's layers for this run: BatchNorm statistics per replica or global
    (--batchnorm_statistics), as each backend's data parallelism needs it.

    JAX shards one global batch over the replicas, so a BatchNorm sees the whole
    batch: per_replica splits it into one group per replica. TensorFlow's strategies
    run one copy per replica on its own slice: global synchronizes them.
    """
    from app import models

    replicas = topology.num_replicas
    per_replica = config.batchnorm_statistics == "per_replica"
    if config.backend == "jax":
        return dataclasses.replace(models.FAST, batchnorm_groups=replicas if per_replica else 1)
    return dataclasses.replace(models.FAST, batchnorm_synchronized=not per_replica and replicas > 1)


def count_train_flops(config, topology, model, num_classes: int, image_size: int):
    """Training FLOPs per image of `model` (app/models/flops.py), or None.

    The built-in ResNets are counted on a twin with Keras's 7x7 stem convolution: the
    app's space-to-depth stem computes the same products plus its zero channels
    (12 padded to 16, the 7x7 kernel to 8x8), which would count 1.5% more on ResNet-50
    at 224 px (XLA: 23.81 against 23.46 GFLOPs); MFU counts the model's math only.
    """
    from app import models
    from app.models import flops

    counted, chosen = model, layer_set(config, topology)
    if models.kind(config.model) == "resnet" and config.model != "small_resnet":
        counted = models.make_model(config.model, num_classes, image_size,
                                    dataclasses.replace(chosen, stem="keras"))
    kept = topology.compilation_cache_dir  # JAX's compile cache folder, or None
    return flops.cached_train_flops_per_image(
        counted, image_size, chosen.batchnorm_groups,
        folder=os.path.join(kept, "app-train-flops") if kept else None)


def build_compiled_model(config, topology, num_classes: int, image_size: int,
                         steps_per_epoch: int):
    """The model of --model, built and compiled in the distribution scope."""
    from app import models

    with topology.scope():
        model = models.make_model(config.model, num_classes, image_size,
                                  layer_set(config, topology))
        fit_batchnorm_to_epoch(model, steps_per_epoch)
        compile_model(model, config, num_classes, steps_per_epoch, topology.jit_compile)
    return model


def make_compiled_model(config, topology, num_classes: int, image_size: int,
                        steps_per_epoch: int):
    """The model of --model, built and compiled in the distribution scope.

    Returns:
        (model, training FLOPs per image, or None where the backend cannot count them).
    """
    model = build_compiled_model(config, topology, num_classes, image_size, steps_per_epoch)
    return model, count_train_flops(config, topology, model, num_classes, image_size)
