#!/usr/bin/env bash
# One H200: why the gpu input pipeline trails synthetic data, and which setting helps.
# ~10,000 ImageNet-sized JPEGs; ResNet-50 bf16 at 256, every callback on; the first
# epoch is warm-up. Synthetic (the ceiling), then --input_pipeline=gpu timed inside
# (benchmarks/gpu_stages.py: seconds per stage and thread) with its defaults and with
# one setting changed per run, with `nvidia-smi dmon` (SM and JPEG-engine use) during
# the default run; then grain. Writes $OUT/<name>.{log,json,stages.json}.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; } \
  > "$OUT/machine.txt" 2>&1
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=10240 --validation=256 --classes=100 \
  > "$OUT/jpegs.log" 2>&1; cat "$OUT/jpegs.log"
FLAGS="--accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=256 --verbose=2 \
  --validation_steps=-1 --epochs=4 --throughput_warmup_steps=40"
run() {  # name, STREAM_KW, flags...
  local name=$1 kw=$2; shift 2
  STAGES_OUT="$OUT/$name.stages.json" STREAM_KW="$kw" timeout 120 python3 \
    benchmarks/gpu_stages.py $FLAGS --logdir=/tmp/$name "$@" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; cp /tmp/$name/summary.json "$OUT/$name.json" 2>/dev/null
  grep -E "^throughput|Error|error:" "$OUT/$name.log" | cut -c1-300
}
run synthetic '{}' --dataset=synthetic --steps_per_epoch=40
nvidia-smi dmon -s u -d 1 > "$OUT/dmon_gpu.txt" 2>&1 & DMON=$!
run gpu '{}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
kill $DMON
HINTS=$(python3 -c "import json; from preprocessing.gpu_decode import decoder_options as o; print(json.dumps({'decoder_options': o(256, 2048)}))")
run gpu_hints2048 "$HINTS" --dataset=folder:/tmp/jpegs --input_pipeline=gpu
run gpu_default_backend '{"backend": "default"}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
run gpu_prefetch6_workers8 '{"prefetch": 6, "workers": 8}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
run gpu_canvas512 '{"canvas_sides": [256, 384, 512]}' --dataset=folder:/tmp/jpegs --input_pipeline=gpu
run grain '{}' --dataset=folder:/tmp/jpegs --input_pipeline=grain
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
for path in sorted(glob.glob(f"{out}/*.json")):
    if path.endswith(".stages.json") or "machine" in path:
        continue
    name = os.path.basename(path)[:-5]
    s = json.load(open(path))
    print(f"{name:26s} {s.get('images_per_sec')!s:>10} img/s  wait {s.get('input_wait_seconds')}")
    try:
        st = json.load(open(f"{out}/{name}.stages.json"))
        print("   ", st["seconds"], "alloc", st["canvas_allocations"])
    except OSError:
        pass
PY
