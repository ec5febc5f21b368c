#!/usr/bin/env bash
# One H200: the gpu pipeline's decoding under contention. First the app (ResNet-50 bf16
# at 256, every callback on, ~10,000 ImageNet-sized JPEGs, first epoch warm-up) on
# synthetic data and with the candidate decoders; then benchmarks/decode_contention.py
# (the stream's rate under an idle GPU, a shallow and a deep queue of GPU work, and a
# busy GIL). One line per app run; logs in $OUT/logs.tgz, $OUT/decode_contention.json.
set -u
source benchmarks/stages_env.sh
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
staged syn 1 -- $SYN
staged gpu_hw3 1 'STREAM_KW={"decoders": 3, "backend": "hw"}' -- $JPG
staged gpu_hwcuda3 1 'STREAM_KW={"decoders": 3, "backend": "hw+cuda"}' -- $JPG
staged gpu_hw6 1 'STREAM_KW={"decoders": 6, "backend": "hw"}' -- $JPG
timeout ${MICRO_TIMEOUT:-200} python3 benchmarks/decode_contention.py --folder /tmp/jpegs/train \
  --out "$OUT" --seconds 4 > $L/contention.log 2>&1
echo "contention exit $?"; cut -c1-600 $L/contention.log | grep -v "^\s*$" | tail -12
tar czf $OUT/logs.tgz -C /tmp logs
