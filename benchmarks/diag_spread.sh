#!/usr/bin/env bash
# One-off (issue 46): why did ConvNeXt-T's images/sec move 27% between two H100s of one
# kind? Each run autotunes from an empty JAX cache and dumps XLA's autotune results;
# nvidia-smi samples clocks, power and throttle reasons all along; the slowest and
# fastest runs' kernels are then loaded into fresh runs to see whether the kernels alone
# carry the difference. Also dumps the GPU form (HLO after optimizations) of a small
# model holding every convolution kind, with a trace, as the custom-call counter's fixture.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl-min/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
D=/tmp/diag; rm -rf $D /tmp/bench /tmp/c; mkdir -p $D /tmp/bench /tmp/c
pack() { tar czf "$OUT/diag.tgz" -C /tmp diag 2>/dev/null; }
nvidia-smi -q > $D/smi_q_start.txt 2>&1
nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > $D/apps_start.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active,utilization.gpu,memory.used \
  --format=csv,noheader,nounits -lms 250 > $D/smi.csv 2>&1 &
SMI=$!
# run NAME CACHE "XLA flags" app-flags...
run() {
  local name=$1 cache=$2 xla=$3; shift 3
  rm -rf /tmp/bench/$name
  echo "$name start $(date +%s.%N)" >> $D/times.txt
  JAX_COMPILATION_CACHE_DIR=$cache XLA_FLAGS="$xla" timeout 150 python3 app/main.py \
    --accelerator=gpu --backend=jax --verbose=2 --logdir=/tmp/bench/$name "$@" > $D/$name.log 2>&1
  echo "$name end $(date +%s.%N) rc $?" >> $D/times.txt
  cp /tmp/bench/$name/summary.json $D/$name.json 2>/dev/null
  echo "$name: $(grep -E '^throughput' $D/$name.log | cut -c1-90)"
  pack
}
ips() { python3 -c "import json,sys; print(json.load(open('$D/$1.json')).get('images_per_sec') or 0)" 2>/dev/null || echo 0; }
CX="--dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=120 --validation_steps=-1 --model=applications:ConvNeXtTiny"
# 1: the machine's first work, GPU idle until the autotuner times its candidates
run cx1 /tmp/c/1 "--xla_gpu_dump_autotune_results_to=$D/cx1.textproto" $CX
run cx2 /tmp/c/2 "--xla_gpu_dump_autotune_results_to=$D/cx2.textproto" $CX
run cx3 /tmp/c/3 "--xla_gpu_dump_autotune_results_to=$D/cx3.textproto --xla_dump_to=/tmp/dumpcx --xla_dump_hlo_as_text" $CX
mkdir -p $D/hlo_cx; find /tmp/dumpcx -name '*after_optimizations.txt' -size +100k -exec cp {} $D/hlo_cx/ \; ; pack
# The slowest and the fastest of the three, their kernels loaded into fresh runs
read SLOW FAST < <(for r in cx1 cx2 cx3; do echo "$(ips $r) $r"; done | sort -n | awk 'NR==1{s=$2} END{print s, $2}')
echo "slowest $SLOW fastest $FAST"
run load_$SLOW /tmp/c/4 "--xla_gpu_load_autotune_results_from=$D/$SLOW.textproto" $CX
run load_$FAST /tmp/c/5 "--xla_gpu_load_autotune_results_from=$D/$FAST.textproto" $CX
# The fixture: every convolution kind's GPU form, and a trace of it
run zoo /tmp/c/6 "--xla_dump_to=/tmp/dumpzoo --xla_dump_hlo_as_text" --dataset=synthetic \
  --model=tests/fixtures/op_zoo.py:make_model --image_size=32 --global_batch_size=64 --epochs=1 \
  --steps_per_epoch=40 --validation_steps=-1 --precision=mixed_bfloat16
mkdir -p $D/hlo_zoo; cp /tmp/dumpzoo/*.txt $D/hlo_zoo/ 2>/dev/null; pack
EF="--dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=120 --validation_steps=-1 --model=applications:EfficientNetV2S"
run ef1 /tmp/c/7 "--xla_gpu_dump_autotune_results_to=$D/ef1.textproto" $EF
run ef2 /tmp/c/8 "--xla_gpu_dump_autotune_results_to=$D/ef2.textproto" $EF
kill $SMI; nvidia-smi -q > $D/smi_q_end.txt 2>&1; pack
cat $D/times.txt
