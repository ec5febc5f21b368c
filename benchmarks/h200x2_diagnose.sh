#!/usr/bin/env bash
# Two H200s, one call: (1) what slows training beside the gpu pipeline, on one GPU:
# the crop/resize step's GPU time alone (benchmarks/canvas_step_time.py), synthetic
# training alone and beside a GpuJpegStream decoding in a thread (with and without
# its crop/resize step: benchmarks/gpu_stages.py SHADOW_*), the gpu pipeline itself;
# (2) real-JPEG scaling to two GPUs with per-replica BatchNorm (the default now);
# (3) two GPUs on synthetic data with XLA's latency-hiding scheduler, for the gradient
# all-reduce's overlap with the backward pass. ResNet-50 bf16, 256 per GPU, every
# callback on, first epoch warm-up. Prints one line per run; logs in $OUT/logs.tgz.
# PART=diagnose runs (1) only (one GPU is enough), PART=scale (2) and (3); default both.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
L=/tmp/logs; mkdir -p $L
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; } > $L/machine.txt 2>&1
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=10240 --validation=256 --classes=100 > $L/jpegs.log 2>&1
cat $L/jpegs.log
PART=${PART:-all}
run() {  # name, gpus, env..., -- flags...
  local name=$1 gpus=$2; shift 2; local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local visible=0; [ "$gpus" = 2 ] && visible=0,1
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=$visible STAGES_OUT=$L/$name.stages.json timeout 100 \
    python3 benchmarks/gpu_stages.py --accelerator=gpu --backend=jax --model=resnet50 \
    --global_batch_size=$((256 * gpus)) --verbose=2 --validation_steps=-1 --epochs=3 \
    --logdir=/tmp/$name "$@" > $L/$name.log 2>&1
  local rc=$?; cp /tmp/$name/summary.json $L/$name.json 2>/dev/null
  python3 - "$name" "$rc" <<'PY'
import json, sys
name, rc = sys.argv[1:]
try:
    s = json.load(open(f"/tmp/logs/{name}.json"))
    t = json.load(open(f"/tmp/logs/{name}.stages.json"))
    print(f"{name:24s} exit {rc} {s['images_per_sec']:>9} img/s  step {s.get('step_time_ms')} ms  "
          f"wait {s.get('input_wait_seconds')}  shadow batches {t['calls'].get('shadow/batches')}", flush=True)
except Exception as e:
    print(f"{name:24s} exit {rc} no summary ({e})", flush=True)
PY
  tar czf $OUT/logs.tgz -C /tmp logs
}
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG1="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
JPG2="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=20"
run syn1 1 -- $SYN
run gpu1 1 -- $JPG1
if [ "$PART" != scale ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 60 python3 benchmarks/canvas_step_time.py 2>&1 \
    | grep canvas_step | tee $L/canvas_step.txt
  run syn1_shadow 1 SHADOW_FOLDER=/tmp/jpegs -- $SYN
  run syn1_shadow_nostep 1 SHADOW_FOLDER=/tmp/jpegs SHADOW_NO_STEP=1 -- $SYN
fi
if [ "$PART" != diagnose ]; then
  run syn2 2 -- $SYN
  run gpu2 2 -- $JPG2
  run syn2_lhs 2 XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true -- $SYN
fi
