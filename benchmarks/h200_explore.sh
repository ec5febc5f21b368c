#!/usr/bin/env bash
# Exploration on one H200 (device tool): does the app run, how fast, where does time go.
# Usage (repository root, on the GPU machine): bash benchmarks/h200_explore.sh
set -u
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax, keras; print(jax.__version__, keras.__version__, jax.devices())" 2>&1 | tail -1
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --dataset=synthetic"
for spe in 1 4; do
  timeout 200 $APP --sweep_batch_sizes=256,512 --steps_per_epoch=48 --steps_per_execution=$spe \
    --logdir=/tmp/sweep_spe$spe > "$OUT/sweep_spe$spe.log" 2>&1
  cp /tmp/sweep_spe$spe/sweep.json "$OUT/sweep_spe$spe.json" 2>/dev/null
  tail -8 "$OUT/sweep_spe$spe.log"
done
timeout 150 $APP --global_batch_size=256 --epochs=1 --steps_per_epoch=12 --validation_steps=-1 \
  --profile_steps=8,10 --logdir=/tmp/prof --verbose=2 > "$OUT/profile.log" 2>&1
tail -5 "$OUT/profile.log"
find /tmp/prof/plugins -name "*.xplane.pb" -exec cp {} "$OUT/app.xplane.pb" \;
timeout 200 python3 benchmarks/torch_peer.py --batch_sizes=256 --steps=60 --out "$OUT/peer.json" \
  > "$OUT/peer.log" 2>&1
tail -3 "$OUT/peer.log"; grep images_per_sec "$OUT/peer.json"
ls -la "$OUT"
