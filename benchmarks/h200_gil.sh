#!/usr/bin/env bash
# One H200: is the gpu pipeline's gap to synthetic data the GIL? ResNet-50 bf16 at 256,
# every callback on, ~10,000 ImageNet-sized JPEGs, first epoch warm-up. Keras syncs on
# every step's logs, so the GPU idles from the end of one step until the training
# thread has dispatched the next; threads of Python beside it (the pipeline's) hold the
# GIL it needs in between. Runs: synthetic alone / beside a thread of pure Python, and
# the gpu and grain pipelines, at Python's default switch interval (5 ms) and shorter.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=10240 --validation=256 --classes=100 \
  > "$OUT/jpegs.log" 2>&1; cat "$OUT/jpegs.log"
FLAGS="--accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=256 --verbose=2 \
  --validation_steps=-1 --epochs=4 --throughput_warmup_steps=40"
run() {  # name, env..., -- flags...
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" STAGES_OUT="$OUT/$name.stages.json" timeout 110 python3 \
    benchmarks/gpu_stages.py $FLAGS --logdir=/tmp/$name "$@" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; cp /tmp/$name/summary.json "$OUT/$name.json" 2>/dev/null
  grep -E "^throughput|Error|error:" "$OUT/$name.log" | cut -c1-120
}
SYN="--dataset=synthetic --steps_per_epoch=40"
JPG="--dataset=folder:/tmp/jpegs"
run synthetic X=1 -- $SYN
run synthetic_busy BUSY_THREAD=1 -- $SYN
run synthetic_busy_si0.2ms BUSY_THREAD=1 SWITCH_INTERVAL=0.0002 -- $SYN
run gpu X=1 -- $JPG --input_pipeline=gpu
run gpu_si1ms SWITCH_INTERVAL=0.001 -- $JPG --input_pipeline=gpu
run gpu_si0.2ms SWITCH_INTERVAL=0.0002 -- $JPG --input_pipeline=gpu
run gpu_si0.05ms SWITCH_INTERVAL=0.00005 -- $JPG --input_pipeline=gpu
run grain_si0.2ms SWITCH_INTERVAL=0.0002 -- $JPG --input_pipeline=grain
for f in "$OUT"/*.stages.json; do n=$(basename $f .stages.json)
  python3 -c "import json,sys; s=json.load(open('$OUT/$n.json')); t=json.load(open('$f'))['seconds']; print(f\"{'$n':24s} {s['images_per_sec']:>9} img/s wait {s.get('input_wait_seconds')} take {t.get('MainThread/take')} put {t.get('jpeg_decoding/batches_put')} fill {t.get('jpeg_decoding/fill')} finish {t.get('jpeg_planning/finish')}\")" 2>/dev/null
done
