"""The tf.data input pipeline and its TensorFlow image ops (the TensorFlow backend)."""
