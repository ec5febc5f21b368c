#!/usr/bin/env bash
# One H200: the GPU's hardware work queues. CUDA maps streams onto
# CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default); nvJPEG decodes on streams
# of its own, and one sharing a queue with XLA's compute stream waits behind the
# training step's queued kernels. With 32 queues: the contention probe, then the app
# on synthetic data and with the gpu pipeline (nvJPEG driven directly, and nvImageCodec's
# C API), ResNet-50 bf16 at 256, every callback on.
set -u
source benchmarks/stages_env.sh
export CUDA_DEVICE_MAX_CONNECTIONS=${CONNECTIONS:-32}
timeout 100 python3 benchmarks/decode_contention.py --folder /tmp/jpegs/train --out "$OUT" \
  --seconds 2 --variants nvjpeg_lanes3,c_hw_lanes3 > $L/contention.log 2>&1
echo "contention exit $?"; cut -c1-700 $L/contention.log | grep -E "^(c_|nvjpeg|Trace|[A-Za-z]*Error)" | tail -8
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
staged syn 1 -- $SYN
staged gpu_nv6 1 'STREAM_KW={"decoders": 6, "api": "nvjpeg"}' -- $JPG
staged gpu_c6 1 'STREAM_KW={"decoders": 6, "api": "c"}' -- $JPG
tar czf $OUT/logs.tgz -C /tmp logs
