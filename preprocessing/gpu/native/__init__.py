"""The GPU wing's floor that calls C libraries (ctypes). Only preprocessing/gpu/ imports
it.

- cuda_driver.py: the few CUDA driver calls the GPU JPEG pipeline needs (libcuda.so.1);
- nvjpeg_c.py: nvJPEG's hardware batched decoder, into the caller's device memory;
- nvimgcodec_c.py: nvImageCodec's C API: a batch decoded into the caller's buffers;
- memory_pool.py: memory pools for the decoders' allocators, blocks reused;
- host_memory.py: host memory at a raw address, seen as a numpy array (no copy);
- shared_bytes.py: JPEG bytes from the planning processes to the training process,
  through shared memory.
"""
