#!/usr/bin/env bash
# One H200: what the gpu pipeline puts on the GPU beside training, and whether fewer
# decoding lanes slow the step less. Traces (GPU and CUDA calls, no Python) of batches
# 100-106 on synthetic data and with the gpu pipeline (defaults), taken without the
# profiler callback; then the pipeline with 6 lanes (the default), 3 and 2, untraced.
# 10,240 JPEGs, 3 epochs, ResNet-50 bf16 at 256, every callback. Traces in
# $OUT/trace_{syn,gpu}.tgz (read each xplane.pb with benchmarks/trace_report.py).
set -u
export JPEGS_TRAIN=10240 TIMELINE=1 STAGED_TIMEOUT=80
source benchmarks/stages_env.sh
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu"
T="TRACE_BATCHES=100,106 TRACE_PYTHON=0"
staged syn 1 $T TRACE_DIR=/tmp/trace_syn -- --dataset=synthetic --steps_per_epoch=40
staged gpu 1 $T TRACE_DIR=/tmp/trace_gpu -- $JPG
for r in syn gpu; do tar czf $OUT/trace_$r.tgz -C /tmp trace_$r; done
staged lanes6 1 -- $JPG
staged lanes3 1 'STREAM_KW={"decoders": 3}' -- $JPG
staged lanes2 1 'STREAM_KW={"decoders": 2}' -- $JPG
ls -la $OUT
