#!/usr/bin/env bash
# Two H200s of one host, one call: BatchNorm statistics per replica (the default)
# against global, as data-parallel scaling at 256 and 1,024 images per GPU (sweeps,
# synthetic ResNet-50 bf16), one GPU via CUDA_VISIBLE_DEVICES=0 as the reference.
# Optional XLA_FLAGS variants: BENCH_XLA="flags" adds a third two-GPU sweep with them.
set -u
source benchmarks/device_env.sh
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --dataset=synthetic --steps_per_epoch=40"
{ nvidia-smi --query-gpu=name --format=csv,noheader; nproc; } > "$OUT/machine.txt" 2>&1
sweep() {  # name, gpus, batches, extra flags...
  local name=$1 visible=$2 batches=$3; shift 3
  CUDA_VISIBLE_DEVICES=$visible timeout 165 $APP --sweep_batch_sizes=$batches \
    --logdir=/tmp/$name "$@" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; cp /tmp/$name/sweep.json "$OUT/$name.json" 2>/dev/null
  grep -E "^ +[0-9]+ " "$OUT/$name.log" | head -4
}
sweep one_gpu 0 256,1024
sweep two_per_replica 0,1 512,2048
sweep two_global 0,1 512,2048 --batchnorm_statistics=global
if [ -n "${BENCH_XLA:-}" ]; then
  XLA_FLAGS="$BENCH_XLA" sweep two_xla 0,1 512,2048
fi
