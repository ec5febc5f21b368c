#!/usr/bin/env bash
# One call on one H200 (issue: one H200 at >= 8,500 img/s, >= 1.15x torch.compile at 256):
# the app with its defaults (the max-pool's hand-written gradient, the 16-channel
# space-to-depth stem), synthetic ResNet-50 bf16, every callback on, at batch 1,024
# (its best) and 256; the torch.compile peer at 256; then a trace of steps 20-25 at
# 256 (the step's kernels, for benchmarks/trace_report.py and the kernel table).
# Writes $OUT/app{1024,256}.{log,json}, peer.{log,json}, trace.tgz.
set -u
source benchmarks/device_env.sh
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --dataset=synthetic --verbose=2"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import jax, keras, torch; print(jax.__version__, keras.__version__, torch.__version__)"
} > "$OUT/machine.txt" 2>/dev/null
for B in 1024 256; do
  rm -rf /tmp/app$B
  timeout 150 $APP --global_batch_size=$B --epochs=1 --steps_per_epoch=$((24576 / B)) \
    --validation_steps=-1 --logdir=/tmp/app$B > "$OUT/app$B.log" 2>&1; echo "app$B exit $?"
  cp /tmp/app$B/summary.json "$OUT/app$B.json"; grep -E "^throughput" "$OUT/app$B.log"
done
timeout 170 python3 benchmarks/torch_peer.py --batch_sizes=256 --steps=90 \
  --out "$OUT/peer.json" > "$OUT/peer.log" 2>&1; echo "peer exit $?"
grep -h '"images_per_sec"' "$OUT/peer.json" | cut -c1-200
rm -rf /tmp/prof
timeout 100 $APP --global_batch_size=256 --epochs=1 --steps_per_epoch=30 --validation_steps=-1 \
  --profile_steps=20,25 --logdir=/tmp/prof > "$OUT/prof.log" 2>&1; echo "trace exit $?"
tar czf "$OUT/trace.tgz" -C /tmp/prof plugins; ls -la "$OUT"
