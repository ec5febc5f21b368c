"""The tf.data pipeline shared by every real-image dataset.

Built the way TensorFlow's tf.data performance guide says: the source interleaves
its files in parallel (TFDS does it for its shards), small datasets are cached
encoded, the order is shuffled every epoch, decoding and augmentation run as a
parallel map, training batches drop the remainder, everything is prefetched, and
the order is non-deterministic (faster) unless a seed was given.

Input records are (encoded image bytes, label) pairs, or read_files' (key, bytes,
label) records, already this process's shard. Unreadable and corrupt images are
dropped (`ignore_errors`) and counted once each, never fatal.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
CACHE_MAX_EXAMPLES = 50_000  # cache the encoded bytes of datasets up to this size
SHUFFLE_BUFFER = 10_000


def _key(values: tf.Tensor) -> tf.Tensor:
    """An int64 key per image: a fingerprint of its path (or of its bytes)."""
    return tf.strings.to_hash_bucket_fast(values, 2**63 - 1)


@dataclasses.dataclass
class DecodeCounter:
    """Counts the distinct images that could not be read or decoded.

    Every image has a key: its path where the pipeline reads files (read_files),
    else its bytes. Two tables hold the keys tried and the keys decoded; an image
    tried and never decoded is corrupt, however often it was tried (every epoch,
    every evaluation). An image cut off in flight when a pipeline stops was tried
    and not decoded either: where its path is known, it is decoded once more here,
    so only images that really fail are counted.
    """

    tried: object = None
    decoded: object = None
    paths: dict = dataclasses.field(default_factory=dict)  # key -> path
    checked: dict = dataclasses.field(default_factory=dict)  # key -> fails when re-decoded
    swept: bool = False  # the garbage collected once, as the counts are first read

    def __post_init__(self):
        with tf.device("/cpu:0"):
            self.tried, self.decoded = (tf.lookup.experimental.MutableHashTable(
                tf.int64, tf.int64, default_value=0) for _ in range(2))

    def mark_tried(self, key: tf.Tensor):
        return self.tried.insert(key, tf.ones_like(key))

    def wrap(self, fn):
        """fn(*args) -> image, as fn'(key, *args): the key counts as decoded only once
        fn has succeeded."""

        def counted(key, *args):
            start = self.mark_tried(key)
            with tf.control_dependencies([start]):
                image = fn(*args)
            with tf.control_dependencies([image]):
                done = self.decoded.insert(key, tf.ones_like(key))
            with tf.control_dependencies([done]):
                return tf.identity(image)

        return counted

    def skipped(self) -> int:
        """Distinct images dropped as unreadable or corrupt (read after a run)."""
        failed = self._failed()
        return sum(1 for key in failed if self._confirmed(key))

    def skipped_paths(self) -> list:
        """The paths of the skipped images whose paths are known, sorted."""
        return sorted(self.paths[key] for key in self._failed()
                      if key in self.paths and self._confirmed(key))

    def _failed(self) -> set:
        import gc

        # Finished iterators shut their pipelines down once collected. A full collection
        # of TensorFlow's heap takes 0.23 s on a CPU, after the bill's end: once is
        # enough, as the counts are read after the run.
        if not self.swept:
            gc.collect()
            self.swept = True
        return set(self.tried.export()[0].numpy().tolist()) - set(
            self.decoded.export()[0].numpy().tolist())

    def _confirmed(self, key) -> bool:
        """Whether image `key`, tried and not decoded, really fails (decoded once more
        here, once, where its path is known)."""
        from preprocessing.tfdata.images import decodes_file

        if key not in self.paths:
            return True
        if key not in self.checked:
            self.checked[key] = not decodes_file(self.paths[key])
        return self.checked[key]


def _options(deterministic: bool) -> tf.data.Options:
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = True
    options.experimental_optimization.map_parallelization = True
    return options


def read_files(paths: list[str], labels: list[int], counter: DecodeCounter) -> tf.data.Dataset:
    """(key, encoded bytes, label) of each file, read in parallel; an unreadable file
    is tried (and so counted) but yields nothing."""
    if paths:
        keys = _key(tf.constant(paths)).numpy().tolist()
        counter.paths.update(zip(keys, paths))

    def read(path, label):
        key = _key(path)
        with tf.control_dependencies([counter.mark_tried(key)]):
            return key, tf.io.read_file(path), label

    records = tf.data.Dataset.from_tensor_slices(
        (tf.constant(paths, tf.string), tf.constant(labels, tf.int64)))
    return records.map(read, num_parallel_calls=AUTOTUNE)


def _keyed(records: tf.data.Dataset) -> tf.data.Dataset:
    """(key, encoded, label) records: read_files' as they are, (encoded, label) keyed
    by their bytes."""
    if len(records.element_spec) == 3:
        return records
    return records.map(lambda encoded, label: (_key(encoded), encoded, label))


def decode_once(records: tf.data.Dataset, counter: DecodeCounter) -> tf.data.Dataset:
    """(key, pixels uint8 [H, W, C], label) of every image that decodes, cached decoded:
    the `device` pipeline's form on TensorFlow (decoded once, augmented every epoch
    from the cache). Undecodable images are dropped and counted."""
    from preprocessing.tfdata.images import decode

    decoded = _keyed(records).map(
        lambda key, encoded, label: (key, counter.wrap(decode)(key, encoded), label),
        num_parallel_calls=AUTOTUNE, deterministic=True).ignore_errors()
    return decoded.cache()


def pixel_records(images, labels) -> tf.data.Dataset:
    """(key, pixels, label) records of uint8 images already in memory ([N, H, W, C])."""
    keys = tf.range(len(labels), dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices((keys, images, tf.constant(labels, tf.int64)))


def train_stream(records: tf.data.Dataset, examples: int, transform, batch_size: int,
                 seed: int | None, counter: DecodeCounter,
                 cached: bool = False) -> tf.data.Dataset:
    """An endless stream of shuffled, augmented (images, labels) training batches.

    Args:
        records: (encoded, label) of this process, one pass.
        examples: how many records there are (decides caching and shuffle buffer).
        transform: fn(encoded, seed) -> image (see tfdata/images.py, train_transform).
        batch_size: images per batch of this process.
        seed: None for a fresh, non-deterministic order; else reproducible.
        counter: counts corrupt images.
        cached: the records are cached already (decode_once, pixel_records).
    """
    deterministic = seed is not None
    records = _keyed(records)
    if examples <= CACHE_MAX_EXAMPLES and not cached:
        records = records.cache()
    records = records.shuffle(min(examples, SHUFFLE_BUFFER), seed=seed,
                              reshuffle_each_iteration=True).repeat()
    # One stateless seed per image, itself drawn from the run's seed.
    seeds = tf.data.Dataset.random(seed=seed).batch(2, drop_remainder=True)
    images = tf.data.Dataset.zip((records, seeds)).map(
        lambda record, pair: (counter.wrap(transform)(record[0], record[1], pair), record[2]),
        num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    images = images.ignore_errors()
    batches = images.batch(batch_size, drop_remainder=True, num_parallel_calls=AUTOTUNE,
                           deterministic=deterministic)
    return batches.prefetch(AUTOTUNE).with_options(_options(deterministic))


def eval_stream(records: tf.data.Dataset, examples: int, transform, batch_size: int,
                image_size: int, dtype: str, counter: DecodeCounter, cached: bool = False):
    """Every validation image of this process once, as (images, labels, weights).

    The last batch is filled with weight-0 blank images, so every batch has the
    same static shape and the weighted top-1 counts exactly the real images.

    Returns:
        (dataset, number of batches).
    """
    batches = max(1, -(-examples // batch_size))
    records = _keyed(records)
    if examples <= CACHE_MAX_EXAMPLES and not cached:
        records = records.cache()
    real = records.map(
        lambda key, encoded, label: (counter.wrap(transform)(key, encoded), label,
                                     tf.constant(1.0)),
        num_parallel_calls=AUTOTUNE, deterministic=True).ignore_errors()
    blank = (tf.zeros([image_size, image_size, 3], dtype), tf.constant(0, tf.int64),
             tf.constant(0.0))
    padding = tf.data.Dataset.from_tensors(blank).repeat()
    # take() keeps the batch count fixed even if corrupt images were dropped.
    stream = (real.map(lambda i, l, w: (i, tf.cast(l, tf.int64), w))
              .concatenate(padding).take(batches * batch_size)
              .batch(batch_size, drop_remainder=True))
    return stream.prefetch(AUTOTUNE).with_options(_options(True)), batches
