#!/usr/bin/env bash
# One H200: the gpu pipeline with more decoding lanes, a shorter GIL switch interval,
# and at batch 1,024, each against synthetic data at its batch in the same call
# (ResNet-50 bf16, every callback on, ~10,000 ImageNet-sized JPEGs, first epoch warm-up).
set -u
source benchmarks/stages_env.sh
SYN="--dataset=synthetic --throughput_warmup_steps=40 --steps_per_epoch=40"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
staged syn 1 -- $SYN
staged gpu_hw6 1 'STREAM_KW={"decoders": 6}' -- $JPG
staged gpu_hw12 1 'STREAM_KW={"decoders": 12}' -- $JPG
staged gpu_hw12_switch 1 SWITCH_INTERVAL=0.0005 'STREAM_KW={"decoders": 12}' -- $JPG
B="--global_batch_size=1024 --epochs=8 --throughput_warmup_steps=10"
STAGED_TIMEOUT=120 staged syn_b1024 1 -- $B --dataset=synthetic --steps_per_epoch=10
STAGED_TIMEOUT=130 staged gpu_hw4_b1024 1 'STREAM_KW={"decoders": 4}' -- $B \
  --dataset=folder:/tmp/jpegs --input_pipeline=gpu
