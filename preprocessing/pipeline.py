"""The tf.data pipeline shared by every real-image dataset.

Built the way TensorFlow's tf.data performance guide says: the source interleaves
its files in parallel (TFDS does it for its shards), small datasets are cached
encoded, the order is shuffled every epoch, decoding and augmentation run as a
parallel map, training batches drop the remainder, everything is prefetched, and
the order is non-deterministic (faster) unless a seed was given.

Input records are (encoded image bytes, label) pairs, already this process's shard.
Corrupt images are dropped (`ignore_errors`) and counted, never fatal.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
CACHE_MAX_EXAMPLES = 50_000  # cache the encoded bytes of datasets up to this size
SHUFFLE_BUFFER = 10_000


@dataclasses.dataclass
class DecodeCounter:
    """Counts images whose decoding was attempted and images that decoded."""

    attempted: tf.Variable = None
    decoded: tf.Variable = None

    def __post_init__(self):
        with tf.device("/cpu:0"):
            self.attempted = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.decoded = tf.Variable(0, dtype=tf.int64, trainable=False)

    def wrap(self, fn):
        """fn(*args) -> image, counted: `decoded` only moves once fn has succeeded."""

        def counted(*args):
            start = self.attempted.assign_add(1)
            with tf.control_dependencies([start]):
                image = fn(*args)
            with tf.control_dependencies([image]):
                done = self.decoded.assign_add(1)
            with tf.control_dependencies([done]):
                return tf.identity(image)

        return counted

    def skipped(self) -> int:
        """Times an image was dropped as corrupt (read at the end of a run).

        Images still in flight are counted as attempted but not decoded, so read
        this once the pipeline has stopped (the summary does, after training).
        """
        import gc

        gc.collect()  # let finished iterators shut their pipelines down first
        decoded = int(self.decoded.numpy())
        return max(0, int(self.attempted.numpy()) - decoded)


def _options(deterministic: bool) -> tf.data.Options:
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = True
    options.experimental_optimization.map_parallelization = True
    return options


def read_files(records: tf.data.Dataset) -> tf.data.Dataset:
    """(path, label) -> (encoded bytes, label), reading files in parallel."""
    return records.map(lambda path, label: (tf.io.read_file(path), label),
                       num_parallel_calls=AUTOTUNE)


def train_stream(records: tf.data.Dataset, examples: int, transform, batch_size: int,
                 seed: int | None, counter: DecodeCounter) -> tf.data.Dataset:
    """An endless stream of shuffled, augmented (images, labels) training batches.

    Args:
        records: (encoded, label) of this process, one pass.
        examples: how many records there are (decides caching and shuffle buffer).
        transform: fn(encoded, seed) -> image (see image_ops.train_transform).
        batch_size: images per batch of this process.
        seed: None for a fresh, non-deterministic order; else reproducible.
        counter: counts corrupt images.
    """
    deterministic = seed is not None
    if examples <= CACHE_MAX_EXAMPLES:
        records = records.cache()
    records = records.shuffle(min(examples, SHUFFLE_BUFFER), seed=seed,
                              reshuffle_each_iteration=True).repeat()
    # One stateless seed per image, itself drawn from the run's seed.
    seeds = tf.data.Dataset.random(seed=seed).batch(2, drop_remainder=True)
    images = tf.data.Dataset.zip((records, seeds)).map(
        lambda record, pair: (counter.wrap(transform)(record[0], pair), record[1]),
        num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    images = images.ignore_errors()
    batches = images.batch(batch_size, drop_remainder=True, num_parallel_calls=AUTOTUNE,
                           deterministic=deterministic)
    return batches.prefetch(AUTOTUNE).with_options(_options(deterministic))


def eval_stream(records: tf.data.Dataset, examples: int, transform, batch_size: int,
                image_size: int, dtype: str, counter: DecodeCounter):
    """Every validation image of this process once, as (images, labels, weights).

    The last batch is filled with weight-0 blank images, so every batch has the
    same static shape and the weighted top-1 counts exactly the real images.

    Returns:
        (dataset, number of batches).
    """
    batches = max(1, -(-examples // batch_size))
    if examples <= CACHE_MAX_EXAMPLES:
        records = records.cache()
    real = records.map(
        lambda encoded, label: (counter.wrap(transform)(encoded), label, tf.constant(1.0)),
        num_parallel_calls=AUTOTUNE, deterministic=True).ignore_errors()
    blank = (tf.zeros([image_size, image_size, 3], dtype), tf.constant(0, tf.int64),
             tf.constant(0.0))
    padding = tf.data.Dataset.from_tensors(blank).repeat()
    # take() keeps the batch count fixed even if corrupt images were dropped.
    stream = (real.map(lambda i, l, w: (i, tf.cast(l, tf.int64), w))
              .concatenate(padding).take(batches * batch_size)
              .batch(batch_size, drop_remainder=True))
    return stream.prefetch(AUTOTUNE).with_options(_options(True)), batches
