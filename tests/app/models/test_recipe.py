"""The training recipe: each model family's optimizer and defaults (flags.config.RECIPES),
what a flag overrides, what weight decay skips, gradient clipping."""

import keras
import numpy as np
import pytest

from app import models
from app.models import recipe
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
    # 64 images: a quarter of 256, so the square root's half of the rate
    assert recipe.recipe_facts(config)["peak_learning_rate"] == pytest.approx(lr / 2)


@pytest.mark.parametrize("batch, scale", [(16, 0.25), (64, 0.5), (255, (255 / 256) ** 0.5),
                                          (256, 1.0), (257, 257 / 256), (1024, 4.0)])
def test_the_rate_scales_linearly_from_256_up_and_by_the_square_root_below(batch, scale):
    config = Config(global_batch_size=batch, base_learning_rate=0.4, logdir="x")
    assert config.learning_rate == pytest.approx(0.4 * scale, rel=1e-12)
    # and the compiled model's optimizer steps at it once warmed up
    model = compiled("small_resnet", global_batch_size=batch, base_learning_rate=0.4,
                     warmup_epochs=0.0)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.4 * scale, rel=1e-6)


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


@pytest.mark.parametrize("epochs, steps_per_epoch, warmup_epochs, expected", [
    (1, 300, 1.0, 60),    # a one-epoch run warms up for a fifth of itself, then decays
    (2, 20, 1.0, 8),
    (15, 22, 1.0, 22),    # the default digits run: 1 of 15 epochs, as asked
    (90, 100, 5.0, 500),  # ImageNet's recipe: 5 of 90 epochs, as asked
    (1, 300, 0.0, 0),
])
def test_the_warm_up_is_at_most_a_fifth_of_the_run(epochs, steps_per_epoch, warmup_epochs,
                                                   expected):
    config = Config(epochs=epochs, warmup_epochs=warmup_epochs, logdir="x")
    assert recipe.warmup_steps_for(config, steps_per_epoch) == expected
    assert recipe.recipe_facts(config, steps_per_epoch)["warmup_steps"] == expected
    schedule = recipe.WarmupSchedule(1.0, expected, epochs * steps_per_epoch)
    assert schedule.host_value(epochs * steps_per_epoch - 1) < 0.01  # it ends decayed


@pytest.mark.parametrize("steps_per_epoch, momentum", [(300, 0.9), (20, 0.75), (5, 0.5)])
def test_batchnorm_averages_over_a_fifth_of_an_epoch_at_most(steps_per_epoch, momentum):
    """The moving statistics forget their initial values within the first epoch, nested
    models' too; a momentum already lower is kept."""
    inner = models.make_model("small_resnet", 10, 8)
    outer = keras.Sequential([keras.Input((8, 8, 3)), inner])
    recipe.fit_batchnorm_to_epoch(outer, steps_per_epoch)
    found = [layer.momentum for layer in inner.layers
             if isinstance(layer, keras.layers.BatchNormalization)]
    assert len(found) == 9 and found == pytest.approx([momentum] * 9)
    assert recipe.batchnorm_momentum(outer) == pytest.approx(momentum)
    assert momentum ** (steps_per_epoch) < 0.05  # what the first epoch's statistics hold
