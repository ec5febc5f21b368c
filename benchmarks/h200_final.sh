#!/usr/bin/env bash
# One call on one H200: the app (all callbacks on) against the torch.compile peer, at
# batch 256 and at each one's best batch; the app's sweep; layer variants.
# Writes everything under $OUT; benchmarks/collect_results.py turns it into the
# committed results JSON. (Run of 2026-11-30: the sweep's 240 s limit cut off the
# 2048 size while it compiled, so BEST was not found and call 4 ran batch 1024.)
set -u
source benchmarks/device_env.sh
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --dataset=synthetic"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import jax, keras, torch; print(jax.__version__, keras.__version__, torch.__version__)"
} > "$OUT/machine.txt" 2>/dev/null
# 1. The app's sweep (throughput callbacks only), smallest batch first.
timeout 240 $APP --sweep_batch_sizes=256,512,1024,2048 --steps_per_epoch=48 \
  --logdir=/tmp/sweep > "$OUT/sweep.log" 2>&1; cp /tmp/sweep/sweep.json "$OUT/sweep.json"
tail -7 "$OUT/sweep.log"
BEST=$(python3 -c "import json; print(json.load(open('$OUT/sweep.json'))['best']['global_batch_size'])")
# 2. Full app runs, every callback on, at 256 and at the app's best batch.
for B in 256 $BEST; do
  timeout 120 $APP --global_batch_size=$B --epochs=1 --steps_per_epoch=$((24576 / B)) \
    --validation_steps=-1 --logdir=/tmp/app$B --verbose=2 > "$OUT/app$B.log" 2>&1
  cp /tmp/app$B/summary.json "$OUT/app$B.json"; grep -E "^throughput" "$OUT/app$B.log"
done
# 3. The peer at 256 and the sizes where it may peak.
timeout 280 python3 benchmarks/torch_peer.py --batch_sizes=256,1024,2048 --steps=45 \
  --out "$OUT/peer.json" > "$OUT/peer.log" 2>&1; grep -h '"images_per_sec"' "$OUT/peer.json"
ls "$OUT"
