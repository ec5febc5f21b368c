"""The compiled crop/resize step (preprocessing/gpu/canvas.py) against TensorFlow's."""

import numpy as np

from preprocessing.gpu.canvas import make_canvas_step, normalize_host, resize_bilinear_host


def test_the_device_step_resizes_like_tensorflow():
    import tensorflow as tf

    rng = np.random.default_rng(1)
    step = make_canvas_step(24, "float32")
    canvas = rng.integers(0, 256, (3, 64, 96, 3), dtype=np.uint8)
    boxes = np.array([[0, 0, 64, 96], [5, 9, 30, 17], [10, 3, 1, 50]], np.int32)
    flips = np.array([False, True, False])
    sources = np.array([0, 1, 1], np.int32)  # the third image stands in from slot 1
    images, _ = step(canvas, sources, boxes, flips, np.array([True, True, False]))
    images = np.asarray(images)
    for i in range(2):
        y, x, h, w = boxes[i]
        expected = tf.image.resize(canvas[sources[i], y:y + h, x:x + w], [24, 24],
                                   method="bilinear", antialias=False).numpy()
        expected = expected[:, ::-1] if flips[i] else expected
        np.testing.assert_allclose(images[i], normalize_host(expected), atol=1e-4)
        np.testing.assert_allclose(resize_bilinear_host(canvas[sources[i], y:y + h, x:x + w], 24,
                                                        flip=bool(flips[i])), expected, atol=1e-3)
    assert not images[2].any()  # not valid: zeros
