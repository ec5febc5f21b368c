#!/usr/bin/env bash
# One H200: how much the gpu pipeline's GPU work slows the training step (2026-12-01
# session 8: the step took 35.5 ms beside the pipeline against 32.2 on synthetic data,
# h200_shared.sh). Synthetic training alone, then beside a GpuJpegStream decoding
# 10,240 JPEGs in a thread as fast as it can (its batches dropped; gpu_stages.py
# SHADOW_FOLDER), with and without its crop/resize step (SHADOW_NO_STEP: nvJPEG alone).
# 2026-12-01 evening: with an 80 s limit both shadow runs were cut (the shadow slows
# the compile and the first epoch: 53 s), the first after one epoch; they have 130 s now.
set -u
export JPEGS_TRAIN=10240
source benchmarks/stages_env.sh
SYN="--dataset=synthetic --steps_per_epoch=40"
STAGED_TIMEOUT=80 staged syn 1 -- $SYN
STAGED_TIMEOUT=130 staged syn_shadow 1 SHADOW_FOLDER=/tmp/jpegs -- $SYN
STAGED_TIMEOUT=130 staged syn_shadow_nostep 1 SHADOW_FOLDER=/tmp/jpegs SHADOW_NO_STEP=1 -- $SYN
