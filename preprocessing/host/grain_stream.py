"""The TensorFlow-free input pipeline on Google's grain, for the JAX backend.

The contract of `pipeline.py` (tf.data), built from `host/images.py`: `train_stream`
yields endless (images, labels) batches of this process's shard, reshuffled every
epoch from the seed, decoded in worker processes, from a checkpointable iterator
(JSON `get_state` / `set_state`: a resumed run continues the order mid-epoch);
`eval_stream` yields every image once, then weight-0 padding, in a fixed count.

Corrupt or unreadable images are skipped, never fatal, and counted as distinct
images: each record has one byte in a small memory-mapped file that any process
(the main one or a grain worker) sets when that record fails, so a file that
fails every epoch, or in two workers, counts once (`skipped_images()`).

Grain's workers are *spawned* processes (never forked): safe beside JAX's
threads, but each one imports this module afresh, and the main script must be
guarded by `if __name__ == "__main__"`. They die with the run, however it ends
(a SIGKILL included), and closing a stream stops them within seconds
(`_children.py`).
"""

from __future__ import annotations

import copy
import os
import threading

import grain
import numpy as np

from preprocessing.host import _children
from preprocessing.host import images as host_images
from preprocessing.host.grain_source import (  # noqa: F401 (FileSource: read as the streams')
    Decode,
    FileSource,
)

MAX_DEFAULT_WORKERS = 16
STATE_VERSION = 1


def default_workers() -> int:
    """Worker processes when none are asked for: the CPU cores we may use, capped."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_DEFAULT_WORKERS))


def _mp_prefetch(ds, workers: _children.Workers, buffer_size: int):
    """ds.mp_prefetch(...) in `workers`, once absl flags can be read (they may be
    unparsed)."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        # Trap (google/grain#1355): grain's multiprocessing reads absl flags, and
        # raises UnparsedFlagAccessError outside an absl app (tests, notebooks).
        flags.FLAGS.mark_as_parsed()
    return ds.mp_prefetch(grain.MultiprocessingOptions(
        num_workers=workers.count, per_worker_buffer_size=buffer_size),
        worker_init_fn=workers.init_fn())


# Grain's read-ahead checks every buffered element each time it hands one out, so its
# cost per image grows with the buffer: 28x28 JPEGs went from 1,641 to 5,780 images/sec
# in one process when the buffer went from a batch of 512 to 64 (commit 60af067).
# Two threads per process overlap file reads with decoding (simplejpeg and OpenCV
# release the GIL); 64 images keep both busy.
READ_AHEAD = 64


def _read_options(batch_size: int) -> grain.ReadOptions:
    return grain.ReadOptions(num_threads=2, prefetch_buffer_size=max(1, min(batch_size,
                                                                            READ_AHEAD)))


class TrainIterator:
    """An endless iterator of (images, labels) batches with a JSON-able state.

    Built lazily, or at once in the background by `start` (the worker processes then
    start while the model is built and compiled, instead of after: grain's first epoch
    otherwise ran its first batches at the pace of processes still starting); `set_state`
    rebuilds it from the state's seed, so a fresh pipeline restored from a state yields
    exactly what the original would have.
    """

    def __init__(self, source, batch_size, transform, seed, shard_index, shard_count,
                 workers):
        self._source, self._transform = source, transform
        self._config = {"version": STATE_VERSION, "records": len(source),
                        "batch_size": batch_size, "shard_index": shard_index,
                        "shard_count": shard_count, "workers": workers, "seed": seed}
        self._iterator = None
        self._early = None  # start(): (thread, [its first batch, its error])
        self._workers = _children.Workers(workers)

    def start(self) -> None:
        """Builds the pipeline and takes its first batch in a background thread, now."""
        if self._iterator is not None or self._early is not None:
            return
        result = [None, None]  # the first batch, or the error that stopped it

        def first():
            try:
                iterator = self._build()
                result[0] = next(iterator)
                self._iterator = iterator
            except BaseException as error:  # noqa: BLE001 - raised by the consumer
                result[1] = error

        thread = threading.Thread(target=first, daemon=True, name="grain_start")
        self._early = (thread, result)
        thread.start()

    def _early_batch(self):
        """The batch `start` took (None if none); waits for it; raises its error."""
        if self._early is None:
            return None
        thread, result = self._early
        thread.join()  # before reading the result: the thread writes it
        (batch, error), self._early = result, None
        if error is not None:
            raise error
        return batch

    def _build(self):
        c = self._config
        ds = grain.MapDataset.source(self._source)[c["shard_index"]::c["shard_count"]]
        if len(ds) < c["batch_size"]:
            raise ValueError(f"shard {c['shard_index']} holds {len(ds)} images, fewer "
                             f"than one batch of {c['batch_size']}")
        ds = ds.shuffle(seed=c["seed"]).repeat()  # reshuffled every epoch
        ds = ds.random_map(Decode(self._source, self._transform), seed=c["seed"])
        ds = ds.to_iter_dataset(_read_options(c["batch_size"]))
        # Trap: batching before mp_prefetch makes each worker build whole batches
        # (one shared-memory transfer per batch), so the order depends on the
        # number of workers: a state only restores with the same `workers`.
        ds = ds.batch(c["batch_size"], drop_remainder=True)
        if c["workers"]:
            ds = _mp_prefetch(ds, self._workers, buffer_size=2)
        iterator = iter(ds)
        self._workers.attach(iterator)  # close() ends it, even mid-way through start()
        return iterator

    def __iter__(self):
        return self

    def __next__(self):  # noqa: D105
        batch = self._early_batch()
        if batch is not None:
            return batch
        if self._iterator is None:
            self._iterator = self._build()
        return next(self._iterator)

    def get_state(self) -> dict:
        """Where the stream stands: plain JSON (ints, strings, lists, dicts).

        Before the first batch is handed out, grain's state is None: the stream's
        start, which the seed decides. (Trap: asking grain for its state before its
        first batch makes it create its worker iterators unstarted, and they then
        start one at a time as the round robin reaches each: a process start and its
        imports per batch, 16 in a row, where the first next() starts them at once.)
        """
        if self._early is not None or self._iterator is None:
            return {**self._config, "grain": None}
        # A copy: grain may update the dicts it hands out as the stream moves on.
        return copy.deepcopy({**self._config, "grain": self._iterator.get_state()})

    def set_state(self, state: dict) -> None:
        """Continues from `state` (from get_state, possibly of another process)."""
        for key in ("version", "records", "batch_size", "shard_index", "shard_count",
                    "workers"):
            if state.get(key) != self._config[key]:
                raise ValueError(f"input state has {key}={state.get(key)!r}, but this "
                                 f"pipeline has {key}={self._config[key]!r}")
        self.close()
        self._config["seed"] = state["seed"]
        if state["grain"] is None:  # the stream's start: built on the first next()
            return
        self._iterator = self._build()
        self._iterator.set_state(state["grain"])
        # grain's set_state leaves its workers unstarted, to start one by one as the
        # round robin reaches each; start them all now, together.
        if hasattr(self._iterator, "start_prefetch"):
            self._iterator.start_prefetch()

    def skipped_images(self) -> int:
        return self._source.skipped_images()

    def close(self) -> None:
        """Stops the worker processes within seconds, also stopped or hung ones (also
        done at exit and at garbage collection)."""
        self._workers.close()
        if self._early is not None:  # its next() ends once the stream is closed
            self._early[0].join(_children.STOP_SECONDS)
            self._early = None
            self._workers.close()  # a stream it built meanwhile
        self._iterator = None


def train_stream(source: FileSource, batch_size: int, transform, seed: int | None,
                 shard_index: int = 0, shard_count: int = 1,
                 workers: int | None = None) -> TrainIterator:
    """An endless stream of shuffled, augmented (images, labels) training batches.

    Args:
        source: every record of the dataset; this process reads its shard only.
        batch_size: images per batch of this process (the remainder is dropped).
        transform: fn(bytes, numpy Generator) -> image (host_images.train_transform).
        seed: None for a fresh random order; else reproducible (0 to 2**32 - 1).
        shard_index: this process's index among `shard_count`.
        shard_count: processes sharing the dataset; shard i has records i::count.
        workers: decoding processes; 0 decodes in this process; None: one per core.

    Returns:
        A TrainIterator yielding (images [B, S, S, 3], labels int32 [B]).
    """
    if not 0 <= shard_index < shard_count:
        raise ValueError(f"shard_index {shard_index} is not in [0, {shard_count})")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    workers = default_workers() if workers is None else workers
    return TrainIterator(source, batch_size, transform, int(seed), shard_index,
                         shard_count, workers)


class EvalStream:
    """Re-iterable: each pass yields every image of the shard once (see eval_stream)."""

    def __init__(self, source, batch_size, transform, blank, shard, workers, examples):
        self._source, self._batch_size, self._blank = source, batch_size, blank
        self._shard = shard
        self._workers = _children.Workers(workers)
        self._map = Decode(source, transform)
        here = len(range(shard[0], len(source), shard[1]))
        if examples is not None and examples < here:
            raise ValueError(f"examples={examples} is fewer than the {here} images of "
                             f"validation shard {shard[0]}")
        self.num_batches = max(1, -(-(here if examples is None else examples) // batch_size))

    def __iter__(self):
        index, count = self._shard
        ds = grain.MapDataset.source(self._source)[index::count].map(self._map)
        ds = ds.to_iter_dataset(_read_options(self._batch_size))
        if self._workers.count:
            ds = _mp_prefetch(ds, self._workers, buffer_size=self._batch_size)
        iterator = iter(ds)
        self._workers.attach(iterator)  # also closed at exit, mid-evaluation
        try:
            for _ in range(self.num_batches):
                yield self._next_batch(iterator)
        finally:
            self._workers.close()

    def _next_batch(self, iterator):
        images = np.empty((self._batch_size, *self._blank.shape), self._blank.dtype)
        labels = np.zeros(self._batch_size, np.int32)
        weights = np.zeros(self._batch_size, np.float32)
        for i in range(self._batch_size):
            image, label = next(iterator, (self._blank, 0))
            images[i], labels[i] = image, label
            weights[i] = 1.0 if image is not self._blank else 0.0
        return images, labels, weights

    def skipped_images(self) -> int:
        return self._source.skipped_images()


def eval_stream(source: FileSource, batch_size: int, transform, image_size: int,
                dtype: str = "float32", *, examples: int | None = None,
                shard_index: int = 0, shard_count: int = 1, workers: int | None = None):
    """Every validation image of this shard once, as (images, labels, weights).

    The batches after the last image are filled with weight-0 blank images, so
    every batch has the same shape and the weighted top-1 counts exactly the real
    images; corrupt images are skipped (counted) and the padding keeps the count.

    Args:
        source: the validation records.
        batch_size: images per batch of this process.
        transform: fn(bytes) -> image (host_images.eval_transform).
        image_size: side of the images (for the blank padding).
        dtype: dtype of the images ("float32" or "bfloat16").
        examples: the images of the largest shard of any process (as in
            pipeline.eval_stream), so that every process runs as many batches;
            default: this shard's.
        shard_index: this process's index among `shard_count`.
        shard_count: processes sharing the validation set.
        workers: decoding processes (0: this process; None: one per core).

    Returns:
        (an iterable that can be iterated once per evaluation, number of batches).
    """
    blank = np.zeros((image_size, image_size, 3), host_images.numpy_dtype(dtype))
    workers = default_workers() if workers is None else workers
    stream = EvalStream(source, batch_size, transform, blank, (shard_index, shard_count),
                        workers, examples)
    return stream, stream.num_batches
