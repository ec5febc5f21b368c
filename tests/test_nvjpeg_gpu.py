"""nvJPEG's hardware decoder driven directly (GpuJpegStream(api="nvjpeg")), on a GPU.

These tests need an NVIDIA GPU with JPEG engines (A100, H100, H200) and skip
elsewhere; they import neither TensorFlow nor the TensorFlow-based test helpers, so
the GPU machine runs them as they are: benchmarks/h200_real_data.sh does.
"""

import numpy as np
import pytest

from photos import assorted_jpegs, encode, photo
from preprocessing import augment
from preprocessing.gpu_pipeline import GpuJpegStream
from preprocessing.jpeg_header import read_jpeg_header

COLORS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40)]
STD = np.asarray(augment.STDDEV_RGB, np.float32)


@pytest.fixture(scope="module", autouse=True)
def gpu_with_engines():
    import jax

    from preprocessing import nvjpeg_c

    if jax.devices()[0].platform != "gpu" or nvjpeg_c.library_path() is None:
        pytest.skip("needs an NVIDIA GPU with JPEG engines (A100, H100, H200) and "
                    "nvidia-nvjpeg; benchmarks/h200_real_data.sh runs these on the H200")


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """24 JPEGs of assorted (non-square) sizes, a gray and a progressive one among them."""
    return assorted_jpegs(tmp_path_factory.mktemp("jpegs"))


def pixels_of(images):
    return np.asarray(images, np.float32) * STD + np.asarray(augment.MEAN_RGB, np.float32)


def batches(stream, count):
    return [tuple(np.asarray(a) for a in next(stream)) for _ in range(count)]


def stream(records, batch, train, **kwargs):
    return GpuJpegStream(records, batch, 32, seed=4, train=train, workers=0, **kwargs)


def test_the_hardware_decoder_gives_the_cpu_decoders_batches(jpegs):
    """Each window decoded where the plan put it (x and y not swapped, the row pitch
    kept): the same batches as decoder="cpu" within JPEG tolerance."""
    for train in (False, True):
        cpu = stream(jpegs, 8, train, decoder="cpu")
        hw = stream(jpegs, 8, train, decoder="nvimgcodec", api="nvjpeg", backend="hw")
        for ours, theirs in zip(batches(hw, 3), batches(cpu, 3)):
            assert all(np.array_equal(a, b) for a, b in zip(ours[1:], theirs[1:]))  # labels
            diff = np.abs(pixels_of(ours[0]) - pixels_of(theirs[0]))
            assert diff.mean() < 1.5 and diff.max() < 8.0, (diff.mean(), diff.max())
        assert sum(f.refused_batches for f in hw._fillers) == 0
        # What the engines do not take (the progressive JPEG) goes to the CPU; the
        # rest the engines decode, every one.
        engines = sum(read_jpeg_header(open(path, "rb").read()).hw_decodable
                      for path, _ in jpegs)
        assert engines == len(jpegs) - 1
        decoded = sum(f.decoded for f in hw._fillers)
        assert decoded >= engines if train else decoded == engines, (decoded, engines)
        hw.close()
        cpu.close()


def test_odd_files_are_decoded_on_the_cpu_or_skipped_and_counted(tmp_path):
    """A PNG and a CMYK JPEG named .JPEG, a truncated and a corrupt file: never a crash,
    never a wrong label; the two unreadable files are skipped and counted."""
    files = []
    for label in range(4):
        pixels = np.tile(np.array(COLORS[label], np.uint8), (48 + 8 * label, 64, 1))
        data = encode(pixels, fmt="PNG" if label == 1 else "JPEG",
                      mode="CMYK" if label == 2 else "RGB")
        files.append((data, label))
    whole = encode(photo(96, 128, 1))
    files += [(whole[: len(whole) * 3 // 4], 3), (b"\xff\xd8\xff\xe0 not a JPEG", 3)]
    records = []
    for i, (data, label) in enumerate(files):
        (tmp_path / f"{i}.JPEG").write_bytes(data)
        records.append((str(tmp_path / f"{i}.JPEG"), label))
    evaluation = stream(records, 4, False, decoder="nvimgcodec", api="nvjpeg", backend="hw")
    images, labels, weights = (np.concatenate([np.asarray(b[i]) for b in evaluation])
                               for i in range(3))
    assert weights[:6].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    for image, label, weight in zip(images, labels, weights):
        if weight:
            assert np.abs(pixels_of(image).mean((0, 1)) - COLORS[label]).max() < 12
    assert evaluation.skipped_images() == 2



def test_by_default_the_engines_decode_and_without_them_nvimgcodec_does(jpegs, monkeypatch):
    """The default (api=None, backend "hw") is nvJPEG's hardware decoder in 6 lanes; on
    a GPU whose engines cannot be used (nvjpegCreateEx fails, as on GPUs without
    them) the stream says so once and decodes the same batches with nvImageCodec."""
    from preprocessing import nvjpeg_c

    default = stream(jpegs, 8, False, decoder="nvimgcodec")
    assert (default.api, default.decoders) == ("nvjpeg", 6)
    expected = batches(default, 2)
    default.close()

    def no_engines(self, *args, **kwargs):
        raise RuntimeError("nvjpegCreateEx(hardware) failed: nvJPEG status 6")

    monkeypatch.setattr(nvjpeg_c.HardwareDecoder, "__init__", no_engines)
    with pytest.warns(RuntimeWarning, match="hardware decoder is unavailable"):
        fallback = stream(jpegs, 8, False, decoder="nvimgcodec")
    assert fallback.api == "c"
    for ours, theirs in zip(batches(fallback, 2), expected):
        assert np.array_equal(ours[1], theirs[1])
        diff = np.abs(pixels_of(ours[0]) - pixels_of(theirs[0]))
        assert diff.mean() < 1.5 and diff.max() < 8.0, (diff.mean(), diff.max())
    assert sum(f.decoded for f in fallback._fillers) > 0
    fallback.close()
    with pytest.raises(RuntimeError, match="status 6"):  # asked for by name: no fallback
        stream(jpegs, 8, False, decoder="nvimgcodec", api="nvjpeg")
