#!/usr/bin/env bash
# One H200: a trace (Python and host threads) of batches 100-106 of training with the gpu
# pipeline through nvImageCodec's C API (6 lanes), ResNet-50 bf16 at 256, every callback
# on, without the profiler callback; the stages file also times the C decode call and
# the decoder's memory pools and counts their frees per stream. Read the trace with
# python benchmarks/trace_report.py <xplane.pb>.
set -u
source benchmarks/stages_env.sh
staged gpu_c6 1 TRACE_BATCHES=100,106 TRACE_DIR=/tmp/trace_c6 \
  'STREAM_KW={"decoders": 6, "api": "c"}' -- \
  --dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40
tar czf $OUT/trace_c6.tgz -C /tmp trace_c6
python3 -c "
import json; d = json.load(open('$L/gpu_c6.stages.json'))
print({k: (v, d['calls'].get(k)) for k, v in d['seconds'].items() if not k.startswith('jpeg_decoding') or k.startswith('jpeg_decoding/')})
print({k: v for k, v in d['calls'].items() if 'stream' in k})"
