#!/usr/bin/env bash
# One call on one H200: real JPEGs into ResNet-50 (issue: real images on the GPU).
# The GPU tests of the nvJPEG path, then ~11,000 ImageNet-sized JPEGs and, every
# callback on, batch $B (256), bf16, the app with its defaults: on synthetic data (the
# ceiling), with --input_pipeline=gpu and the PyTorch peer (torch.compile fed by a
# DataLoader, 16 workers) on the same files, then --input_pipeline=grain.
# DIGITS=1 adds the default digits job on the GPU (no TensorFlow).
# Carries .whl (keras, grain, simplejpeg, nvImageCodec, nvJPEG, pytest). Writes $OUT.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
B=${B:-256}
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=$B --verbose=2"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  python3 -c "import jax, keras; print(jax.__version__, keras.__version__)"
  python3 -c "import tensorflow" 2>&1 | tail -1; } > "$OUT/machine.txt" 2>&1
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed|Error |assert" "$OUT/gpu_tests.log" | tail -6
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=10240 --validation=1024 --classes=100 \
  > "$OUT/jpegs.log" 2>&1; cat "$OUT/jpegs.log"
run() {  # name, timeout, flags...
  local name=$1 limit=$2; shift 2
  timeout "$limit" $APP --logdir=/tmp/$name "$@" > "$OUT/$name.log" 2>&1
  echo "$name exit $?"; cp /tmp/$name/summary.json "$OUT/$name.json" 2>/dev/null
  grep -E "^throughput|^top-1|input_pipeline=|Error|error:" "$OUT/$name.log" | cut -c1-400
}
run synthetic 100 --dataset=synthetic --epochs=1 --steps_per_epoch=160 --validation_steps=-1
run gpu 120 --dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=4 --validation_steps=-1
timeout 140 python3 benchmarks/torch_peer.py --data=/tmp/jpegs --batch_sizes=$B --steps=90 \
  --warmup=15 --out "$OUT/peer.json" > "$OUT/peer.log" 2>&1; echo "peer exit $?"
grep -h '"images_per_sec"' "$OUT/peer.json" | cut -c1-300
run grain 120 --dataset=folder:/tmp/jpegs --input_pipeline=grain --epochs=2 --validation_steps=-1
if [ "${DIGITS:-0}" = 1 ]; then
  timeout 150 python3 app/main.py --accelerator=gpu --backend=jax --logdir=/tmp/digits \
    --verbose=2 > "$OUT/digits.log" 2>&1; echo "digits exit $?"
  cp /tmp/digits/summary.json "$OUT/digits.json" 2>/dev/null; grep -E "^top-1|input_pipeline=" "$OUT/digits.log"
fi
ls "$OUT"
