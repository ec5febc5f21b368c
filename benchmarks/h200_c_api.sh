#!/usr/bin/env bash
# One H200: the gpu pipeline with nvJPEG's hardware decoder driven directly on a stream
# of the highest priority (GpuJpegStream(api="nvjpeg")) against nvImageCodec's C API
# (api="c") and synthetic data, ResNet-50 bf16, every callback on, ~10,000 ImageNet-
# sized JPEGs, first epoch warm-up. PART=256 (default): the GPU tests of api="nvjpeg"
# (tests/test_nvjpeg_gpu.py; pytest carried in .whl), the decoding-under-contention
# probe (high against default priority), then the app at batch 256.
# PART=1024: synthetic and api="nvjpeg" at batch 1,024.
set -u
source benchmarks/stages_env.sh
PART=${PART:-256}
if [ "$PART" = 256 ]; then
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > $L/gpu_tests.log 2>&1
  echo "gpu tests exit $?"; grep -E "passed|failed|Error|assert" $L/gpu_tests.log | tail -8
  timeout 120 python3 benchmarks/decode_contention.py --folder /tmp/jpegs/train --out "$OUT" \
    --seconds 3 --variants c_hw_lanes3,nvjpeg_lanes3,nvjpeg_lanes3_low,nvjpeg_lanes6 \
    > $L/contention.log 2>&1
  echo "contention exit $?"; cut -c1-600 $L/contention.log | grep -E "^(c_|nvjpeg|Trace|[A-Za-z]*Error)" | tail -8
  SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
  JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
  staged syn 1 -- $SYN
  staged gpu_nv6 1 'STREAM_KW={"decoders": 6, "api": "nvjpeg"}' -- $JPG
  staged gpu_nv3 1 'STREAM_KW={"decoders": 3, "api": "nvjpeg"}' -- $JPG
else
  B="--global_batch_size=1024 --epochs=8 --throughput_warmup_steps=10"
  STAGED_TIMEOUT=150 staged syn_b1024 1 -- $B --dataset=synthetic --steps_per_epoch=10
  STAGED_TIMEOUT=150 staged gpu_nv4_b1024 1 'STREAM_KW={"decoders": 4, "api": "nvjpeg"}' -- $B \
    --dataset=folder:/tmp/jpegs --input_pipeline=gpu
fi
tar czf $OUT/logs.tgz -C /tmp logs
