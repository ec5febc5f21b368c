"""Model FLOPs utilization: how much of the devices' peak the model's math uses.

MFU = (training FLOPs per image x images per second) / (devices x dense bf16 peak
per device). FLOPs per image are XLA's count of the model's training step
(app/models/flops.py: any model, either backend); the peak comes from the price
catalog. Only the model's own math counts, so recomputation or the app's padded
ResNet stem never inflate it. Where the FLOPs could not be counted (None), MFU and
TFLOP/s are unknown (None), never 0.
"""

from __future__ import annotations

import keras


class ModelFlopsUtilization(keras.callbacks.Callback):
    """Turns the epoch's `epoch_images_per_sec` into achieved TFLOP/s and MFU.

    Publishes into epoch `logs`: `epoch_model_tflops_per_sec` and, when the peak is
    known, `epoch_mfu` (a fraction); the attributes hold the last epoch's. It reads
    `epoch_images_per_sec`, which the throughput callback puts into the logs when it
    runs first; epochs without it get nothing. (The run's MFU is `utilization` at the
    run's rate: app/run/summary.py.)

    Args:
        train_flops_per_image: forward + backward FLOPs of one training image, or
            None where they could not be counted.
        num_devices: devices over all processes.
        peak_tflops_per_device: dense bf16 peak of one device, or None if unknown.

    Example (after a Throughput callback, each epoch's MFU at 1 GFLOP an image on a
    device of 1 TFLOP/s: images/sec over 1,000):

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=[keras.metrics.SparseCategoricalAccuracy("top1")])
    >>> x, y = np.random.rand(256, 4), np.random.randint(0, 3, 256)
    >>> from callbacks.mfu import ModelFlopsUtilization
    >>> from callbacks.throughput import Throughput
    >>> callbacks = [Throughput(16),
    ...              ModelFlopsUtilization(1e9, peak_tflops_per_device=1.0)]
    >>> logs = model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=callbacks).history
    >>> round(logs["epoch_mfu"][0] * 1000 / logs["epoch_images_per_sec"][0], 6)
    1.0
    """

    def __init__(self, train_flops_per_image: float | None, num_devices: int = 1,
                 peak_tflops_per_device: float | None = None):
        super().__init__()
        if train_flops_per_image is not None and train_flops_per_image <= 0:
            raise ValueError(f"train_flops_per_image must be > 0, "
                             f"received {train_flops_per_image}")
        if peak_tflops_per_device is not None and peak_tflops_per_device <= 0:
            raise ValueError(f"peak_tflops_per_device must be > 0, "
                             f"received {peak_tflops_per_device}")
        self.train_flops_per_image = train_flops_per_image
        self.num_devices = num_devices
        self.peak_tflops_per_device = peak_tflops_per_device
        self.mfu = None
        self.model_tflops_per_sec = None

    def utilization(self, images_per_sec: float) -> float | None:
        """MFU at `images_per_sec`, or None without a peak or a FLOP count."""
        if self.peak_tflops_per_device is None or self.train_flops_per_image is None:
            return None
        achieved = self.train_flops_per_image * images_per_sec
        return achieved / (self.num_devices * self.peak_tflops_per_device * 1e12)

    def on_epoch_end(self, epoch, logs=None):
        rate = (logs or {}).get("epoch_images_per_sec")
        if rate is None or self.train_flops_per_image is None:
            return
        self.model_tflops_per_sec = self.train_flops_per_image * rate / 1e12
        logs["epoch_model_tflops_per_sec"] = self.model_tflops_per_sec
        self.mfu = self.utilization(rate)
        if self.mfu is not None:
            logs["epoch_mfu"] = self.mfu
