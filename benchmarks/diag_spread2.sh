#!/usr/bin/env bash
# One-off (issue 46), call 2: which of the 31 autotuned choices that differ between a slow
# (3,286 images/sec) and a fast (4,440) ConvNeXt-T run carries the difference? One
# cuDNN choice swapped each way (the slow kernels with the fast run's choice for
# fingerprint 119f235..., and the reverse, its HLO dumped to name the convolution);
# ConvNeXt-T with the libraries' heuristic kernels (--xla_autotune=heuristic); and
# EfficientNetV2-S twice from empty caches with its autotune results dumped.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl-min/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
D=/tmp/diag2; rm -rf $D /tmp/bench /tmp/c; mkdir -p $D /tmp/bench /tmp/c
pack() { tar czf "$OUT/diag2.tgz" -C /tmp diag2 2>/dev/null; }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active,utilization.gpu \
  --format=csv,noheader,nounits -lms 500 > $D/smi.csv 2>&1 &
SMI=$!
run() {
  local name=$1 cache=$2 xla=$3 limit=$4; shift 4
  echo "$name start $(date +%s.%N)" >> $D/times.txt
  JAX_COMPILATION_CACHE_DIR=$cache XLA_FLAGS="$xla" timeout $limit python3 app/main.py \
    --accelerator=gpu --backend=jax --verbose=2 --logdir=/tmp/bench/$name "$@" > $D/$name.log 2>&1
  echo "$name end $(date +%s.%N) rc $?" >> $D/times.txt
  cp /tmp/bench/$name/summary.json $D/$name.json 2>/dev/null
  echo "$name: $(grep -E '^throughput' $D/$name.log | cut -c1-90)"
  pack
}
CX="--dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=120 --validation_steps=-1 --model=applications:ConvNeXtTiny"
A=benchmarks/diag1
run slow_with_fast_conv /tmp/c/1 "--xla_gpu_load_autotune_results_from=$A/slow_with_fast_conv.textproto" 120 $CX
run fast_with_slow_conv /tmp/c/2 "--xla_gpu_load_autotune_results_from=$A/fast_with_slow_conv.textproto --xla_dump_to=/tmp/dump2 --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*" 120 $CX
f=$(ls /tmp/dump2/*train_step*after_optimizations.txt 2>/dev/null | head -1)
[ -n "$f" ] && grep '"algo_id":"22"' "$f" | cut -c1-400 > $D/algo22.txt; pack
run heuristic /tmp/c/3 "" 120 $CX --xla_autotune=heuristic
EF="--dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=60 --validation_steps=-1 --model=applications:EfficientNetV2S"
run ef1 /tmp/c/4 "--xla_gpu_dump_autotune_results_to=$D/ef1.textproto" 175 $EF
run ef2 /tmp/c/5 "--xla_gpu_dump_autotune_results_to=$D/ef2.textproto" 175 $EF
kill $SMI; pack; cat $D/times.txt
