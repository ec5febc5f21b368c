"""The training recipe: each model family's optimizer and defaults (flags.config.RECIPES),
what a flag overrides, what weight decay skips, gradient clipping."""

import keras
import numpy as np
import pytest

from app.engine import models, recipe
from flags import Config, ConfigError


@pytest.mark.parametrize("model, optimizer, lr, decay, warmup, clip", [
    ("resnet50", "sgd", 0.4, 5e-4, 1.0, 0.0),
    ("vit_b16", "adamw", 2.5e-4, 0.05, 5.0, 1.0),
    ("applications:ConvNeXtTiny", "adamw", 2.5e-4, 0.05, 5.0, 1.0),
    ("examples/my_model.py:make_model", "adamw", 2.5e-4, 0.05, 5.0, 1.0),
])
def test_each_family_gets_its_recipe_resolved_into_the_config(model, optimizer, lr, decay,
                                                              warmup, clip):
    config = Config(model=model, logdir="x")
    assert (config.optimizer, config.base_learning_rate, config.weight_decay,
            config.warmup_epochs, config.gradient_clip_norm) == (optimizer, lr, decay, warmup,
                                                                 clip)
    assert config.to_dict()["optimizer"] == optimizer  # config.json records what ran
    assert recipe.recipe_facts(config)["peak_learning_rate"] == lr * 64 / 256


def test_flags_override_the_recipe_and_an_optimizer_brings_its_own_defaults():
    config = Config(model="vit_s16", base_learning_rate=1e-3, gradient_clip_norm=0.0,
                    logdir="x")
    assert (config.optimizer, config.base_learning_rate, config.gradient_clip_norm,
            config.weight_decay) == ("adamw", 1e-3, 0.0, 0.05)
    sgd = Config(model="vit_s16", optimizer="sgd", logdir="x")
    assert (sgd.base_learning_rate, sgd.weight_decay, sgd.warmup_epochs) == (0.4, 5e-4, 1.0)
    assert Config(model="vit_s16", logdir="x").logdir != Config(model="vit_s16",
                                                                optimizer="sgd").logdir


@pytest.mark.parametrize("values, message", [
    ({"optimizer": "adam"}, "--optimizer='adam' is unknown; accepted: auto, sgd, adamw"),
    ({"gradient_clip_norm": -1.0}, "--gradient_clip_norm=-1.0 must be >= 0"),
    ({"model": "vgg16"}, "--model='vgg16' is unknown; accepted: small_resnet"),
    ({"model": "my.py"}, "FILE.py:FUNCTION (a function of (num_classes, image_size)"),
])
def test_bad_recipe_and_model_values_are_one_line(values, message):
    with pytest.raises(ConfigError) as error:
        Config(logdir="x", **values)
    assert message in str(error.value) and "\n" not in str(error.value)


def compiled(model_name, **changes):
    config = Config(model=model_name, logdir="x", **changes)
    model = models.make_model(model_name, 10, 32)
    recipe.compile_model(model, config, 10, steps_per_epoch=10)
    model.optimizer.build(model.trainable_variables)
    return model


def test_adamw_decays_kernels_but_no_bias_norm_or_position_embedding():
    model = compiled("vit_ti16", weight_decay=0.5, base_learning_rate=256.0, warmup_epochs=0.0)
    assert isinstance(model.optimizer, keras.optimizers.AdamW)
    before = {v.path: np.asarray(v) for v in model.trainable_variables}
    zeros = [np.zeros(v.shape, "float32") for v in model.trainable_variables]
    model.optimizer.apply(zeros, model.trainable_variables)
    changed = {v.path for v in model.trainable_variables
               if not np.array_equal(np.asarray(v), before[v.path])}
    skipped = {v.path for v in recipe.no_decay_variables(model)}
    assert any(p.endswith("position_embedding") for p in skipped)
    assert any(p.endswith("gamma") for p in skipped) and any(p.endswith("bias") for p in skipped)
    # a zero gradient moves only the decayed variables (the zero-initialized head stays 0)
    kernels = {v.path for v in model.trainable_variables if len(v.shape) > 1
               and np.abs(before[v.path]).max() > 0} - skipped
    assert changed == kernels


def test_sgd_for_the_resnets_and_the_global_norm_clipped_where_asked():
    sgd = compiled("small_resnet")
    assert isinstance(sgd.optimizer, keras.optimizers.SGD) and sgd.optimizer.global_clipnorm is None
    assert compiled("vit_ti16").optimizer.global_clipnorm == 1.0


@pytest.mark.parametrize("kind, warmup", [("cosine", 10), ("step", 10), ("cosine", 0)])
def test_the_schedule_gives_a_plain_step_the_rate_its_compiled_form_gives(kind, warmup):
    """The learning-rate callback asks with a plain step (no device operation to
    compile); the training step asks with the step variable. Both must agree."""
    schedule = recipe.WarmupSchedule(0.8, warmup_steps=warmup, total_steps=90, kind=kind)
    for step in (0, 1, 5, 9, 10, 11, 29, 30, 31, 59, 60, 61, 79, 80, 81, 89, 90, 120):
        device = float(keras.ops.convert_to_numpy(schedule(keras.ops.convert_to_tensor(
            step, "int64"))))
        host = schedule(step)
        assert isinstance(host, float)
        assert host == pytest.approx(device, rel=1e-5, abs=1e-7), (kind, step)
