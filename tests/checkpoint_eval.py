"""The newest checkpoint of a digits run, evaluated apart, image by image: what its
logged val_loss and val_top1 must equal (tests/app/engine/test_distribute.py; test_train.py's
one-device check does the same by hand)."""

import os

import numpy as np


def evaluate_latest_checkpoint(config, digits_dir: str, classes: int = 10):
    """(the losses, the hits) of every validation image under the run's newest checkpoint,
    loaded on one device, with the run's label smoothing."""
    import keras

    from app import models
    from app.models import recipe
    from callbacks.checkpoint import WEIGHTS_FILE, latest_checkpoint
    from preprocessing.datasets import make_datasets
    from preprocessing.spec import BatchShape, InputSpec

    model = models.make_model(config.model, classes, config.image_size)
    recipe.compile_model(model, config, classes, config.steps_per_epoch)
    model.optimizer.build(model.trainable_variables)
    model.load_weights(os.path.join(latest_checkpoint(config.logdir)[0], WEIGHTS_FILE))
    data = make_datasets("digits", InputSpec(digits_dir, image_size=config.image_size,
                                             batch=BatchShape(64), seed=config.seed))
    smoothing, losses, hits = config.label_smoothing, [], []
    for images, labels, weights in data.validation:
        logits = keras.ops.convert_to_numpy(model(images, training=False)).astype("float64")
        labels, real = np.asarray(labels).reshape(-1), np.asarray(weights) > 0
        log_p = logits - logits.max(1, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
        target = smoothing / classes + (1 - smoothing) * np.eye(classes)[labels]
        losses += list(-(target * log_p).sum(1)[real])
        hits += list((logits.argmax(1) == labels)[real])
    return losses, hits
