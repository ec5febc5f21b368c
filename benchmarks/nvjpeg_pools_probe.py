"""Whether nvJPEG's hardware decoder calls allocators it is given, on a GPU.

    python benchmarks/nvjpeg_pools_probe.py FOLDER

Creates nvJPEG's hardware backend with nvjpegCreateExV2 and stream-ordered device and
pinned allocators over two memory pools (preprocessing/memory_pool.py), prints its
status and the blocks each pool made, preallocates a batch of 16 at 1024 px and
decodes 16 of FOLDER's JPEGs (200x200 windows) into device memory, printing the blocks
again. Measured on an H200 (benchmarks/results/2026-12-01-h200-real-data-20k.json):
status 0, and no block ever asked for: the hardware backend allocates on its own.
"""

import ctypes
import glob
import sys

import jax

from preprocessing import nvjpeg_c
from preprocessing.cuda_driver import CudaDriver
from preprocessing.memory_pool import ALLOC, FREE, Pool, callbacks


class DevAllocatorV2(ctypes.Structure):  # nvjpegDevAllocatorV2_t
    _fields_ = [("dev_malloc", ALLOC), ("dev_free", FREE), ("dev_ctx", ctypes.c_void_p)]


class PinnedAllocatorV2(ctypes.Structure):  # nvjpegPinnedAllocatorV2_t
    _fields_ = [("pinned_malloc", ALLOC), ("pinned_free", FREE),
                ("pinned_ctx", ctypes.c_void_p)]


def main(folder: str) -> None:
    jax.devices()  # JAX's primary context exists
    cuda = CudaDriver.get()
    cuda.use(0)
    pools = {pinned: Pool(lambda size, pinned=pinned: cuda.alloc(size, pinned),
                          lambda pointer, pinned=pinned: cuda.free(pointer, pinned))
             for pinned in (False, True)}
    device = DevAllocatorV2(*callbacks(pools[False]), None)
    pinned = PinnedAllocatorV2(*callbacks(pools[True]), None)
    lib = nvjpeg_c.Library.get().slow
    handle, state = ctypes.c_void_p(), ctypes.c_void_p()
    status = lib.nvjpegCreateExV2(nvjpeg_c.BACKEND_HARDWARE, ctypes.byref(device),
                                  ctypes.byref(pinned), nvjpeg_c.FLAG_FANCY_UPSAMPLING,
                                  ctypes.byref(handle))
    print(f"nvjpegCreateExV2(hardware) status {status}; blocks: device "
          f"{pools[False].blocks}, pinned {pools[True].blocks}", flush=True)
    lib.nvjpegJpegStateCreate(handle, ctypes.byref(state))
    status = lib.nvjpegDecodeBatchedPreAllocate(handle, state, 16, 1024, 1024,
                                                nvjpeg_c.CSS_444, nvjpeg_c.OUTPUT_RGBI)
    print(f"preallocate status {status}; blocks: device {pools[False].blocks}, pinned "
          f"{pools[True].blocks}", flush=True)
    # A decode through the pooled handle: buffers for the bitstreams and the output
    # it would allocate here, if ever.
    datas = [open(path, "rb").read() for path in sorted(glob.glob(f"{folder}/*/*"))[:16]]
    output = cuda.alloc(16 * 200 * 600)
    stream, _ = cuda.new_stream()
    params = []
    for _ in datas:
        param = ctypes.c_void_p()
        lib.nvjpegDecodeParamsCreate(handle, ctypes.byref(param))
        lib.nvjpegDecodeParamsSetOutputFormat(param, nvjpeg_c.OUTPUT_RGBI)
        lib.nvjpegDecodeParamsSetROI(param, 0, 0, 200, 200)
        params.append(param.value)
    lib.nvjpegDecodeBatchedInitialize(handle, state, len(datas), 1, nvjpeg_c.OUTPUT_RGBI)
    images = (nvjpeg_c.NvjpegImage * len(datas))()
    for i, image in enumerate(images):
        image.channel[0], image.pitch[0] = output + i * 200 * 600, 600
    status = lib.nvjpegDecodeBatchedEx(
        handle, state, (ctypes.c_char_p * len(datas))(*datas),
        (ctypes.c_size_t * len(datas))(*[len(d) for d in datas]), images,
        (ctypes.c_void_p * len(datas))(*params), ctypes.c_void_p(stream))
    cuda.synchronize(stream)
    print(f"decode of {len(datas)} status {status}; blocks: device {pools[False].blocks}, "
          f"pinned {pools[True].blocks}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
