"""callbacks/learning_rate.py: the learning rate logged is the optimizer's own."""

import keras
import pytest

from tiny_keras import tiny_data, tiny_model


def test_the_learning_rate_logged_is_the_one_the_optimizer_uses_next():
    """Read from the schedule at the step count (host arithmetic for the app's own
    schedule), it must equal what the optimizer computes itself."""
    from app.models.recipe import WarmupSchedule
    from callbacks.learning_rate import LearningRateLogger

    for rate in (WarmupSchedule(0.5, warmup_steps=3, total_steps=12), 0.25,
                 keras.optimizers.schedules.CosineDecay(0.5, decay_steps=12)):
        model = tiny_model()
        model.compile(keras.optimizers.SGD(rate),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        logger = LearningRateLogger()
        history = model.fit(*tiny_data(32), batch_size=8, epochs=2, verbose=0,
                            callbacks=[logger])
        expected = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
        assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 8
        assert logger.learning_rate == pytest.approx(expected, rel=1e-6), rate
        assert history.history["learning_rate"][-1] == logger.learning_rate
    assert logger.learning_rate != history.history["learning_rate"][0]  # it moved
