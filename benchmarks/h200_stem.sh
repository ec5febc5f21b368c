#!/usr/bin/env bash
# One H200: the stem's layer variants (app/engine/layers.py), each in its own process,
# synthetic ResNet-50 bf16: the max-pool's hand-written gradient (argmax) against the
# one XLA derives from the slices, and the space-to-depth stem padded to 16 channels.
# Batch 256 (the first variant again at the end: the spread between processes), then
# 1,024. First the layer checks on the GPU (the hand-written gradient under XLA:GPU).
set -u
source benchmarks/device_env.sh
# tests/conftest.py runs Keras on TensorFlow, absent here: call the JAX-able tests directly.
timeout 120 python3 -c "
import sys; sys.path.insert(0, 'tests'); import test_layers as t
for size in (112, 15, 2):
    for argmax in (True, False):
        t.test_slice_max_pool_equals_max_pooling_values_and_gradients(size, argmax)
for size in (16, 9):
    t.test_the_argmax_gradient_goes_to_the_first_maximum_on_ties_as_max_pooling_does(size)
print('layer checks passed on', __import__('jax').devices()[0].device_kind)
" > "$OUT/layer_tests.log" 2>&1; echo "layer checks exit $?"; tail -2 "$OUT/layer_tests.log"
V=all_fast,all_fast+argmax_pool,all_fast+s2d16,all_fast+argmax_pool+s2d16,all_fast
timeout 260 python3 benchmarks/model_variants.py --batch=256 --steps=60 --variants=$V \
  --out "$OUT/variants_256.json" > "$OUT/variants_256.log" 2>&1; echo "256 exit $?"
grep '"variant"' "$OUT/variants_256.log" | cut -c1-160
timeout 200 python3 benchmarks/model_variants.py --batch=1024 --steps=30 \
  --variants=all_fast,all_fast+argmax_pool,all_fast+argmax_pool+s2d16 \
  --out "$OUT/variants_1024.json" > "$OUT/variants_1024.log" 2>&1; echo "1024 exit $?"
grep '"variant"' "$OUT/variants_1024.log" | cut -c1-160
