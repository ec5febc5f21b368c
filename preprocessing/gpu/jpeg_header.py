"""What a JPEG's header says, read on the host without decoding anything.

The GPU pipeline draws each image's crop window before the image is decoded (so the
GPU decodes only that window, and the draws do not depend on which decoder ran), and
it sends to nvImageCodec only the JPEGs that nvJPEG decodes as TensorFlow would:
8-bit baseline/extended/progressive Huffman JPEGs with 1 or 3 components, whose
entropy-coded data ends in an EOI marker. Everything else (PNG named .JPEG, CMYK,
arithmetic-coded, 12-bit, truncated, not an image) goes to the CPU decoder.
"""

from __future__ import annotations

import dataclasses

_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers
_GPU_SOF = frozenset({0xC0, 0xC1, 0xC2})  # Huffman baseline, extended, progressive
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # markers without a length
_SOS = 0xDA
# The chroma layouts the hardware JPEG engines take, by luma sampling (chroma 1x1).
_LAYOUTS = {(1, 1): "444", (2, 1): "422", (2, 2): "420", (1, 2): "440"}


@dataclasses.dataclass(frozen=True)
class JpegHeader:
    """The frame header of a JPEG file."""

    height: int
    width: int
    components: int  # 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
    precision: int  # bits per sample
    sof: int  # the start-of-frame marker (0xC0 baseline, 0xC2 progressive, ...)
    complete: bool  # an EOI marker follows the first scan: not truncated
    sampling: tuple = ()  # (horizontal, vertical) sampling factors per component

    @property
    def gpu_decodable(self) -> bool:
        """Whether nvJPEG can decode it to the same RGB pixels as libjpeg."""
        return (self.sof in _GPU_SOF and self.precision == 8 and self.components in (1, 3)
                and self.complete)

    @property
    def hw_decodable(self) -> bool:
        """Whether the hardware JPEG engines take it too: baseline, and chroma 4:4:4,
        4:2:2, 4:2:0, 4:4:0 or gray (nvImageCodec's hw_decoder.cpp, canDecode)."""
        return self.gpu_decodable and self.sof == 0xC0 and self.layout != "other"

    @property
    def layout(self) -> str:
        """The chroma layout: "gray", "444", "422", "420", "440", or "other"."""
        if self.components == 1:
            return "gray"
        luma, *chroma = self.sampling or ((0, 0),)
        if self.components != 3 or any(c != (1, 1) for c in chroma):
            return "other"
        return _LAYOUTS.get(luma, "other")


def read_jpeg_header(data: bytes) -> JpegHeader | None:
    """The header of JPEG `data`, or None if `data` does not start like a JPEG.

    Reads markers up to the first start-of-scan; does not check the scan itself,
    except that an end-of-image marker comes after it (in entropy-coded data 0xFF
    is always followed by 0x00 or a restart marker, so 0xFFD9 there is the real EOI,
    not a byte pair inside the data; an EXIF thumbnail's EOI comes before the scan).
    """
    if len(data) < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    size, i, frame = len(data), 2, None
    while i + 4 <= size:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        if marker == 0xD9:  # EOI before any scan
            return None
        length = (data[i + 2] << 8) | data[i + 3]
        if length < 2:
            return None
        if marker in _SOF:
            components = data[i + 9] if i + 10 <= size else 0
            if i + 10 + 3 * components > size:
                return None
            precision = data[i + 4]
            height = (data[i + 5] << 8) | data[i + 6]
            width = (data[i + 7] << 8) | data[i + 8]
            sampling = tuple((data[i + 11 + 3 * c] >> 4, data[i + 11 + 3 * c] & 15)
                             for c in range(components))
            frame = (height, width, components, precision, marker, sampling)
        elif marker == _SOS:
            if frame is None or frame[0] == 0 or frame[1] == 0 or frame[2] == 0:
                return None  # no frame yet, or a DNL-defined height (not supported)
            complete = data.rfind(b"\xff\xd9", i + 2 + length) >= 0
            height, width, components, precision, marker, sampling = frame
            return JpegHeader(height, width, components, precision, marker, complete, sampling)
        i += 2 + length
    return None
