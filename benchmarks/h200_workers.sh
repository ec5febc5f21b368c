#!/usr/bin/env bash
# One H200: with nvJPEG warmed up, the gpu pipeline's last epochs waited for plans
# (benchmarks/h200_warm_up.sh: fit waited 0.5 s in epoch 4, the lanes for plans, the
# planning thread for the 4 planning processes). The same run (20,480 JPEGs,
# ResNet-50 bf16 at 256, every callback on, 4 epochs of 80 steps, timeline) with 4,
# 6 and 8 planning processes; vmstat every second alongside (CPU busy, run queue).
set -u
export JPEGS_TRAIN=20480
source benchmarks/stages_env.sh
export TIMELINE=1
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=4"
for w in 4 6 8; do
  vmstat -n 1 > $L/vmstat_w$w.txt 2>&1 & V=$!
  staged gpu_w$w 1 "STREAM_KW={\"workers\": $w}" -- $JPG
  kill $V
done
tar czf $OUT/logs.tgz -C /tmp logs
