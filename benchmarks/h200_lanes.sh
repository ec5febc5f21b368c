#!/usr/bin/env bash
# One H200: does decoding fewer batches at once slow the training step less? With the
# bytes through shared memory the lanes are never short of plans, and the step took
# 35.4-35.7 ms beside the pipeline against 32.2 on synthetic data (h200_shared.sh,
# 2026-12-01 evening). Synthetic, then the gpu pipeline with 6 lanes (the default), 3
# and 2, then 6 again; 10,240 JPEGs, 3 epochs, ResNet-50 bf16 at 256, every callback,
# stage timeline. Prepared 2026-12-01 (session 8), not yet run.
set -u
export JPEGS_TRAIN=10240 TIMELINE=1 STAGED_TIMEOUT=80
source benchmarks/stages_env.sh
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=40
staged lanes6 1 -- $JPG
staged lanes3 1 'STREAM_KW={"decoders": 3}' -- $JPG
staged lanes2 1 'STREAM_KW={"decoders": 2}' -- $JPG
staged lanes6b 1 -- $JPG
