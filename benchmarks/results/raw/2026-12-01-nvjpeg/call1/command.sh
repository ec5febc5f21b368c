# Call 1 ran benchmarks/h200_c_api.sh as it stood then (later rewritten for api="nvjpeg"):
set -u
source benchmarks/stages_env.sh
timeout 100 python3 benchmarks/decode_contention.py --folder /tmp/jpegs/train --out "$OUT" \
  --seconds 3 --variants hw_lanes3,c_hw_lanes3 > $L/contention.log 2>&1
SYN="--dataset=synthetic --steps_per_epoch=40 --throughput_warmup_steps=40"
JPG="--dataset=folder:/tmp/jpegs --input_pipeline=gpu --throughput_warmup_steps=40"
staged syn 1 -- $SYN
staged gpu_c6 1 'STREAM_KW={"decoders": 6, "api": "c"}' -- $JPG
staged gpu_c3 1 'STREAM_KW={"decoders": 3, "api": "c"}' -- $JPG
staged gpu_py6 1 'STREAM_KW={"decoders": 6}' -- $JPG
tar czf $OUT/logs.tgz -C /tmp logs
