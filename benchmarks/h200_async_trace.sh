#!/usr/bin/env bash
# One H200: traces (Python and host threads) of batches 100-106 on synthetic data and with
# the gpu pipeline (6 lanes), ResNet-50 bf16 at 256, every callback on, taken without the
# profiler callback so Keras runs the callbacks asynchronously as in any unprofiled run.
set -u
source benchmarks/stages_env.sh
T="TRACE_BATCHES=100,106"
staged syn 1 $T TRACE_DIR=/tmp/trace_syn -- --dataset=synthetic --steps_per_epoch=40 \
  --throughput_warmup_steps=40
staged gpu_hw6 1 $T TRACE_DIR=/tmp/trace_gpu 'STREAM_KW={"decoders": 6}' -- \
  --dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40
for r in syn gpu; do tar czf $OUT/trace_$r.tgz -C /tmp trace_$r; done
ls -la $OUT
