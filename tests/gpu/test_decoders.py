"""The canvases and their decoders (preprocessing/gpu/decoders.py), without a GPU:
nvImageCodec's C API through its CPU backend, the bisection of refused batches, the
choice of canvases, and nvJPEG's warm-up when it fails."""

import types

import pytest

from gpu_helpers import (assert_close_to, assert_odd_files_handled, batches, jpegs,  # noqa: F401
                         odd_files, small_stream)
from preprocessing.gpu.decoders import (HostCanvases, NvImageCodecCanvases, NvjpegCanvases,
                                        decode_bisecting, make_canvases)
from preprocessing.gpu.native.nvimgcodec_c import package_dir
from preprocessing.gpu.options import GpuOptions

NVIMGCODEC = pytest.mark.skipif(
    package_dir() is None,
    reason="needs nvidia-nvimgcodec-cu13 (installed by the [test] and [gpu] extras)")


@NVIMGCODEC
def test_nvimgcodec_through_its_c_api_gives_the_cpu_decoders_batches(jpegs, odd_files):
    """The api="c" path end to end (planning, code streams with windows, decoding into
    the canvas slots, odd files to the CPU, the compiled step), with nvImageCodec's
    CPU backend standing in for the GPU's: the same batches as decoder="cpu"."""
    for train in (False, True):
        cpu = small_stream(jpegs, 8, train, decoder="cpu")
        c_api = small_stream(jpegs, 8, train, decoder="nvimgcodec", api="c", backend="default")
        assert c_api.options.decoder == "nvimgcodec"
        for ours, theirs in zip(batches(c_api, 3), batches(cpu, 3)):
            assert_close_to(ours, theirs)
        # nvImageCodec decoded every image, none went to the CPU decoder instead (a
        # training stream decodes a few batches ahead).
        decoded = sum(filler.decoded for filler in c_api._fillers)
        assert decoded >= 3 * 8 if train else decoded == 3 * 8
        c_api.close()
        cpu.close()

    records = [(path, label) for path, label, _ in odd_files]
    assert_odd_files_handled(small_stream(records, 4, False, decoder="nvimgcodec", api="c"),
                             odd_files)


def test_a_refused_batch_is_bisected_down_to_the_images_refused_alone():
    """nvJPEG refuses a whole batch for one bad image: the halves are tried again, so
    only the bad images go to the CPU, every good one is decoded exactly once by a
    call that succeeded, and one bad image in 256 costs 2 log2(256) + 1 calls."""
    def run(items, bad):
        calls, decoded = [], []

        def decode(part):
            calls.append(list(part))
            ok = not any(item in bad for item in part)
            decoded.extend(part if ok else [])
            return ok

        refused, count = decode_bisecting(decode, items)
        assert count == len(calls)
        assert sorted(decoded) == sorted(set(items) - set(bad))  # each exactly once
        return refused, count

    assert run(list(range(10)), set()) == ([], 1)
    assert run(list(range(10)), {3, 7})[0] == [3, 7]  # in the batch's order
    assert run(list(range(256)), {200}) == ([200], 17)
    assert run(list(range(4)), {0, 1, 2, 3}) == ([0, 1, 2, 3], 7)


def test_one_place_picks_each_decoders_canvases():
    """decoder "cpu": host canvases; api "nvjpeg": GPUs only; api "c": nvImageCodec,
    keeping per shape the batches a lane can have in flight, plus one."""
    import jax

    device = jax.devices("cpu")[0]
    host = make_canvases(device, GpuOptions(decoder="cpu").resolved("cpu"), 4, True)
    assert isinstance(host, HostCanvases)
    with pytest.raises(ValueError, match="api='nvjpeg' decodes on GPUs only, got a cpu"):
        make_canvases(device, GpuOptions().resolved("nvimgcodec"), 4, True)
    if package_dir() is not None:
        options = GpuOptions(api="c", backend="default", prefetch=3, decoders=3)
        c_api = make_canvases(device, options.resolved("nvimgcodec"), 4, True)
        assert isinstance(c_api, NvImageCodecCanvases) and c_api.keep == 3


def test_a_failed_warm_up_warns_and_is_not_tried_again():
    """The warm-up only saves time: if it fails (no device memory for its scratch, a
    CUDA error, nvJPEG refusing the batch), it warns, the decoder counts as warmed up,
    and it is not tried again."""
    class NoMemory:
        calls = 0

        def use(self, ordinal):
            pass

        def alloc(self, size, pinned=False):
            NoMemory.calls += 1
            raise RuntimeError("cuMemAlloc failed: CUDA error 2")

    canvases = NvjpegCanvases.__new__(NvjpegCanvases)
    canvases.warmed_up, canvases.on_gpu = False, True
    canvases.cuda, canvases.ordinal = NoMemory(), 0
    canvases.decoder = types.SimpleNamespace(warm_scratch_bytes=lambda: 256 * 64 * 64 * 3)
    with pytest.warns(RuntimeWarning, match="warm-up failed .*CUDA error 2"):
        assert canvases.warm([b"jpeg"]) is False
    assert canvases.warmed_up and canvases.warm([b"jpeg"]) is True  # not tried again
    assert NoMemory.calls == 1

    class Memory(NoMemory):
        def alloc(self, size, pinned=False):
            return 1

        def free(self, pointer, pinned=False):
            pass

    canvases.cuda, canvases.warmed_up, canvases.stream = Memory(), False, 0
    canvases.decoder.warm = lambda jpegs, scratch, stream: False  # nvJPEG said no
    with pytest.warns(RuntimeWarning, match="refused a warm-up batch"):
        assert canvases.warm([b"jpeg"]) is False
