#!/usr/bin/env bash
# One H200: why nvJPEG's hardware decoding slows while the GPU computes. The GPU tests of
# api="nvjpeg", then the contention probe (benchmarks/decode_contention.py) for nvJPEG's
# creation flags (engines' own upsampling, no pipelining, memory pools), the first
# variant traced under the shallow load (read with benchmarks/trace_report.py).
set -u
source benchmarks/stages_env.sh
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_nvjpeg_gpu.py > $L/gpu_tests.log 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed|Error|assert" $L/gpu_tests.log | tail -8
timeout 200 python3 benchmarks/decode_contention.py --folder /tmp/jpegs/train --out "$OUT" \
  --seconds 3 --trace_dir /tmp/trace_probe \
  --variants nvjpeg_lanes3,nvjpeg_lanes3_flags0,nvjpeg_lanes3_nopipe,nvjpeg_lanes3_pools,nvjpeg_lanes1 \
  > $L/contention.log 2>&1
echo "contention exit $?"; cut -c1-700 $L/contention.log | grep -E "^(c_|nvjpeg|Trace|[A-Za-z]*Error)" | tail -8
tar czf $OUT/trace_probe.tgz -C /tmp trace_probe
tar czf $OUT/logs.tgz -C /tmp logs
