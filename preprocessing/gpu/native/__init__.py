"""The one floor that calls C libraries (ctypes): CUDA driver, nvJPEG, nvImageCodec,
memory pools, shared memory. Only preprocessing/gpu/ imports it."""
