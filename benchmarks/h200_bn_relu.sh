#!/usr/bin/env bash
# One H200: BatchNorm with its ReLU inside (app/engine/layers.py BatchNorm(relu=True), one
# hand-written gradient) against the app's default layers, each in its own process,
# synthetic ResNet-50 bf16: batch 256 alternating A B A B (the spread between processes),
# then 1,024. First the layer's gradient check on the GPU (tests/test_layers.py's helper).
# Prepared 2026-12-01 (session 7), not yet run.
set -u
source benchmarks/device_env.sh
timeout 120 python3 -c "
import sys; sys.path.insert(0, 'tests'); import numpy as np, test_layers as t
for groups in (1, 2):
    a, b = t.bn_relu_outputs_and_gradients(True, groups), t.bn_relu_outputs_and_gradients(False, groups)
    print(groups, {k: float(np.abs(a[k] - b[k]).max()) for k in a})
" > "$OUT/layer_checks.log" 2>&1; echo "layer checks exit $?"; tail -2 "$OUT/layer_checks.log"
V=all_fast+argmax_pool+s2d16,default+relu_in_batchnorm
timeout 250 python3 benchmarks/model_variants.py --batch=256 --steps=60 --variants=$V,$V \
  --out "$OUT/variants_256.json" > "$OUT/variants_256.log" 2>&1; echo "256 exit $?"
grep '"variant"' "$OUT/variants_256.log" | cut -c1-160
timeout 220 python3 benchmarks/model_variants.py --batch=1024 --steps=30 --variants=$V \
  --out "$OUT/variants_1024.json" > "$OUT/variants_1024.log" 2>&1; echo "1024 exit $?"
grep '"variant"' "$OUT/variants_1024.log" | cut -c1-160
