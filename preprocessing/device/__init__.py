"""The device pipeline: a dataset decoded once and held in accelerator memory.

`decode.py` decodes (or takes as they are) a split's images into one packed uint8
buffer; `stream.py` puts each local device's share of it in that device's memory
and makes every batch there; `ops.py` is the compiled augmentation (the presets of
preprocessing/augment.py); `memory.py` says whether a dataset fits. JAX only: on
TensorFlow the same pipeline is tf.data with the decoded images cached
(preprocessing/streams.py, `_device`).
"""
