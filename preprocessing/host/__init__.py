"""The TensorFlow-free pipeline on the CPU: grain's streams (grain_stream.py) over the
split's records (grain_source.py), in worker processes that end with the run
(_children.py, through native/'s prctl), and the numpy image ops: decoding.py and
images.py (bit-for-bit the tf.data ones)."""
