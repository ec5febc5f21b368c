#!/usr/bin/env bash
# One-off (kept in git history, cited by the result JSON): the default Fashion-MNIST
# job's start on the GPU host, each output line stamped with seconds since the process
# started, JAX's compiles logged: a cold run (empty caches) and a warm one after it.
# Run after benchmarks/device_run.sh (its wheels in /tmp/site, data in /tmp/fashion).
set -u
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
D=${D:-/tmp/diag}; mkdir -p "$D"
cat > /tmp/stamp.py <<'PY'
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    print(f"{time.time() - t0:7.2f} {line}", end="", flush=True)
PY
FLAGS="--accelerator=gpu --backend=jax --model=small_resnet --dataset=fashion_mnist --data_dir=/tmp/fashion --global_batch_size=512 --epochs=15 --target_top1=0.93 --verbose=2"
run() { local name=$1; shift; rm -rf /tmp/b/$name; local t0=$(date +%s.%N)
  env "$@" python3 app/main.py $FLAGS --logdir=/tmp/b/$name 2>&1 | python3 /tmp/stamp.py $t0 > $D/$name.log
  cp /tmp/b/$name/summary.json $D/$name.json; grep -E "^ *[0-9.]+ (epoch 1/|epoch 13|top-1|input)" $D/$name.log; }
rm -rf /tmp/dc; run cold JAX_COMPILATION_CACHE_DIR=/tmp/dc/xla JAX_LOG_COMPILES=1 CUDA_CACHE_PATH=/tmp/dc/cuda
run warm JAX_COMPILATION_CACHE_DIR=/tmp/dc/xla JAX_LOG_COMPILES=1 CUDA_CACHE_PATH=/tmp/dc/cuda
