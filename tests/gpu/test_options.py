"""The GPU stream's knobs (preprocessing/gpu/options.py): checked where they are made,
every None decided by the decoder, the API and the cores."""

import os

import pytest

from preprocessing.gpu.options import GpuOptions


def test_options_are_checked_where_they_are_made():
    with pytest.raises(ValueError, match="decoder must be one of"):
        GpuOptions(decoder="pil")
    with pytest.raises(ValueError, match="prefetch must be >= 1, got 0"):
        GpuOptions(prefetch=0)
    with pytest.raises(ValueError, match=r"backend must be one of \('default', 'hw'\), got 'cuda'"):
        GpuOptions(backend="cuda")
    with pytest.raises(ValueError, match=r"api must be one of \('c', 'nvjpeg'\), got 'python'"):
        GpuOptions(api="python")
    with pytest.raises(ValueError, match="api='nvjpeg' drives the hardware JPEG engines only: "
                                         "backend must be 'hw', got 'default'"):
        GpuOptions(api="nvjpeg", backend="default")
    with pytest.raises(ValueError, match="decoders must be >= 1, got 0"):
        GpuOptions(decoders=0)
    with pytest.raises(ValueError, match="read_in must be 'shared', 'workers' or 'stream', "
                                         "got 'disk'"):
        GpuOptions(read_in="disk")
    for read_in in ("shared", "workers"):
        with pytest.raises(ValueError, match=f"read_in='{read_in}' needs api='nvjpeg' "
                                             r"\(nvImageCodec's 'c' API"):
            GpuOptions(backend="default", read_in=read_in)
    with pytest.raises(ValueError, match=r"read_in='shared' needs planning processes"):
        GpuOptions(workers=0, read_in="shared")
    assert GpuOptions(canvas_sides=[512, 256.0]).canvas_sides == (256, 512)


def test_every_none_is_decided_by_the_decoder_the_api_and_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    default = GpuOptions().resolved("nvimgcodec")  # nvJPEG in 6 lanes, bytes shared
    assert (default.api, default.decoders, default.workers, default.read_in) == (
        "nvjpeg", 6, 8, "shared")
    c_api = GpuOptions(backend="default").resolved("nvimgcodec")  # it reads its files
    assert (c_api.api, c_api.decoders, c_api.workers, c_api.read_in) == ("c", 3, 8, "stream")
    cpu = GpuOptions(decoder="cpu").resolved("cpu")
    assert (cpu.decoder, cpu.decoders, cpu.workers) == ("cpu", 1, 14)
    here = GpuOptions(workers=0).resolved("nvimgcodec")  # the bytes are here already
    assert (here.workers, here.read_in) == (0, "workers")
    asked = GpuOptions(decoders=2, workers=3, read_in="stream").resolved("nvimgcodec")
    assert (asked.decoders, asked.workers, asked.read_in) == (2, 3, "stream")
