#!/usr/bin/env bash
# One call on the two-H200 host (32 cores): real JPEGs, 256 images per GPU, every
# callback on, bf16 ResNet-50. One GPU (CUDA_VISIBLE_DEVICES=0) and two, for the
# synthetic ceiling, --input_pipeline=gpu and --input_pipeline=grain. Compile and
# pipeline start-up are excluded from images/sec as everywhere (the first epoch's
# steps are warm-up: --throughput_warmup_steps). Writes $OUT/results.json + logs.tgz.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p /tmp/logs
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc; nvidia-smi topo -m; } \
  > /tmp/logs/machine.txt 2>&1
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=20480 --validation=1024 --classes=100 \
  | tee /tmp/logs/jpegs.log
run() {  # name, gpus, per-GPU batch, flags...
  local name=$1 gpus=$2 per=$3; shift 3
  local visible=0; [ "$gpus" = 2 ] && visible=0,1
  local steps=$((20480 / (per * gpus)))
  CUDA_VISIBLE_DEVICES=$visible timeout 170 python3 app/main.py --accelerator=gpu \
    --backend=jax --model=resnet50 --global_batch_size=$((per * gpus)) --verbose=2 \
    --validation_steps=-1 --throughput_warmup_steps=$steps --logdir=/tmp/$name "$@" \
    > /tmp/logs/$name.log 2>&1
  echo "$name exit $?"; cp /tmp/$name/summary.json /tmp/logs/$name.json 2>/dev/null
  grep -E "^throughput|Error|error:" /tmp/logs/$name.log | cut -c1-300
}
run syn1 1 256 --dataset=synthetic --epochs=2 --steps_per_epoch=80
run gpu1 1 256 --dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=3
run grain1 1 256 --dataset=folder:/tmp/jpegs --input_pipeline=grain --epochs=3
run syn2 2 256 --dataset=synthetic --epochs=2 --steps_per_epoch=40
run gpu2 2 256 --dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=3
run grain2 2 256 --dataset=folder:/tmp/jpegs --input_pipeline=grain --epochs=3
python3 - <<'PY' | tee "$OUT/results.json"
import json, os
out = {}
for name in ("syn1", "gpu1", "grain1", "syn2", "gpu2", "grain2"):
    try:
        s = json.load(open(f"/tmp/logs/{name}.json"))
    except OSError:
        out[name] = None; continue
    out[name] = {k: s.get(k) for k in ("images_per_sec", "images_per_sec_per_device",
                 "step_time_ms", "input_wait_seconds", "num_replicas", "input_pipeline",
                 "global_batch_size", "epochs_completed", "mfu", "wall_seconds",
                 "corrupt_images_skipped", "device_kind")}
print(json.dumps(out, indent=1))
PY
tar czf "$OUT/logs.tgz" -C /tmp logs
