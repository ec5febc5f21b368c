#!/usr/bin/env bash
# One H200, one call: the gpu pipeline with the JPEG bytes handed over through shared
# memory (read_in="shared", the default since 2026-12-01 session 8) against through the
# planning pool's pipe (read_in="workers", the default before), A B A, beside synthetic
# data; 10,240 JPEGs, 3 epochs, ResNet-50 bf16 at 256, every callback, stage timeline.
# On this host the pipe carried at most 33 batches a second and cost the training
# process 29 ms of CPU a batch (benchmarks/plan_transfer.py). Then, BN_RELU=1: BatchNorm
# with its ReLU inside against the default layers at 256, A B A B (benchmarks/h200_bn_relu.sh's
# first half), into $OUT/variants_256.json.
set -u
export JPEGS_TRAIN=10240 TIMELINE=1 STAGED_TIMEOUT=80
source benchmarks/stages_env.sh
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=40
staged shared 1 -- $JPG
staged pipe 1 'STREAM_KW={"read_in": "workers"}' -- $JPG
staged shared2 1 -- $JPG
if [ "${BN_RELU:-0}" = 1 ]; then
  V=all_fast+argmax_pool+s2d16,default+relu_in_batchnorm
  timeout 230 python3 benchmarks/model_variants.py --batch=256 --steps=60 --variants=$V,$V \
    --out "$OUT/variants_256.json" > "$OUT/variants_256.log" 2>&1; echo "bn_relu 256 exit $?"
  grep '"variant"' "$OUT/variants_256.log" | cut -c1-160
fi
