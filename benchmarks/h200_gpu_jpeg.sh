#!/usr/bin/env bash
# One H200: the GPU JPEG pipeline (preprocessing/gpu_pipeline.py) measured and checked.
# Carries .whl with keras, grain, simplejpeg, nvidia-nvimgcodec-cu13, nvidia-nvjpeg.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 250 python3 benchmarks/gpu_jpeg_pipeline.py --out "$OUT" "$@" > "$OUT/gpu_jpeg.log" 2>&1
echo "exit $?"; grep -v "^\s*$" "$OUT/gpu_jpeg.log" | grep -E "^\[|Traceback|Error" | cut -c1-1500
