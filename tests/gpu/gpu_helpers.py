"""What the GPU pipeline's tests share: JPEG files (fixtures: import them by name),
streams made small, and batches read back as pixels. No TensorFlow: the GPU machine
runs test_nvjpeg_on_gpu.py with these."""

import numpy as np
import pytest

from photos import assorted_jpegs, encode, photo
from preprocessing import augment
from preprocessing.gpu.options import GpuOptions
from preprocessing.gpu.stream import GpuJpegStream
from preprocessing.spec import BatchShape

STD = np.asarray(augment.STDDEV_RGB, np.float32)
COLORS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40)]
# JPEG tolerance, in gray levels (0-255): TensorFlow decodes and crops in one step
# (decode_and_crop_jpeg) while the pipeline decodes, then crops; both use
# libjpeg-turbo's fast integer DCT, so only chroma upsampling at the crop's edge
# and float rounding can differ.
MEAN_TOLERANCE, MAX_TOLERANCE = 0.5, 8.0


def write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """24 JPEGs of assorted (non-square) sizes, a gray and a progressive one among
    them, with labels."""
    return assorted_jpegs(tmp_path_factory.mktemp("jpegs"))


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory):
    """(path, label, kind): a PNG named .JPEG, a CMYK JPEG, a truncated and a corrupt
    file; each label's color is a solid color, so a wrong label would show."""
    folder = tmp_path_factory.mktemp("odd")
    files = []
    for label in range(4):
        color = np.array(COLORS[label], np.uint8)
        pixels = np.tile(color, (48 + 8 * label, 64, 1))
        kind, data = "jpeg", encode(pixels)
        if label == 1:
            kind, data = "png", encode(pixels, fmt="PNG")
        elif label == 2:
            kind, data = "cmyk", encode(pixels, mode="CMYK")
        files.append((write(folder / f"good_{label}.JPEG", data), label, kind))
    whole = encode(photo(96, 128, 1))  # long enough that the cut falls inside the scan
    files.append((write(folder / "truncated.JPEG", whole[: len(whole) * 3 // 4]), 3, "truncated"))
    files.append((write(folder / "corrupt.JPEG", b"\xff\xd8\xff\xe0 not a JPEG"), 3, "corrupt"))
    return files


def cpu(**options) -> GpuOptions:
    """GpuOptions of the CPU decoder (how most tests run the pipeline)."""
    return GpuOptions(decoder="cpu", **options)


def small_stream(records, batch: int, train: bool, **options) -> GpuJpegStream:
    """32-pixel images, seed 4, planned in this process unless `workers` says."""
    return GpuJpegStream(records, BatchShape(batch), 32, seed=4, train=train,
                         options=GpuOptions(**{"workers": 0, **options}))


def pixels_of(images) -> np.ndarray:
    """Normalized model input back to [0, 255] float32."""
    return np.asarray(images, np.float32) * STD + np.asarray(augment.MEAN_RGB, np.float32)


def batches(stream, count):
    return [tuple(np.asarray(a) for a in next(stream)) for _ in range(count)]


def assert_close_to(ours, theirs) -> None:
    """Two decoders' batches: the same labels (and weights), pixels within about a
    gray level on average. Two libjpeg set-ups (IDCT, chroma upsampling at the
    window's edge) differ that much: nvJPEG against the CPU decoder measured 0.73
    (eval) and 0.96 (train) on an H200 (2026-11-30-h200-gpu-jpeg.json at 35cc76c)."""
    assert all(np.array_equal(a, b) for a, b in zip(ours[1:], theirs[1:]))
    diff = np.abs(pixels_of(ours[0]) - pixels_of(theirs[0]))
    assert diff.mean() < 1.5 and diff.max() < MAX_TOLERANCE, (diff.mean(), diff.max())


def assert_odd_files_handled(evaluation, odd_files) -> None:
    """An evaluation stream of odd_files: the unreadable two weighted 0, skipped and
    counted once; every other image the color of its label."""
    images, labels, weights = (np.concatenate([np.asarray(b[i]) for b in evaluation])
                               for i in range(3))
    kinds = [kind for _, _, kind in odd_files]
    assert weights[:6].tolist() == [0.0 if k in ("truncated", "corrupt") else 1.0 for k in kinds]
    for image, label, weight in zip(images, labels, weights):
        if weight:  # the right color for the label: no image got another's label
            assert np.abs(pixels_of(image).mean((0, 1)) - COLORS[label]).max() < 12
    assert evaluation.skipped_images() == 2
