"""A split decoded once on the host, packed for the device: `DecodedSplit`.

The device pipeline holds each split as one uint8 buffer of pixels (image after
image, rows of `widths[i]` pixels from `offsets[i]`), one channel when every image
is gray (Fashion-MNIST, the digits) and three otherwise. Builders that own raw pixels
hand them in as they are (`DecodedSplit.from_array`); files and encoded records are
decoded here once, before the first epoch, by the host decoder grain uses
(preprocessing/host/images.py: libjpeg-turbo with TensorFlow's settings, Pillow for
the rest), in threads (both decoders release the GIL). Undecodable images are left
out and counted.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os

import numpy as np

# The packed buffer is indexed with int32 on the device: at most this many pixels.
MAX_PIXELS = 2**31 - 1


@dataclasses.dataclass
class DecodedSplit:
    """One split's images, decoded: the packed pixels and what locates each image."""

    flat: np.ndarray  # uint8 [total pixels, channels]
    offsets: np.ndarray  # int64 [N]: image i starts at pixel offsets[i]
    heights: np.ndarray  # int32 [N]
    widths: np.ndarray  # int32 [N]
    labels: np.ndarray  # int32 [N]
    skipped: int = 0  # records that could not be read or decoded (left out)
    skipped_names: list = dataclasses.field(default_factory=list)  # their paths, if paths

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def channels(self) -> int:
        return self.flat.shape[1]

    @property
    def nbytes(self) -> int:
        return int(self.flat.nbytes + self.labels.nbytes + 3 * 4 * len(self))

    @property
    def same_size(self) -> tuple | None:
        """(H, W) when every image has that size, else None."""
        if not len(self) or (self.heights != self.heights[0]).any() or (
                self.widths != self.widths[0]).any():
            return None
        return int(self.heights[0]), int(self.widths[0])

    def shard(self, index: int, count: int) -> "DecodedSplit":
        """Images index, index + count, ... (a device's or a process's share)."""
        chosen = np.arange(index, len(self), count)
        pieces = [self.flat[o:o + h * w] for o, h, w in zip(
            self.offsets[chosen], self.heights[chosen], self.widths[chosen])]
        return _pack(pieces, self.heights[chosen], self.widths[chosen], self.labels[chosen],
                     self.channels)

    @classmethod
    def from_array(cls, images: np.ndarray, labels) -> "DecodedSplit":
        """From uint8 [N, H, W] (gray) or [N, H, W, C] images, without copying them."""
        images = np.ascontiguousarray(images, np.uint8)
        if images.ndim == 3:
            images = images[..., None]
        count, height, width, channels = images.shape
        return cls(images.reshape(-1, channels), np.arange(count, dtype=np.int64) * height * width,
                   np.full(count, height, np.int32), np.full(count, width, np.int32),
                   np.asarray(labels, np.int32))


def _pack(pieces, heights, widths, labels, channels) -> DecodedSplit:
    sizes = np.asarray(heights, np.int64) * np.asarray(widths, np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    flat = np.concatenate(pieces) if pieces else np.zeros((0, channels), np.uint8)
    return DecodedSplit(flat.reshape(-1, channels), offsets, np.asarray(heights, np.int32),
                        np.asarray(widths, np.int32), np.asarray(labels, np.int32))


def _decode_one(item):
    """uint8 [H, W, 3], or None for what cannot be read or decoded. A path is read only
    if it is a regular file of bounded size; an image over the pixel bound is refused
    from its header (host/images.py)."""
    from preprocessing.host import images as host_images

    try:
        if isinstance(item, str):
            data = host_images.read_image_file(item)
        else:
            data = item() if callable(item) else item
        return host_images.decode(data)
    except (OSError, host_images.UndecodableImage):
        return None


def decode_records(records, threads: int | None = None) -> DecodedSplit:
    """Decodes (path, bytes or zero-argument callable, label) records into a split.

    Gray images (equal channels everywhere) are kept with one channel.
    """
    threads = threads or max(1, len(os.sched_getaffinity(0)))
    items = [item for item, _ in records]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        images = list(pool.map(_decode_one, items, chunksize=256))
    kept = [(image, int(label)) for image, (_, label) in zip(images, records) if image is not None]
    gray = all((image[..., 0] == image[..., 1]).all() and (image[..., 0] == image[..., 2]).all()
               for image, _ in kept)
    channels = 1 if gray and kept else 3
    pieces = [image[..., :channels].reshape(-1, channels) for image, _ in kept]
    split = _pack(pieces, [i.shape[0] for i, _ in kept], [i.shape[1] for i, _ in kept],
                  [label for _, label in kept], channels)
    split.skipped = len(records) - len(kept)
    split.skipped_names = [item for item, image in zip(items, images)
                           if image is None and isinstance(item, str)]
    return split
