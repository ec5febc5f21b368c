#!/usr/bin/env bash
# One H200: nvJPEG's warm-up (GpuJpegStream's warm_up) against the first-epoch slowdown
# that benchmarks/h200_first_epoch.sh traced to nvJPEG growing its buffers. The GPU
# tests of the nvJPEG path; benchmarks/nvjpeg_growth_probe.py (no warm-up, the largest
# image, the app's warm-up); then 20,480 JPEGs, ResNet-50 bf16 at 256, every callback
# on, 4 epochs of 80 steps, timeline and every nvJPEG decode's memory: synthetic data,
# the gpu pipeline as the app runs it (warmed up), and without the warm-up.
set -u
export JPEGS_TRAIN=20480
source benchmarks/stages_env.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > $L/gpu_tests.log 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed|Error |assert" $L/gpu_tests.log | tail -8
rm -rf /tmp/growth
timeout 200 python3 benchmarks/nvjpeg_growth_probe.py /tmp/jpegs/train /tmp/growth \
  --strategies=none,largest_roi,app 2>&1 | grep -v "^[WIE][0-9]" | tee $L/growth.log
export TIMELINE=1 NVJPEG_DETAIL=1
RUN="--epochs=4"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu $RUN"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=80 $RUN
staged gpu 1 -- $JPG
staged gpu_nowarm 1 'STREAM_KW={"warm_up": 0}' -- $JPG
tar czf $OUT/logs.tgz -C /tmp logs
