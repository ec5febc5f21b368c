"""What a JPEG's header says (preprocessing/gpu/jpeg_header.py): its size, and whether
nvJPEG and the hardware JPEG engines decode it as libjpeg does."""

import io

from PIL import Image

from gpu_helpers import jpegs, odd_files  # noqa: F401 - fixtures
from photos import photo
from preprocessing.gpu.jpeg_header import read_jpeg_header


def test_jpeg_header_reads_size_and_routes_odd_files(jpegs, odd_files):
    for path, _ in jpegs:
        data = open(path, "rb").read()
        header = read_jpeg_header(data)
        width, height = Image.open(path).size
        assert (header.height, header.width) == (height, width) and header.gpu_decodable
    kinds = {kind: open(path, "rb").read() for path, _, kind in odd_files}
    assert read_jpeg_header(kinds["png"]) is None and read_jpeg_header(kinds["corrupt"]) is None
    cmyk = read_jpeg_header(kinds["cmyk"])
    assert cmyk.components == 4 and not cmyk.gpu_decodable
    truncated = read_jpeg_header(kinds["truncated"])
    assert truncated is not None and not truncated.complete and not truncated.gpu_decodable


def test_jpeg_header_knows_what_the_hardware_decoder_takes(tmp_path):
    image = Image.fromarray(photo(64, 80, 3))
    kinds = {}
    for name, kwargs in {"420": {}, "444": {"subsampling": 0}, "progressive":
                         {"progressive": True}}.items():
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90, **kwargs)
        kinds[name] = read_jpeg_header(buffer.getvalue())
    buffer = io.BytesIO()
    image.convert("L").save(buffer, format="JPEG", quality=90)
    kinds["gray"] = read_jpeg_header(buffer.getvalue())
    assert kinds["420"].sampling == ((2, 2), (1, 1), (1, 1)) and kinds["420"].hw_decodable
    assert kinds["444"].sampling == ((1, 1), (1, 1), (1, 1)) and kinds["444"].hw_decodable
    assert kinds["gray"].hw_decodable
    assert kinds["progressive"].gpu_decodable and not kinds["progressive"].hw_decodable
