"""nvJPEG's hardware decoder driven directly (GpuJpegStream(api="nvjpeg")), on a GPU.

These tests need an NVIDIA GPU with JPEG engines (A100, H100, H200) and skip
elsewhere; they import neither TensorFlow nor the TensorFlow-based test helpers, so
the GPU machine runs them as they are: `benchmarks/device_run.sh real_data` does.
"""

import numpy as np
import pytest

from gpu_helpers import (assert_close_to, assert_odd_files_handled, batches,  # noqa: F401
                         jpegs, odd_files, small_stream)
from photos import encode, photo
from preprocessing.gpu.jpeg_header import read_jpeg_header


@pytest.fixture(scope="module", autouse=True)
def gpu_with_engines():
    import jax

    from preprocessing.gpu.native import nvjpeg_c

    if jax.devices()[0].platform != "gpu" or nvjpeg_c.library_path() is None:
        pytest.skip("needs an NVIDIA GPU with JPEG engines (A100, H100, H200) and "
                    "nvidia-nvjpeg; benchmarks/device_run.sh real_data runs these on an H200")


def test_the_hardware_decoder_gives_the_cpu_decoders_batches(jpegs):
    """Each window decoded where the plan put it (x and y not swapped, the row pitch
    kept): the same batches as decoder="cpu" within JPEG tolerance."""
    for train in (False, True):
        cpu = small_stream(jpegs, 8, train, decoder="cpu")
        hw = small_stream(jpegs, 8, train, decoder="nvimgcodec", api="nvjpeg", backend="hw")
        for ours, theirs in zip(batches(hw, 3), batches(cpu, 3)):
            assert_close_to(ours, theirs)
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


def test_bytes_from_the_planning_processes_decode_like_bytes_read_again(jpegs):
    """read_in="shared" (the default: the planning processes write each file's bytes
    into shared memory) and "workers" (they send them with the plan) give exactly the
    batches of read_in="stream" (read again here); every shared-memory block is free
    again after a pass stopped mid-epoch and after each evaluation pass."""
    kwargs = dict(decoder="nvimgcodec", api="nvjpeg", backend="hw")
    shared = small_stream(jpegs, 8, True, workers=2, **kwargs)
    assert shared.options.read_in == "shared" and shared._spec.keep_bytes
    blocks = shared._blocks
    assert blocks.count == (max(2, 2 * 2) + shared.options.prefetch
                            + 2 * shared.options.decoders + 1)
    piped = small_stream(jpegs, 8, True, workers=2, read_in="workers", **kwargs)
    again = small_stream(jpegs, 8, True, read_in="stream", **kwargs)
    assert piped._blocks is None and again._blocks is None
    for ours, theirs, third in zip(batches(shared, 5), batches(again, 5), batches(piped, 5)):
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
        assert all(np.array_equal(a, b) for a, b in zip(third, theirs))
    shared.close()  # mid-epoch (5 of 3 batches an epoch: the second epoch)
    assert blocks.free() == blocks.count
    evaluation = small_stream(jpegs, 8, False, workers=2, **kwargs)
    for _ in range(2):
        assert len(list(evaluation)) == evaluation.num_batches
        assert evaluation._blocks.free() == evaluation._blocks.count
    for s in (evaluation, piped, again):
        s.close()


def test_the_step_is_compiled_before_training_asks(jpegs):
    """Each canvas shape's step is compiled when the stream is made: iterating then
    compiles nothing (a compile in training would hold a batch, so training)."""
    import logging

    import jax

    compiles = []

    class Count(logging.Handler):
        def emit(self, record):
            if "Finished XLA compilation" in record.getMessage():
                compiles.append(record.getMessage())

    warm = small_stream(jpegs, 8, True, decoder="nvimgcodec", canvas_sides=(128, 256, 512))
    assert warm.warmed.result(timeout=120) == 3
    handler = Count()
    logging.getLogger("jax").addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    try:
        batches(warm, 4)
    finally:
        jax.config.update("jax_log_compiles", False)
        logging.getLogger("jax").removeHandler(handler)
        warm.close()
    assert [c for c in compiles if "jit(step)" in c] == []


def test_odd_files_are_decoded_on_the_cpu_or_skipped_and_counted(odd_files):
    """A PNG and a CMYK JPEG named .JPEG, a truncated and a corrupt file: never a crash,
    never a wrong label; the two unreadable files are skipped and counted."""
    records = [(path, label) for path, label, _ in odd_files]
    evaluation = small_stream(records, 4, False, decoder="nvimgcodec", api="nvjpeg",
                              backend="hw")
    assert_odd_files_handled(evaluation, odd_files)


def test_one_bad_file_leaves_the_rest_of_its_batch_to_the_engines(jpegs, tmp_path):
    """A truncated JPEG among seven good ones: if nvJPEG refuses the batch for it, the
    halves are decoded again (decode_bisecting), so the seven still decode on the GPU;
    the truncated one is decoded on the CPU or skipped and counted, never a crash."""
    whole = encode(photo(96, 128, 2))
    (tmp_path / "cut.JPEG").write_bytes(whole[: len(whole) * 2 // 3])
    records = list(jpegs[:7]) + [(str(tmp_path / "cut.JPEG"), 0)]
    evaluation = small_stream(records, 8, False, decoder="nvimgcodec", api="nvjpeg",
                              backend="hw")
    engines = sum(read_jpeg_header(open(path, "rb").read()).hw_decodable
                  for path, _ in jpegs[:7])
    images, labels, weights = (np.asarray(a) for a in next(iter(evaluation)))
    assert sum(f.decoded for f in evaluation._fillers) >= engines
    assert weights[:7].tolist() == [1.0] * 7 and evaluation.skipped_images() <= 1
    evaluation.close()


def test_by_default_the_engines_decode_and_without_them_nvimgcodec_does(jpegs, monkeypatch):
    """The default (api=None, backend "hw") is nvJPEG's hardware decoder in 6 lanes; on
    a GPU whose engines cannot be used (nvjpegCreateEx fails, as on GPUs without
    them) the stream says so once and decodes the same batches with nvImageCodec."""
    from preprocessing.gpu.native import nvjpeg_c

    default = small_stream(jpegs, 8, False, decoder="nvimgcodec")
    assert (default.options.api, default.options.decoders) == ("nvjpeg", 6)
    expected = batches(default, 2)
    default.close()

    def no_engines(self, *args, **kwargs):
        raise RuntimeError("nvjpegCreateEx(hardware) failed: nvJPEG status 6")

    monkeypatch.setattr(nvjpeg_c.HardwareDecoder, "__init__", no_engines)
    with pytest.warns(RuntimeWarning, match="hardware decoder is unavailable"):
        fallback = small_stream(jpegs, 8, False, decoder="nvimgcodec")
    assert fallback.options.api == "c"
    for ours, theirs in zip(batches(fallback, 2), expected):
        assert_close_to(ours, theirs)
    assert sum(f.decoded for f in fallback._fillers) > 0
    fallback.close()
    with pytest.raises(RuntimeError, match="status 6"):  # asked for by name: no fallback
        small_stream(jpegs, 8, False, decoder="nvimgcodec", api="nvjpeg")


def test_after_the_warm_up_nvjpeg_takes_no_more_memory(tmp_path):
    """nvJPEG's hardware decoder grows its buffers (cuMemFree, then a larger
    cuMemAlloc) when a batch holds larger images than it has met. A fresh decoder
    does so on its first batch of large photos; one warmed up with warm_up_jpegs'
    made-up JPEGs of the same files takes no device memory over a dozen batches."""
    from preprocessing.gpu.native.cuda_driver import CudaDriver
    from preprocessing.gpu.decoders import NvjpegCanvases
    from preprocessing.gpu.planning import warm_up_jpegs

    rng = np.random.default_rng(0)
    paths = []
    for i in range(24):  # up to 1,400 px, as ImageNet's larger photos
        height, width = int(rng.integers(300, 1000)), int(rng.integers(400, 1400))
        (tmp_path / f"{i}.JPEG").write_bytes(encode(photo(height, width, i)))
        paths.append(str(tmp_path / f"{i}.JPEG"))
    datas = [open(p, "rb").read() for p in paths]
    headers = [read_jpeg_header(d) for d in datas]
    cuda = CudaDriver.get()

    def taken_by_batches(canvases, count):
        decoder, taken = canvases.decoder, []
        scratch = cuda.alloc(16 * 1024 * 1024 * 3)
        try:
            for _ in range(count):
                picks = rng.choice(len(datas), 16, replace=False)
                regions = [(0, 0, min(headers[i].height, 1024), min(headers[i].width, 1024))
                           for i in picks]
                before = cuda.free_memory()
                assert decoder.decode([datas[i] for i in picks], regions,
                                      [scratch + k * 1024 * 1024 * 3 for k in range(16)],
                                      [1024 * 3] * 16, canvases.stream)
                cuda.synchronize(canvases.stream)
                taken.append(before - cuda.free_memory())
        finally:
            cuda.free(scratch)
        return taken

    import jax

    device = jax.devices()[0]
    fresh = NvjpegCanvases(device, preallocate=(16, 1024))
    grew = taken_by_batches(fresh, 12)
    warmed = NvjpegCanvases(device, preallocate=(16, 1024))
    jpegs = warm_up_jpegs(paths)
    assert set(jpegs) == {"420"}
    assert warmed.warm(list(jpegs.values())) and warmed.warmed_up
    assert taken_by_batches(warmed, 12) == [0] * 12, grew
    assert sum(grew) > 0  # the fresh decoder did grow: the warm-up is what stopped it
