"""callbacks/mfu.py: model FLOPs utilization is achieved FLOPs over the devices' peak,
and unknown where the peak or the FLOPs are."""

import pytest

from callbacks.mfu import ModelFlopsUtilization


def test_mfu_arguments_are_checked_with_the_value_received():
    with pytest.raises(ValueError) as error:
        ModelFlopsUtilization(0)
    assert "train_flops_per_image must be > 0" in str(error.value)


def test_mfu_is_achieved_flops_over_peak():
    meter = ModelFlopsUtilization(24.5e9, num_devices=4, peak_tflops_per_device=125.0)
    logs = {"epoch_images_per_sec": 3128.0}
    meter.on_epoch_end(0, logs)
    assert logs["epoch_model_tflops_per_sec"] == pytest.approx(24.5e9 * 3128 / 1e12)
    assert logs["epoch_mfu"] == pytest.approx(24.5e9 * 3128 / (4 * 125e12))
    assert meter.utilization(3128.0) == logs["epoch_mfu"]
    no_peak = ModelFlopsUtilization(1e9)
    logs = {"epoch_images_per_sec": 10.0}
    no_peak.on_epoch_end(0, logs)
    assert "epoch_mfu" not in logs and no_peak.mfu is None
    uncounted = ModelFlopsUtilization(None, peak_tflops_per_device=125.0)
    logs = {"epoch_images_per_sec": 10.0}
    uncounted.on_epoch_end(0, logs)
    assert logs == {"epoch_images_per_sec": 10.0} and uncounted.utilization(10.0) is None
