#!/usr/bin/env bash
# One H200: after the max-pool's hand-written gradient made the step faster (8,100 img/s
# at 256), the gpu pipeline reached 0.946 of synthetic data (h200_real_data.sh,
# 2026-12-01 session 7, 1.5 s of input waits). Which of its knobs feeds it faster:
# synthetic, then the gpu pipeline as it is, with more images to the hardware JPEG
# engines (hw_share 0.9, 1.0; the default 0.75 sends a quarter to CUDA decoders,
# which now share the SMs with a busier step), and one more batch prefetched.
# 10,240 JPEGs, 3 epochs, ResNet-50 bf16 at 256, every callback, stage timeline.
set -u
export JPEGS_TRAIN=10240 TIMELINE=1 STAGED_TIMEOUT=80
source benchmarks/stages_env.sh
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=40
staged gpu 1 -- $JPG
staged gpu_hw09 1 'STREAM_KW={"hw_share": 0.9}' -- $JPG
staged gpu_pf3 1 'STREAM_KW={"prefetch": 3}' -- $JPG
staged gpu_hw1 1 'STREAM_KW={"hw_share": 1.0}' -- $JPG
