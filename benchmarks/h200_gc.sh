#!/usr/bin/env bash
# One H200: with nvJPEG warmed up and 8 planning processes, one or two of 4 epochs still
# ran ~5% slower than the others (benchmarks/h200_real_data.sh, 2026-12-01 call 5).
# Python's garbage collections as a cause: synthetic data, then the gpu pipeline with
# every collection timed (GC_LOG), then the same with what exists frozen when fit
# starts (GC_FREEZE: gc.freeze). 20,480 JPEGs, ResNet-50 bf16 at 256, every callback.
set -u
export JPEGS_TRAIN=20480
source benchmarks/stages_env.sh
export TIMELINE=1 GC_LOG=1
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=4"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=80 --epochs=4
staged gpu 1 -- $JPG
staged gpu_freeze 1 GC_FREEZE=1 -- $JPG
tar czf $OUT/logs.tgz -C /tmp logs
