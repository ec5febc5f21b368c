#!/usr/bin/env bash
# One H200: when nvJPEG's hardware decoder grows its buffers, and which warm-up stops it
# (benchmarks/nvjpeg_growth_probe.py on the 20,480 JPEGs of h200_first_epoch.sh).
# Traces in $OUT/growth_traces.tgz.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
[ -d /tmp/jpegs/train ] || python3 benchmarks/make_jpegs.py /tmp/jpegs --train=20480 \
  --validation=256 --classes=100
rm -rf /tmp/growth
timeout 300 python3 benchmarks/nvjpeg_growth_probe.py /tmp/jpegs/train /tmp/growth \
  --batches=${BATCHES:-30} 2>&1 | grep -v "^[WIE][0-9]" | tee $OUT/growth.log
tar czf $OUT/growth_traces.tgz -C /tmp growth
