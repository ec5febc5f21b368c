#!/usr/bin/env bash
# One H200: profiles (Python and host threads traced) of five training steps on
# synthetic data and with the gpu pipeline (6 lanes), ResNet-50 bf16 at 256, every
# callback on; then the grain pipeline at batch 1,024. Traces in $OUT/<run>.tgz.
set -u
source benchmarks/stages_env.sh
P="--profile_steps=100,104"
staged syn 1 PYTHON_TRACE=1 -- --dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40 $P
staged gpu_hw6 1 PYTHON_TRACE=1 'STREAM_KW={"decoders": 6}' -- --dataset=folder:/tmp/jpegs \
  --input_pipeline=gpu --throughput_warmup_steps=40 $P
for r in syn gpu_hw6; do tar czf $OUT/$r.tgz -C /tmp/$r plugins 2>/dev/null; done
STAGED_TIMEOUT=130 staged grain_b1024 1 -- --global_batch_size=1024 --epochs=4 \
  --throughput_warmup_steps=10 --dataset=folder:/tmp/jpegs --input_pipeline=grain
ls -la $OUT
