#!/usr/bin/env bash
# One-off (issue 29): where the Fashion-MNIST run's first 31 s go, and why grain's first
# epoch is slow. On the H200, repository root: bash benchmarks/diag/startup.sh
set -u
OUT=${OUT:-$PWD/bench-out}; R=$OUT/diag; mkdir -p "$R" /tmp/bench
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site $(ls .whl/*.whl .whl-gpu/*.whl 2>/dev/null) || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
stamp() { python3 -c "
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin: sys.stdout.write(f'{time.time() - t0:8.3f} {line}')" "$1"; }

( time python3 -c "import keras" ) > "$R/import_keras.txt" 2>&1
python3 -X importtime -c "import keras" 2> "$R/importtime.txt"
( time python3 -c "import jax; jax.devices(); import jax.numpy as jnp; jnp.zeros(3).block_until_ready()" ) > "$R/jax_init.txt" 2>&1

python3 - .data/fashion-mnist /tmp/fashion <<'PY' || exit 1
import gzip, lzma, os, sys
source, target = sys.argv[1:]
os.makedirs(target, exist_ok=True)
for name in os.listdir(source):
    stem, ext = os.path.splitext(name)
    opener = {".xz": lzma.open, ".gz": gzip.open}.get(ext)
    with (opener or open)(os.path.join(source, name), "rb") as f, \
            open(os.path.join(target, stem if opener else name), "wb") as out:
        out.write(f.read())
PY
FASHION="--accelerator=gpu --backend=jax --verbose=2 --model=small_resnet --dataset=fashion_mnist \
  --data_dir=/tmp/fashion --global_batch_size=512 --epochs=15 --target_top1=0.93"
run() {  # NAME [env ...] -- [python args before app/main.py]
  local name=$1; shift; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  rm -rf "/tmp/bench/$name"; local t0; t0=$(date +%s.%N)
  env ${envs[@]+"${envs[@]}"} timeout 150 python3 "$@" app/main.py $FASHION \
    --logdir="/tmp/bench/$name" 2>&1 | stamp "$t0" > "$R/$name.log"
  cp "/tmp/bench/$name/summary.json" "$R/$name.json" 2>/dev/null
  grep -E "epoch 1/|epoch 15/|target" "$R/$name.log" | head -4
}
run logc JAX_LOG_COMPILES=1 --
run at0 XLA_FLAGS=--xla_gpu_autotune_level=0 --
run prof PROFILE_OUT=$R/app.prof -- benchmarks/diag/profiled.py
t0=$(date +%s.%N)
TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-fresh timeout 150 python3 benchmarks/torch_fashion_peer.py \
  --data_dir=/tmp/fashion --epochs=15 --batch=512 --out "$R/peer.json" 2>&1 | stamp "$t0" > "$R/peer.log"
tail -3 "$R/peer.log"

# Warm starts: the app with a persistent XLA cache (filled by its first run), the peer
# with inductor's cache (filled by the run above).
for turn in fill warm; do
  run "cache_$turn" JAX_COMPILATION_CACHE_DIR=/tmp/jcache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1 --
done
t0=$(date +%s.%N)
TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-fresh timeout 150 python3 benchmarks/torch_fashion_peer.py \
  --data_dir=/tmp/fashion --epochs=15 --batch=512 --out "$R/peer_warm.json" 2>&1 | stamp "$t0" > "$R/peer_warm.log"
tail -2 "$R/peer_warm.log"

J=/tmp/bench-jpegs-20480-1024
[ -e $J/.done ] || { python3 benchmarks/make_jpegs.py $J --train=20480 --validation=1024 \
  --classes=100 > "$R/jpegs.log" 2>&1 && touch $J/.done; }
RAMP_OUT=$R/ramp.json timeout 120 python3 benchmarks/diag/grain_ramp.py $J 3 > "$R/ramp.log" 2>&1
tail -2 "$R/ramp.log"
( while sleep 1; do echo "=== $(date +%s.%N)"; ps -eo pid,ppid,pcpu,rss,etimes,args --sort=-pcpu | head -24 | cut -c1-160; done ) > "$R/ps.txt" 2>&1 &
SAMPLER=$!
rm -rf /tmp/bench/grain; t0=$(date +%s.%N)
timeout 150 python3 app/main.py --accelerator=gpu --backend=jax --verbose=2 --model=resnet50 \
  --dataset=folder:$J --input_pipeline=grain --global_batch_size=256 --epochs=3 \
  --validation_steps=-1 --logdir=/tmp/bench/grain 2>&1 | stamp "$t0" > "$R/grain.log"
kill $SAMPLER
cp /tmp/bench/grain/summary.json "$R/grain.json"; cp /tmp/bench/grain/metrics.jsonl "$R/grain.metrics.jsonl"
grep -E "^ *[0-9.]+ epoch" "$R/grain.log"
ls "$R"
