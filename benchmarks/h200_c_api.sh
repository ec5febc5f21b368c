#!/usr/bin/env bash
# One H200: the gpu pipeline calling nvImageCodec's C API (GpuJpegStream(api="c"): pooled
# decoder memory, one GIL release per batch) against its Python binding and synthetic
# data, ResNet-50 bf16, every callback on, ~10,000 ImageNet-sized JPEGs, first epoch
# warm-up, at 256 and 1,024; then the decoding-under-contention probe for both APIs.
set -u
source benchmarks/stages_env.sh
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
staged syn 1 -- $SYN
staged gpu_py6 1 'STREAM_KW={"decoders": 6}' -- $JPG
staged gpu_c6 1 'STREAM_KW={"decoders": 6, "api": "c"}' -- $JPG
staged gpu_c3 1 'STREAM_KW={"decoders": 3, "api": "c"}' -- $JPG
B="--global_batch_size=1024 --epochs=8 --throughput_warmup_steps=10"
STAGED_TIMEOUT=150 staged syn_b1024 1 -- $B --dataset=synthetic --steps_per_epoch=10
STAGED_TIMEOUT=150 staged gpu_c4_b1024 1 'STREAM_KW={"decoders": 4, "api": "c"}' -- $B \
  --dataset=folder:/tmp/jpegs --input_pipeline=gpu
timeout 120 python3 benchmarks/decode_contention.py --folder /tmp/jpegs/train --out "$OUT" \
  --seconds 4 --variants hw_lanes3,c_hw_lanes1,c_hw_lanes3,c_hw_lanes6 > $L/contention.log 2>&1
echo "contention exit $?"; cut -c1-600 $L/contention.log | grep -v "^\s*$" | tail -6
tar czf $OUT/logs.tgz -C /tmp logs
