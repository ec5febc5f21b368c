"""JPEGs decoded on the GPU and augmented there (JAX); see README.md beside this file.

- stream.py: real JPEGs into the model at accelerator speed (`GpuJpegStream`);
- options.py: the stream's knobs, each with why its default is what it is;
- planning.py: the host's share: one batch planned, without any GPU;
- jpeg_header.py: what a JPEG's header says, read on the host without decoding;
- threads.py: the threads and processes behind batches planned, then decoded;
- decoders.py: the canvases a batch is decoded into, one class per decoder;
- slices.py: one device's slice of a batch, from its planned slots to images;
- canvas.py: crop, resize, flip and normalize a whole batch in one compiled step;
- native/: the C libraries it calls (ctypes): CUDA driver, nvJPEG, nvImageCodec.
"""
