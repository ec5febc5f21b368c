#!/usr/bin/env bash
# One H200: where the gpu pipeline's input bytes are read, with a timeline of every
# batch fit waited for and every XLA compile (TIMELINE=1, benchmarks/gpu_stages.py).
# ResNet-50 bf16, batch 256, every callback on, 4 epochs of 40 steps, the app's
# automatic warm-up: synthetic data, then the gpu pipeline with the files' bytes sent
# by the planning processes (read_in="workers", the default) and read again in the
# training process (read_in="stream"). Then the GPU tests of the nvJPEG path.
set -u
source benchmarks/stages_env.sh
export TIMELINE=1
RUN="--epochs=4"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=40 $RUN
staged gpu_workers 1 -- --dataset=folder:/tmp/jpegs --input_pipeline=gpu $RUN
staged gpu_stream 1 'STREAM_KW={"read_in": "stream"}' -- --dataset=folder:/tmp/jpegs \
  --input_pipeline=gpu $RUN
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > $L/gpu_tests.log 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed|Error |assert" $L/gpu_tests.log | tail -6
tar czf $OUT/logs.tgz -C /tmp logs
