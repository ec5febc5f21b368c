#!/usr/bin/env bash
# One H200, epochs of 80 steps (20,480 JPEGs): the gpu pipeline in steady state, with
# a timeline of every batch fit waited for and every XLA compile (TIMELINE=1,
# benchmarks/gpu_stages.py). ResNet-50 bf16, batch 256, every callback on, 4 epochs,
# the app's automatic warm-up: synthetic data; the gpu pipeline as the app runs it
# (bytes read in the planning processes, every canvas shape compiled up front); its
# bytes read again in the training process (read_in="stream"); and with Python's
# thread switch interval at 1 ms instead of 5. Then the GPU tests of the nvJPEG path.
set -u
export JPEGS_TRAIN=20480
source benchmarks/stages_env.sh
export TIMELINE=1
RUN="--epochs=4"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu $RUN"
staged syn 1 -- --dataset=synthetic --steps_per_epoch=80 $RUN
staged gpu 1 -- $JPG
staged gpu_stream 1 'STREAM_KW={"read_in": "stream"}' -- $JPG
staged gpu_switch1ms 1 SWITCH_INTERVAL=0.001 -- $JPG
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > $L/gpu_tests.log 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed|Error |assert" $L/gpu_tests.log | tail -6
tar czf $OUT/logs.tgz -C /tmp logs
