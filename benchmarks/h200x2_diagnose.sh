#!/usr/bin/env bash
# Two H200s, one call: (1) what slows training beside the gpu pipeline, on one GPU:
# the crop/resize step's GPU time alone (benchmarks/canvas_step_time.py), synthetic
# training alone and beside a GpuJpegStream decoding in a thread (with and without
# its crop/resize step: benchmarks/gpu_stages.py SHADOW_*), the gpu pipeline itself;
# (2) real-JPEG scaling to two GPUs with per-replica BatchNorm (the default now);
# (3) two GPUs on synthetic data with XLA's latency-hiding scheduler, for the gradient
# all-reduce's overlap with the backward pass. ResNet-50 bf16, 256 per GPU, every
# callback on, first epoch warm-up. Prints one line per run; logs in $OUT/logs.tgz.
# PART=diagnose runs (1) only (one GPU is enough), PART=scale (2) and (3); default both.
set -u
source benchmarks/stages_env.sh
PART=${PART:-all}
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG1="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
JPG2="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=20"
staged syn1 1 -- $SYN
staged gpu1 1 -- $JPG1
if [ "$PART" != scale ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 60 python3 benchmarks/canvas_step_time.py 2>&1 \
    | grep canvas_step | tee $L/canvas_step.txt
  staged syn1_shadow 1 SHADOW_FOLDER=/tmp/jpegs -- $SYN
  staged syn1_shadow_nostep 1 SHADOW_FOLDER=/tmp/jpegs SHADOW_NO_STEP=1 -- $SYN
fi
if [ "$PART" != diagnose ]; then
  staged syn2 2 -- $SYN
  staged gpu2 2 -- $JPG2
  staged syn2_lhs 2 XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true -- $SYN
fi
