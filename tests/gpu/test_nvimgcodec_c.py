"""nvImageCodec's C API through ctypes (preprocessing/gpu/native/nvimgcodec_c.py), on the CPU.

The GPU pipeline calls the same functions with device memory and a CUDA stream; here
nvImageCodec's CPU backend (libjpeg-turbo) decodes into host memory, which checks
every struct the binding lays out (instance, decoder, code stream views, image
infos, backends, allocators) and the statuses, against PIL on the same files.
"""

import ctypes
import io
import os
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from preprocessing.gpu.native import nvimgcodec_c as c
from preprocessing.gpu.native.memory_pool import Pool

pytestmark = pytest.mark.skipif(
    c.package_dir() is None,
    reason="needs nvidia-nvimgcodec-cu13 (installed by the [test] and [gpu] extras)")

SENTINEL = 7


def write_jpeg(path, height, width, seed, **options):
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 255, (max(2, height // 8), max(2, width // 8), 3)).astype(np.uint8)
    pixels = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC))
    Image.fromarray(pixels).save(path, format="JPEG", **options)
    return np.asarray(Image.open(path).convert("RGB"))


@pytest.fixture(scope="module")
def decoder():
    return c.Decoder(c.CPU_ONLY_DEVICE, backends=[("cpu", 1.0)], options=":fancy_upsampling=1")


def canvas_images(decoder, canvas, sizes):
    """One image per slot of `canvas` [n, H, W, 3], each (h, w) at the slot's origin."""
    pitch = canvas.shape[2] * 3
    return [decoder.image(canvas[i].ctypes.data, h, w, pitch) for i, (h, w) in enumerate(sizes)]


def test_whole_images_and_windows_decode_like_libjpeg_into_their_slots(tmp_path, decoder):
    files = [(tmp_path / "a.jpg", write_jpeg(tmp_path / "a.jpg", 50, 70, 0, quality=95)),
             (tmp_path / "b.jpg", write_jpeg(tmp_path / "b.jpg", 33, 41, 1, quality=80,
                                             subsampling=0)),
             (tmp_path / "c.jpg", write_jpeg(tmp_path / "c.jpg", 64, 48, 2, quality=90))]
    regions = [None, (3, 5, 20, 30), (17, 0, 47, 48)]  # (y, x, h, w)
    expected = [pixels if r is None else pixels[r[0]:r[0] + r[2], r[1]:r[1] + r[3]]
                for (_, pixels), r in zip(files, regions)]
    canvas = np.full((3, 64, 80, 3), SENTINEL, np.uint8)
    streams = [decoder.code_stream(str(path), region) for (path, _), region in zip(files, regions)]
    images = canvas_images(decoder, canvas, [e.shape[:2] for e in expected])
    assert decoder.decode(streams, images) == [True, True, True]
    for slot, want in zip(canvas, expected):
        h, w = want.shape[:2]
        assert np.abs(slot[:h, :w].astype(int) - want).max() <= 1
        outside = np.ones(slot.shape[:2], bool)
        outside[:h, :w] = False
        assert (slot[outside] == SENTINEL).all()  # nothing written past the window


def test_files_it_cannot_parse_have_no_code_stream(tmp_path, decoder):
    (tmp_path / "noise.jpg").write_bytes(os.urandom(3000))
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="PNG")
    (tmp_path / "png.JPEG").write_bytes(buffer.getvalue())
    assert decoder.code_stream(str(tmp_path / "noise.jpg")) is None
    assert decoder.code_stream(str(tmp_path / "png.JPEG")) is None  # a PNG is not a JPEG
    assert decoder.code_stream(str(tmp_path / "missing.jpg")) is None
    assert decoder.decode([], []) == []


def test_a_damaged_file_fails_alone_and_never_crashes_the_batch(tmp_path, decoder):
    good = write_jpeg(tmp_path / "good.jpg", 40, 40, 3, quality=90)
    data = (tmp_path / "good.jpg").read_bytes()
    (tmp_path / "corrupt.jpg").write_bytes(data[:600] + os.urandom(len(data) - 600))
    (tmp_path / "truncated.jpg").write_bytes(data[: len(data) // 3])
    names = ["good.jpg", "corrupt.jpg", "truncated.jpg", "good.jpg"]
    streams = [decoder.code_stream(str(tmp_path / n)) for n in names]
    kept = [i for i, s in enumerate(streams) if s is not None]
    assert 0 in kept and 3 in kept
    canvas = np.full((4, 40, 40, 3), SENTINEL, np.uint8)
    images = canvas_images(decoder, canvas, [(40, 40)] * 4)
    statuses = decoder.decode([streams[i] for i in kept], [images[i] for i in kept])
    ok = dict(zip(kept, statuses))
    assert ok[0] and ok[3]
    for i in (0, 3):
        assert np.abs(canvas[i].astype(int) - good).max() <= 1


def test_a_decoder_takes_pools_as_its_allocators(tmp_path):
    pools = [Pool(lambda size: 0, lambda pointer: None) for _ in range(2)]
    decoder = c.Decoder(c.CPU_ONLY_DEVICE, backends=[("cpu", 1.0)], device_pool=pools[0],
                        pinned_pool=pools[1])
    pixels = write_jpeg(tmp_path / "a.jpg", 24, 32, 4, quality=95)
    canvas = np.zeros((1, 24, 32, 3), np.uint8)
    assert decoder.decode([decoder.code_stream(str(tmp_path / "a.jpg"))],
                          canvas_images(decoder, canvas, [(24, 32)])) == [True]
    assert np.abs(canvas[0].astype(int) - pixels).max() <= 1
    decoder.close()


# (ctypes class, C type, fields to place) for every struct the binding lays out.
LAYOUTS = [
    (c._Region, "nvimgcodecRegion_t", ["ndim", "end", "out_of_bounds_samples"]),
    (c._CodeStreamView, "nvimgcodecCodeStreamView_t", ["region", "bitstream_offset"]),
    (c._Orientation, "nvimgcodecOrientation_t", ["flip_y"]),
    (c._PlaneInfo, "nvimgcodecImagePlaneInfo_t", ["row_stride", "sample_type", "precision"]),
    (c._ImageInfo, "nvimgcodecImageInfo_t", ["color_spec", "orientation", "num_planes",
                                             "plane_info", "buffer", "buffer_kind",
                                             "cuda_stream"]),
    (c._BackendParams, "nvimgcodecBackendParams_t", ["load_hint", "load_hint_policy"]),
    (c._Backend, "nvimgcodecBackend_t", ["kind", "params"]),
    (c._DeviceAllocator, "nvimgcodecDeviceAllocator_t", [("device_malloc", "malloc"),
                                                          ("device_mem_padding", "padding")]),
    (c._PinnedAllocator, "nvimgcodecPinnedAllocator_t", [("pinned_free", "free"),
                                                          ("pinned_mem_padding", "padding")]),
    (c._ExecutionParams, "nvimgcodecExecutionParams_t", ["pinned_allocator", "executor",
                                                         "device_id", "skip_pre_sync",
                                                         "num_backends", "backends"]),
    (c._DecodeParams, "nvimgcodecDecodeParams_t", ["apply_exif_orientation"]),
    (c._InstanceCreateInfo, "nvimgcodecInstanceCreateInfo_t", ["extension_modules_path",
                                                               "message_category"]),
]
TYPES = {c._Region: "REGION", c._CodeStreamView: "CODE_STREAM_VIEW",
         c._Orientation: "ORIENTATION", c._PlaneInfo: "IMAGE_PLANE_INFO",
         c._ImageInfo: "IMAGE_INFO", c._BackendParams: "BACKEND_PARAMS", c._Backend: "BACKEND",
         c._DeviceAllocator: "DEVICE_ALLOCATOR", c._PinnedAllocator: "PINNED_ALLOCATOR",
         c._ExecutionParams: "EXECUTION_PARAMS", c._DecodeParams: "DECODE_PARAMS",
         c._InstanceCreateInfo: "INSTANCE_CREATE_INFO"}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to compile nvimgcodec.h")
def test_every_struct_matches_the_header_compiled_by_a_c_compiler(tmp_path):
    """Sizes, field offsets and structure-type numbers of the ctypes structs against
    nvimgcodec.h from the installed wheel, as a C compiler lays it out."""
    (tmp_path / "cuda_runtime_api.h").write_text("typedef struct CUstream_st* cudaStream_t;\n")
    lines, expected = [], []
    for cls, ctype, fields in LAYOUTS:
        lines.append(f'printf("%zu\\n", sizeof({ctype}));')
        expected.append(ctypes.sizeof(cls))
        for field in fields:
            c_name, py_name = field if isinstance(field, tuple) else (field, field)
            lines.append(f'printf("%zu\\n", offsetof({ctype}, {c_name}));')
            expected.append(getattr(cls, py_name).offset)
        lines.append(f'printf("%d\\n", (int)NVIMGCODEC_STRUCTURE_TYPE_{TYPES[cls]});')
        expected.append(cls.TYPE)
    source = tmp_path / "layout.c"
    source.write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"nvimgcodec.h\"\n"
                      "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    include = os.path.join(c.package_dir(), "include")
    subprocess.run(["gcc", f"-I{tmp_path}", f"-I{include}", str(source), "-o",
                    str(tmp_path / "layout")], check=True, capture_output=True)
    printed = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True,
                             text=True).stdout.split()
    assert [int(v) for v in printed] == expected
