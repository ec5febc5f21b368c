#!/usr/bin/env bash
# One H200: layer variants, callback overhead, and the app's sweep with its defaults.
set -u
source benchmarks/device_env.sh
timeout 200 python3 benchmarks/model_variants.py --batch=256 --steps=60 --out "$OUT/variants.json" \
  > "$OUT/variants.log" 2>&1; grep '"variant"' "$OUT/variants.log"
timeout 150 python3 benchmarks/callback_overhead.py --accelerator=gpu --batch=256 --short=20 \
  --long=120 --reps=3 --out "$OUT/overhead.json" > "$OUT/overhead.log" 2>&1
grep -E "images_per_sec_|ratio" "$OUT/overhead.json"
timeout 200 python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --dataset=synthetic \
  --sweep_batch_sizes=256,512,1024 --steps_per_epoch=48 --logdir=/tmp/sweep > "$OUT/sweep.log" 2>&1
cp /tmp/sweep/sweep.json "$OUT/sweep.json"; tail -7 "$OUT/sweep.log"
