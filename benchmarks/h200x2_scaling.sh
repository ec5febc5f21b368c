#!/usr/bin/env bash
# Two H200s of one host: data-parallel scaling, same per-GPU batch, one call.
set -u
source benchmarks/device_env.sh
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --dataset=synthetic"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/machine.txt"
nvidia-smi topo -m >> "$OUT/machine.txt" 2>&1
timeout 170 $APP --sweep_batch_sizes=512,2048 --steps_per_epoch=40 --logdir=/tmp/two \
  > "$OUT/two_gpus.log" 2>&1; cp /tmp/two/sweep.json "$OUT/two_gpus.json"; tail -5 "$OUT/two_gpus.log"
CUDA_VISIBLE_DEVICES=0 timeout 150 $APP --sweep_batch_sizes=256,1024 --steps_per_epoch=40 \
  --logdir=/tmp/one > "$OUT/one_gpu.log" 2>&1; cp /tmp/one/sweep.json "$OUT/one_gpu.json"
tail -5 "$OUT/one_gpu.log"
