"""Random access to a prepared TFDS split without TensorFlow (for grain).

`SplitReader` opens a split's ArrayRecord files through TFDS's own data source and
returns each record's encoded image bytes (TFDS never decodes them: the app's
pipelines do) and its label. `Records` is a lazy sequence of (getter, label) pairs
that grain's FileSource keeps whole (one reader, one label array), so its spawned
workers unpickle kilobytes, not an object per record. Reading a label means reading
its record, so the labels of a split are indexed once, beside dataset_info.json.
"""

from __future__ import annotations

import collections.abc
import json
import os
import sys

ARRAY_RECORD = "array_record"  # TFDS's name of the file format
LABELS_FILE = "app-labels-{split}.npz"  # beside dataset_info.json
LABEL_CHUNK = 4096  # records read at once while indexing the labels


class SplitReader:
    """One split of a prepared dataset, read at random through TFDS's ArrayRecord data
    source: no TensorFlow, the image feature's encoded bytes, never decoded by TFDS.

    Picklable in a few KB (TFDS's data source reopens its files lazily), so grain's
    spawned workers each get their own readers.
    """

    def __init__(self, builder, split: str, image_key: str, label_key: str):
        import tensorflow_datasets as tfds
        from tensorflow_datasets.core import example_parser

        self.split = split
        self.folder = os.fspath(builder.data_dir)
        self.source = builder.as_data_source(
            split=split, file_format=ARRAY_RECORD,
            deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES)
        features = builder.info.features
        # Parsers of one feature each: a record's other features are not converted.
        self._image_key, self._label_key = image_key, label_key
        self._image = example_parser.ExampleParserNp(
            {image_key: features[image_key].get_serialized_info()})
        self._label = example_parser.ExampleParserNp(
            {label_key: features[label_key].get_serialized_info()})
        self._files = [(os.fspath(f.filename), f.skip, f.take) for f in
                       tfds.core.data_sources.base.file_instructions(builder.info, split)]

    def __len__(self) -> int:
        return len(self.source)

    def image(self, index: int) -> bytes:
        """The encoded image of record `index` (OSError if it cannot be read: the
        pipelines skip and count such records like corrupt images)."""
        try:
            return bytes(self._image.parse_example(self.source[index])[self._image_key])
        except OSError:
            raise
        except Exception as error:
            raise OSError(f"record {index} of {self.split}: {error}") from error

    def read_labels(self) -> "np.ndarray":  # noqa: F821
        """Every record's label, in order (reads every record once)."""
        import numpy as np

        labels = np.empty(len(self), np.int32)
        for start in range(0, len(self), LABEL_CHUNK):
            keys = list(range(start, min(start + LABEL_CHUNK, len(self))))
            for key, record in zip(keys, self.source.__getitems__(keys)):
                labels[key] = int(self._label.parse_example(record)[self._label_key])
        return labels

    def fingerprint(self) -> str:
        """What the labels index depends on: the files read, their sizes, the ranges."""
        return json.dumps([(os.path.basename(path), os.path.getsize(path), skip, take)
                           for path, skip, take in self._files])


class RecordImage:
    """A zero-argument callable returning the encoded image of one record."""

    __slots__ = ("reader", "index")

    def __init__(self, reader: SplitReader, index: int):
        self.reader, self.index = reader, index

    def __call__(self) -> bytes:
        return self.reader.image(self.index)

    def __reduce__(self):
        return RecordImage, (self.reader, self.index)

    def __repr__(self) -> str:
        return f"{self.reader.split}[{self.index}]"


class Records(collections.abc.Sequence):
    """The (RecordImage, label) pairs of a split, made only when asked for, so a
    shard of ImageNet's 1.28 million records costs only its own objects."""

    def __init__(self, reader: SplitReader, labels, indices: range | None = None):
        self.reader, self.labels = reader, labels
        self.indices = range(len(labels)) if indices is None else indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Records(self.reader, self.labels, self.indices[i])
        index = self.indices[i]
        return RecordImage(self.reader, index), int(self.labels[index])

    def __iter__(self):
        for index in self.indices:
            yield RecordImage(self.reader, index), int(self.labels[index])

    # Random access without a getter per record: what a source (like grain_stream's
    # FileSource) can keep instead of one object per record, which its spawned workers
    # each unpickle (~6 s per worker for ImageNet's 1.28 million, on a CPU here).
    def read(self, i: int) -> bytes:
        """The encoded image of record `i` of this view."""
        return self.reader.image(self.indices[i])

    def label_array(self):
        """The labels of this view, as one numpy array."""
        import numpy as np

        i = self.indices
        return np.asarray(self.labels)[np.arange(i.start, i.stop, i.step)]


def labels_of(dataset: str, reader: SplitReader) -> "np.ndarray":  # noqa: F821
    """The split's labels, from the index beside the dataset, else read and saved."""
    import numpy as np

    path = os.path.join(reader.folder, LABELS_FILE.format(split=reader.split))
    fingerprint = reader.fingerprint()
    try:
        with np.load(path) as saved:
            if str(saved["fingerprint"]) == fingerprint:
                return saved["labels"]
    except (OSError, KeyError, ValueError):
        pass  # absent, unreadable or stale: read them again
    print(f"indexing the labels of {dataset} {reader.split} ({len(reader)} records; once, "
          f"kept in {path})", flush=True)
    labels = reader.read_labels()
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "wb") as f:
            np.savez(f, labels=labels, fingerprint=np.array(fingerprint))
        os.replace(partial, path)
    except OSError as error:
        print(f"note: could not keep the labels index ({error}); the next run reads them "
              "again", file=sys.stderr, flush=True)
        try:
            os.remove(partial)
        except OSError:
            pass
    return labels
