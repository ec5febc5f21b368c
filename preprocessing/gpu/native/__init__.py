"""The GPU wing's floor that calls C libraries (ctypes): CUDA driver, nvJPEG, nvImageCodec,
memory pools, shared memory, host memory at an address. Only preprocessing/gpu/
imports it."""
