"""TensorFlow-free decoding of image bytes on the host, as tf.io.decode_image decodes.

Decoders, chosen from the bytes, never the name: JPEG with simplejpeg
(libjpeg-turbo, with TF's own settings: fast integer DCT, fancy upsampling, so the
pixels equal tf.io.decode_jpeg's), other formats with Pillow. Both are imported
lazily: importing this module costs only numpy.

Nothing is decoded whose header declares more than files.MAX_PIXELS pixels, and
`decodes_file` / `read_image_file` open only regular files of bounded size
(files.unreadable_why): a FIFO or a link to /dev/zero is never read. The crops,
resizes and colors that follow are images.py's.
"""

from __future__ import annotations

import functools
import io
import re

import numpy as np

from preprocessing.files import MAX_FILE_BYTES, MAX_PIXELS, unreadable_why

_MAX_JPEG_BYTES = 1 << 29  # TF refuses JPEGs whose decoded size reaches this
_ADOBE = re.compile(rb"\xff\xee..Adobe", re.DOTALL)


class UndecodableImage(ValueError):
    """The bytes are not an image we can decode: corrupt, truncated or unknown."""


def image_format(data: bytes) -> str | None:
    """'jpeg', 'png', 'gif', 'bmp', 'webp' from the magic bytes, else None."""
    if data[:3] == b"\xff\xd8\xff":  # what tf.io.is_jpeg checks
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:4] == b"GIF8":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def _decode_jpeg(data: bytes) -> np.ndarray:
    import simplejpeg

    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
        _check_pixels(height, width)
        if height * width * (4 if colorspace in ("CMYK", "YCCK") else 3) >= _MAX_JPEG_BYTES:
            raise UndecodableImage(f"JPEG of {height}x{width} is too large")
        try:
            # strict: raise on libjpeg warnings, so a truncated file fails as in TF.
            return _jpeg_pixels(data, colorspace, strict=True)
        except ValueError as e:
            # Trap: TF accepts JPEGs with benign warnings ("extraneous bytes before
            # marker"); it fails only when the data ends early (TF never recovers
            # truncated files). A file still needs its end marker to pass here.
            if "Premature end" in str(e) or b"\xff\xd9" not in data[-4096:]:
                raise
            return _jpeg_pixels(data, colorspace, strict=False)
    except (ValueError, OSError) as e:
        if isinstance(e, UndecodableImage):
            raise
        raise UndecodableImage(f"undecodable JPEG: {e}") from None


def _jpeg_pixels(data: bytes, colorspace: str, strict: bool) -> np.ndarray:
    import simplejpeg

    if colorspace not in ("CMYK", "YCCK"):
        return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True,
                                      fastupsample=False, strict=strict)
    # libjpeg-turbo cannot convert CMYK to RGB; TF does it by hand, like this.
    cmyk = simplejpeg.decode_jpeg(data, colorspace="CMYK", fastdct=True,
                                  fastupsample=False, strict=strict).astype(np.int32)
    if _ADOBE.search(data[:65536]):  # Adobe writes inverted CMYK
        rgb = cmyk[..., :3] * cmyk[..., 3:] // 255
    else:
        rgb = (255 - cmyk[..., :3]) * (255 - cmyk[..., 3:]) // 255
    return rgb.astype(np.uint8)


def _check_pixels(height: int, width: int) -> None:
    if height * width > MAX_PIXELS:
        raise UndecodableImage(f"{width}x{height} pixels: over the {MAX_PIXELS:,}-pixel "
                               "bound, not decoded")


@functools.cache
def pillow():
    """Pillow, told not to warn of large images (DecompressionBombWarning): the bound
    checked here from the header (MAX_PIXELS, Pillow's own) refuses them first; past
    twice it, Pillow's open raises DecompressionBombError, taken as undecodable."""
    import warnings

    from PIL import Image

    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    return Image


def _decode_pil(data: bytes) -> np.ndarray:
    Image = pillow()
    try:
        with Image.open(io.BytesIO(data)) as image:  # lazy: the header only
            _check_pixels(image.size[1], image.size[0])
            image.load()  # raises on truncated data (LOAD_TRUNCATED_IMAGES is off)
            if image.mode in ("I;16", "I;16B", "I;16L", "I"):
                # 16-bit grayscale: keep the high byte, as TF's uint16 -> uint8 does.
                gray = (np.asarray(image, dtype=np.int64) >> 8).clip(0, 255)
                return np.repeat(gray.astype(np.uint8)[..., None], 3, axis=2)
            # Alpha is dropped (not composited), as TF's channels=3 does.
            return np.asarray(image.convert("RGB"))
    except UndecodableImage:
        raise
    except Image.DecompressionBombError as e:  # Pillow's open refuses past twice the bound
        raise UndecodableImage(f"{e}: over the {MAX_PIXELS:,}-pixel bound, not decoded") \
            from None
    except Exception as e:  # noqa: BLE001 - Pillow raises many types on bad data
        raise UndecodableImage(f"undecodable image: {type(e).__name__}: {e}") from None


def decode(data: bytes) -> np.ndarray:
    """Decodes JPEG (RGB, grayscale, CMYK, YCCK), PNG, GIF, BMP or WebP bytes.

    The format is read from the bytes, so a PNG named .JPEG decodes correctly. GIFs
    give their first frame.

    Returns:
        uint8 array [height, width, 3], RGB.

    Raises:
        UndecodableImage: corrupt, truncated, empty or unknown data.
    """
    kind = image_format(data)
    if kind is None:
        raise UndecodableImage(f"unknown image format (first bytes {bytes(data[:8])!r})")
    image = _decode_jpeg(data) if kind == "jpeg" else _decode_pil(data)
    if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise UndecodableImage(f"decoded to an unusable shape {image.shape}")
    return image


def read_image_file(path: str) -> bytes:
    """The bytes of the image file at `path`, read only if it is a regular file of at
    most MAX_FILE_BYTES (a FIFO would block forever, /dev/zero never end).

    Raises:
        UndecodableImage: it is not such a file, or cannot be read.
    """
    why = unreadable_why(path)
    if why:
        raise UndecodableImage(f"{path}: {why}")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise UndecodableImage(f"{path}: {e.strerror or e}") from None


def decodes_file(path: str) -> bool:
    """Whether the file at `path` can be read and decoded by `decode`."""
    try:
        decode(read_image_file(path))
    except UndecodableImage:
        return False
    return True
