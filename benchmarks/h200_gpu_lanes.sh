#!/usr/bin/env bash
# One H200: the gpu pipeline with 1, 2 and 3 decoding lanes (batches decoded at once)
# against synthetic data, ResNet-50 bf16 at 256, every callback on, ~10,000
# ImageNet-sized JPEGs, first epoch warm-up; stages timed (benchmarks/gpu_stages.py).
# Prints one line per run; logs in $OUT/logs.tgz.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
L=/tmp/logs; mkdir -p $L
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; } > $L/machine.txt 2>&1
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=10240 --validation=256 --classes=100 > $L/jpegs.log 2>&1
cat $L/jpegs.log
run() {  # name, STREAM_KW, flags...
  local name=$1 kw=$2; shift 2
  STREAM_KW="$kw" STAGES_OUT=$L/$name.stages.json timeout 90 python3 benchmarks/gpu_stages.py \
    --accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=256 --verbose=2 \
    --validation_steps=-1 --epochs=3 --throughput_warmup_steps=40 --logdir=/tmp/$name "$@" \
    > $L/$name.log 2>&1
  local rc=$?; cp /tmp/$name/summary.json $L/$name.json 2>/dev/null
  python3 - "$name" "$rc" <<'PY'
import json, sys
name, rc = sys.argv[1:]
try:
    s = json.load(open(f"/tmp/logs/{name}.json"))
    t = json.load(open(f"/tmp/logs/{name}.stages.json"))
    fills = {k: v for k, v in t["seconds"].items() if k.endswith("/fill")}
    print(f"{name:14s} exit {rc} {s['images_per_sec']:>9} img/s  step {s.get('step_time_ms')} ms  "
          f"wait {s.get('input_wait_seconds')} fill {fills} calls "
          f"{ {k: v for k, v in t['calls'].items() if k.endswith('/fill')} }", flush=True)
except Exception as e:
    print(f"{name:14s} exit {rc} no summary ({e})", flush=True)
PY
  tar czf $OUT/logs.tgz -C /tmp logs
}
run syn1 '{}' --dataset=synthetic --steps_per_epoch=40
run gpu_lanes2 '{}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
run gpu_lanes3 '{"decoders": 3}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
run gpu_lanes1 '{"decoders": 1}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
