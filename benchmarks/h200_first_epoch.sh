#!/usr/bin/env bash
# One H200: why the gpu pipeline's first epochs are slower than its last (step 40 ms
# in epoch 1, 35 in epoch 4, 33.5 on synthetic data: 2026-12-01-h200-real-data-20k.json).
# The GPU tests of the nvJPEG path and the allocator probe first; then 20,480 JPEGs,
# ResNet-50 bf16 at 256, every callback on, 4 epochs of 80 steps, timeline of every
# stage and every nvJPEG batch decode (its call time, bytes, the device memory it took),
# GPU traces (CUDA calls and kernels, no Python) of batches 20-26 (epoch 1) and 260-266
# (epoch 4): the gpu pipeline as the app runs it, then with nvJPEG's buffers padded
# by 64 MiB. Synthetic data for reference, traced alike. Traces: $OUT/trace_RUN.tgz
# (benchmarks/trace_report.py reads them here; xprof is not on the GPU machine).
set -u
export JPEGS_TRAIN=20480
source benchmarks/stages_env.sh
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > $L/gpu_tests.log 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed|Error |assert" $L/gpu_tests.log | tail -6
timeout 60 python3 benchmarks/nvjpeg_pools_probe.py /tmp/jpegs/train > $L/probe.log 2>&1
echo "probe exit $?"; tail -4 $L/probe.log
export TIMELINE=1 NVJPEG_DETAIL=1 TRACE_PYTHON=0 TRACE_BATCHES="20,26;260,266"
RUN="--epochs=4"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu $RUN"
rm -rf /tmp/traces; mkdir -p /tmp/traces
staged syn 1 TRACE_DIR=/tmp/traces/syn -- --dataset=synthetic --steps_per_epoch=80 $RUN
staged gpu 1 TRACE_DIR=/tmp/traces/gpu -- $JPG
staged gpu_pad64 1 TRACE_DIR=/tmp/traces/gpu_pad64 NVJPEG_PADDING=67108864 -- $JPG
tar czf $OUT/logs.tgz -C /tmp logs
for r in syn gpu gpu_pad64; do tar czf $OUT/trace_$r.tgz -C /tmp/traces $r 2>/dev/null; done
ls -la $OUT
