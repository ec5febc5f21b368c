#!/usr/bin/env bash
# One call on one H200: real JPEGs into ResNet-50 (issue: real images on the GPU).
# The GPU tests of the nvJPEG path, then $TRAIN (20,480) ImageNet-sized JPEGs and,
# every callback on, batch $B (256), bf16, the app with its defaults, 4 epochs of
# TRAIN / B steps: on synthetic data (the ceiling, the same epochs and steps), with
# --input_pipeline=gpu, the PyTorch peer (torch.compile fed by a DataLoader, 16
# workers) on the same files, then --input_pipeline=grain (2 epochs).
# GC_TIMELINE=1 runs the gpu pipeline once more through benchmarks/gpu_stages.py and
# prints its full garbage collections (benchmarks/gc_pauses.py).
# DIGITS=1 adds the default digits job on the GPU (no TensorFlow).
# Carries .whl (keras, grain, simplejpeg, nvImageCodec, nvJPEG, pytest). Writes $OUT/real_data.tgz.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
B=${B:-256}
TRAIN=${TRAIN:-20480}
R=/tmp/rd; mkdir -p $R  # every log and summary, packed into $OUT/real_data.tgz at the end
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=$B --verbose=2"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  python3 -c "import jax, keras; print(jax.__version__, keras.__version__)"
  python3 -c "import tensorflow" 2>&1 | tail -1; } > "$R/machine.txt" 2>&1
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_nvjpeg_on_gpu.py > "$R/gpu_tests.log" 2>&1
status=$?; echo "gpu tests exit $status"; grep -E "passed|failed|Error |assert" "$R/gpu_tests.log" | tail -6
if [ $status != 0 ]; then  # a broken pipeline measures nothing: keep the device time
  tail -60 "$R/gpu_tests.log"; tar czf "$OUT/real_data.tgz" -C /tmp rd; exit 1
fi
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=$TRAIN --validation=1024 --classes=100 \
  > "$R/jpegs.log" 2>&1; cat "$R/jpegs.log"
run() {  # name, timeout, flags...
  local name=$1 limit=$2; shift 2
  rm -rf /tmp/$name  # a warm machine keeps the last call's run folders
  timeout "$limit" $APP --logdir=/tmp/$name "$@" > "$R/$name.log" 2>&1
  echo "$name exit $?"; cp /tmp/$name/summary.json "$R/$name.json" 2>/dev/null
  grep -E "^epoch|^throughput|^top-1|input_pipeline=|Error|error:" "$R/$name.log" | cut -c1-400
}
run synthetic 120 --dataset=synthetic --epochs=4 --steps_per_epoch=$((TRAIN / B)) --validation_steps=-1
run gpu 150 --dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=4 --validation_steps=-1
timeout 140 python3 benchmarks/torch_peer.py --data=/tmp/jpegs --batch_sizes=$B --steps=90 \
  --warmup=15 --out "$R/peer.json" > "$R/peer.log" 2>&1; echo "peer exit $?"
grep -h '"images_per_sec"' "$R/peer.json" | cut -c1-300
run grain 120 --dataset=folder:/tmp/jpegs --input_pipeline=grain --epochs=2 --validation_steps=-1
if [ "${GC_TIMELINE:-0}" = 1 ]; then  # the gpu run again, timed inside: its full collections
  rm -rf /tmp/gpu_t
  STAGES_OUT=$R/gpu_t.stages.json TIMELINE=1 GC_LOG=1 timeout 150 python3 benchmarks/gpu_stages.py \
    --accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=$B --verbose=2 \
    --logdir=/tmp/gpu_t --dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=4 \
    --validation_steps=-1 > "$R/gpu_t.log" 2>&1; echo "gpu_t exit $?"
  cp /tmp/gpu_t/summary.json "$R/gpu_t.json" 2>/dev/null; grep -E "^epoch|^throughput" "$R/gpu_t.log"
  python3 benchmarks/gc_pauses.py "$R/gpu_t.stages.json"
fi
if [ "${DIGITS:-0}" = 1 ]; then
  timeout 150 python3 app/main.py --accelerator=gpu --backend=jax --logdir=/tmp/digits \
    --verbose=2 > "$R/digits.log" 2>&1; echo "digits exit $?"
  cp /tmp/digits/summary.json "$R/digits.json" 2>/dev/null; grep -E "^top-1|input_pipeline=" "$R/digits.log"
fi
ls $R; tar czf "$OUT/real_data.tgz" -C /tmp rd
