#!/usr/bin/env bash
# One H200: where the gpu pipeline loses its last 3-7% on h200_real_data.sh's set-up
# (20,480 JPEGs, 4 epochs of 80 steps, ResNet-50 bf16 at 256, every callback), with the
# stage timeline, Python's collections and every nvJPEG call (device memory it took):
# synthetic, the pipeline as it is twice (run-to-run spread), and with 8 lanes.
set -u
export JPEGS_TRAIN=20480 TIMELINE=1 GC_LOG=1 STAGED_TIMEOUT=130
source benchmarks/stages_env.sh
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=4"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=80 --epochs=4
staged gpu 1 NVJPEG_DETAIL=1 -- $JPG
staged gpu_b 1 NVJPEG_DETAIL=1 -- $JPG
staged lanes8 1 NVJPEG_DETAIL=1 'STREAM_KW={"decoders": 8}' -- $JPG
ls -la $OUT
