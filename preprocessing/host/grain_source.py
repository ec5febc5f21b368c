"""What a grain stream reads: the split's records, by index, as (index, encoded bytes
or None, label) (`FileSource`), each decoded and transformed in whichever process
grain runs it (`Decode`), a bad one skipped and counted once, whichever process
skipped it (`SkipLog`: one byte a record in a small memory-mapped file). The streams
over them are grain_stream.py's.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref

import numpy as np

from preprocessing.host import images as host_images


class SkipLog:
    """One byte per record in a memory-mapped file shared by all processes."""

    def __init__(self, size: int):
        handle, self.path = tempfile.mkstemp(prefix="grain-skipped-", suffix=".bin")
        os.ftruncate(handle, max(1, size))
        os.close(handle)
        self._map = None
        self._finalizer = weakref.finalize(self, _remove, self.path)  # creator only

    def __getstate__(self):
        return {"path": self.path}  # workers reopen the file; they never delete it

    def __setstate__(self, state):
        self.path, self._map = state["path"], None

    def _bytes(self) -> np.ndarray:
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r+")
        return self._map

    def mark(self, index: int) -> None:
        self._bytes()[index] = 1  # a MAP_SHARED page: visible to every process

    def count(self) -> int:
        return int(np.count_nonzero(self._bytes()))

    def indices(self, size: int) -> list[int]:
        """The marked records among the first `size` (the file has >= 1 byte)."""
        return np.flatnonzero(self._bytes()[:size]).tolist()


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


class FileSource:
    """Random-access records (index, encoded bytes or None, label) for grain.

    Args:
        records: (path or zero-argument callable returning bytes, int label) pairs,
            or a reader with `read(i) -> bytes` and `label_array()` (TFDS splits).
            Paths are kept as one UTF-8 blob, so the source pickles quickly into
            each worker even for ImageNet's 1.28 million files.
    """

    def __init__(self, records):
        self._reader = None
        if hasattr(records, "read") and hasattr(records, "label_array"):
            # A random-access reader (tfds_data.Records): kept whole, so the source
            # pickles into each worker without one object per record.
            self._reader = records
            self._labels = np.asarray(records.label_array(), np.int32)
            self._blob = self._ends = self._getters = None
            self._skips = SkipLog(len(self._labels))
            return
        items = [item for item, _ in records]
        self._labels = np.asarray([int(label) for _, label in records], np.int32)
        if items and all(isinstance(item, str) for item in items):
            encoded = [item.encode() for item in items]
            self._blob = b"".join(encoded)
            self._ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
            self._getters = None
        else:
            self._blob, self._ends, self._getters = None, None, items
        self._skips = SkipLog(len(items))

    def __len__(self) -> int:
        return len(self._labels)

    def __getitem__(self, index: int):
        index = int(index)
        try:
            if self._reader is not None:
                data = self._reader.read(index)
            elif self._getters is None:
                start = int(self._ends[index - 1]) if index else 0
                with open(self._blob[start:int(self._ends[index])].decode(), "rb") as f:
                    data = f.read()
            else:
                item = self._getters[index]
                data = item() if callable(item) else item
        except OSError:
            data = None  # unreadable: skipped and counted like a corrupt image
        return index, data, int(self._labels[index])

    def mark_skipped(self, index: int) -> None:
        """Records that record `index` could not be used (idempotent)."""
        self._skips.mark(index)

    def skipped_images(self) -> int:
        """Distinct records of this source skipped so far, by any process."""
        return self._skips.count()

    def skipped_indices(self) -> list[int]:
        """The indices of the records skipped so far, by any process, ascending."""
        return self._skips.indices(len(self))


class Decode:
    """(index, bytes, label)[, rng] -> (image, label), or None for a bad image."""

    def __init__(self, source: FileSource, transform):
        self.source, self.transform = source, transform

    def __call__(self, record, *rng):
        index, data, label = record
        try:
            if data is None:
                raise host_images.UndecodableImage("unreadable file")
            return self.transform(data, *rng), np.int32(label)
        except host_images.UndecodableImage:
            self.source.mark_skipped(index)
            return None  # grain drops Nones before batching
