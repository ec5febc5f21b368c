"""The tf.data input pipeline and its TensorFlow image ops (the TensorFlow backend).

- pipeline.py: the tf.data pipeline shared by every real-image dataset;
- images.py: pure image functions (TensorFlow ops): decode, crop, resize, flip, color,
  normalize.
"""
