#!/usr/bin/env bash
# One H200: the gpu pipeline with 1, 2 and 3 decoding lanes (batches decoded at once)
# against synthetic data, ResNet-50 bf16 at 256, every callback on, ~10,000
# ImageNet-sized JPEGs, first epoch warm-up; stages timed (benchmarks/gpu_stages.py).
# Prints one line per run; logs in $OUT/logs.tgz.
set -u
source benchmarks/stages_env.sh
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
staged syn1 1 -- $SYN
staged gpu_lanes2 1 'STREAM_KW={"decoders": 2}' -- $JPG
staged gpu_lanes3 1 'STREAM_KW={"decoders": 3}' -- $JPG
staged gpu_lanes1 1 'STREAM_KW={"decoders": 1}' -- $JPG
