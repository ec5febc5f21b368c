#!/usr/bin/env bash
# One-off (kept in git history, cited by the result JSON): what XLA's
# --xla_gpu_exclude_nondeterministic_ops (no timing of candidate kernels: each
# convolution takes its first deterministic cuDNN engine) does to the compile and to
# the step, for the small ResNet on Fashion-MNIST and ResNet-50 on synthetic data.
set -u
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
mkdir -p /tmp/fashion; for f in .data/fashion-mnist/*.gz; do gunzip -c $f > /tmp/fashion/$(basename $f .gz); done
python3 -m compileall -q app callbacks flags preprocessing > /dev/null
python3 -c "import jax, keras; jax.devices()" > /dev/null 2>&1
D=/tmp/diag; rm -rf $D /tmp/dc; mkdir -p $D
F="--accelerator=gpu --backend=jax --verbose=2"
SR="$F --model=small_resnet --dataset=fashion_mnist --data_dir=/tmp/fashion --global_batch_size=512 --epochs=15"
R50="$F --model=resnet50 --dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=150 --validation_steps=-1"
DET=--xla_gpu_exclude_nondeterministic_ops=true
run() { local name=$1 cache=$2 flags=$3; shift 3
  rm -rf /tmp/b/$name; local t0=$(date +%s.%N)
  env JAX_COMPILATION_CACHE_DIR=/tmp/dc/$cache JAX_LOG_COMPILES=1 XLA_FLAGS="$flags" \
    timeout 200 python3 app/main.py "$@" --logdir=/tmp/b/$name > $D/$name.log 2>&1
  echo "$name exit $? wall $(python3 -c "import time; print(round(time.time() - $t0, 2))")" | tee -a $D/exits.txt
  cp /tmp/b/$name/summary.json $D/$name.json 2>/dev/null
  grep -E "Finished XLA compilation of jit\((train|test)_step\)" $D/$name.log | cut -c60-; grep -E "^throughput" $D/$name.log; }
run sr_full_cold srf "" $SR
run sr_det_cold srd "$DET" $SR
for i in 1 2; do run sr_full_warm$i srf "" $SR; run sr_det_warm$i srd "$DET" $SR; done
run r50_full_cold rf "" $R50
run r50_det_cold rd "$DET" $R50
run r50_full_warm rf "" $R50
run r50_det_warm rd "$DET" $R50
tar czf $OUT/autotune.tgz -C $D .
