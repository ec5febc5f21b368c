#!/usr/bin/env bash
# Device call 3: issue 46's kernels (two fresh autotunes of ConvNeXt-T with their digests,
# call 1's fast and slow kernels loaded on this machine) and issue 48's rates (ConvNeXt-T's
# profiled breakdown against its unprofiled step, its twin; ViT-B/16's if time is left).
set -u
# (the runner installs the carried wheels from .whl/)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
B=/tmp/bo; rm -rf $B /tmp/bench; mkdir -p $B
pack() { tar czf "$OUT/call3.tgz" -C /tmp bo --exclude='*.xplane.pb' 2>/dev/null; }
( while sleep 20; do pack; done ) & PACKER=$!
OUT=$B FAMILIES=convnext_tiny REPEATS=2 PROFILE=convnext_tiny TWINS=1 \
  bash benchmarks/device_run.sh models 2>&1 | tee $B/models.console
pack
# call 1's kernels, autotuned on another machine of the kind, loaded here
mkdir -p $B/reuse
nvidia-smi -L | grep -q H100 && KS=fast || KS=''  # call 1's kernels are an H100's
for k in $KS; do
  rm -rf /tmp/bench/load_$k /tmp/cache_$k
  JAX_COMPILATION_CACHE_DIR=/tmp/cache_$k timeout 120 python3 app/main.py --accelerator=gpu \
    --backend=jax --verbose=2 --logdir=/tmp/bench/load_$k --dataset=synthetic \
    --global_batch_size=256 --epochs=1 --steps_per_epoch=120 --validation_steps=-1 \
    --model=applications:ConvNeXtTiny --kernels_from=.devdata/convnext_tiny_h100_$k.textproto \
    > $B/reuse/load_$k.log 2>&1
  cp /tmp/bench/load_$k/summary.json $B/reuse/load_$k.json 2>/dev/null
  cp /tmp/bench/load_$k/kernels.json $B/reuse/load_$k.kernels.json 2>/dev/null
  grep -E "^throughput|^kernels|^machine" $B/reuse/load_$k.log | cut -c1-150
  pack
done
OUT=$B/vit FAMILIES=vit_b_16 REPEATS=1 PROFILE=vit_b_16 TWINS=0 \
  bash benchmarks/device_run.sh models 2>&1 | tail -20
kill $PACKER; pack; ls -R $B | head -80
