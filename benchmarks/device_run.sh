#!/usr/bin/env bash
# The device runner: the recipes behind README's "Measured" figures, one per figure.
#
#   bash benchmarks/device_run.sh RECIPE        (on the GPU machine, repository root)
#
# It installs the wheels carried in .whl/ (git-ignored; the GPU machines have no network
# and no Keras: keras, namex, optree, plus grain, array-record, portpicker, simplejpeg,
# nvidia-nvimgcodec-cu13, nvidia-nvjpeg and pytest for the recipes that read JPEGs),
# checks the machine has the GPUs the recipe needs, runs it and writes every log,
# summary and peer result under $OUT/RECIPE ($OUT: ./bench-out when unset), and that
# folder as $OUT/RECIPE.tgz (a device call brings back only a few files). Then, on any
# machine with the repository: python benchmarks/collect.py RECIPE $OUT RESULT.json
#
# recipe        GPUs  what                                                 figures in results/
# step          1     ResNet-50 synthetic, every callback on, at 1,024 and  2026-12-01-h200-step.json
#                     256; the torch.compile peer at 256; a trace of steps
#                     20-25 at 256 split by kernel kind (step_kernels.py)
# real_data     1     the GPU tests of the nvJPEG path, then $TRAIN JPEGs:  2026-12-01-h200-gc.json
#                     synthetic, --input_pipeline=gpu, the DataLoader peer,
#                     --input_pipeline=grain (batch $B, 4 epochs; grain 2)
# digits        1     the default digits job on the GPU, no TensorFlow      2026-11-30-h200-real-data.json
# energy        1     the app's energy figures against nvidia-smi's         (energy_check.py's JSON)
# batchnorm     2     sweeps at 256 and 1,024 per GPU: one GPU, two with    2026-11-30-h200x2-batchnorm.json
#                     BatchNorm statistics per replica, two global
#                     (BENCH_XLA="flags" adds a two-GPU sweep with them)
# scale         2     real JPEGs, 256 per GPU: synthetic, gpu and grain on  2026-11-30-h200-real-data.json
#                     one GPU and on two; two on synthetic data with XLA's
#                     latency-hiding scheduler
# fashion_mnist 1     time to 0.93 top-1 on Fashion-MNIST (default recipe,   (time_to_accuracy)
#                     batch 512, 15 epochs, auto pipeline) against the
#                     PyTorch peer (torch_fashion_peer.py), in turn (turn 1
#                     cold, later turns warm from its caches); the
#                     IDX files from $FASHION (default .data/fashion-mnist:
#                     carry it; .xz or .gz files are unpacked to /tmp)
# coldstart     1     the fashion_mnist job's start-up, cut by cut: each run  (startup)
#                     from empty caches of its own, with the defaults, every
#                     cut of app/engine/cold_start.py on, none, and each cut
#                     turned from its default (BENCH_STARTUP_CUTS), then one
#                     warm; every run's timeline (summary.json's startup)
# ladder        1     the effort ladder (--benchmark=ladder) of ResNet-50    (ladders)
#                     (base batch 128) and ViT-B/16 (base 64), synthetic
#                     data, 96 timed steps a rung
# models        1     every family against its torchvision twin             2026-12-04-h200-models.json
#                     (torch_models_peer.py), side by side in turn, bf16,
#                     batch 256, synthetic: ResNet-50, ViT-B/16, ConvNeXt-T,
#                     EfficientNetV2-S, MobileNetV3-Large (app and twin), a
#                     user's file model (app only); each app run $REPEATS
#                     times in fresh processes, each from empty caches,
#                     choosing its kernels by measurement (XLA's autotuned
#                     step against its heuristic one: its A/B decision in
#                     its summary) and keeping them; the heuristic's own
#                     figure (--xla_autotune=heuristic, empty caches);
#                     $PROFILE's families profiled again for their step
#                     breakdown, the GPU's busy time read apart
#                     (busy_time.py) to check its idle
# decide        1     a decision checked: --benchmark=probe, then a full run  (run folders, for
#                     of the same flags (Fashion-MNIST, batch 512, 15       app/report.py
#                     epochs, 0.93 target), each from empty compile caches; --target: README's
#                     folders come back as probe/ and full/                 first section)
#
# Settings (environment): B (256) the batch of step's trace and of real_data, TRAIN
# (20,480) the JPEGs made for real_data and scale, TESTS=0 and PEER=0 leave real_data's
# GPU tests and DataLoader peer out, TURNS (2) fashion_mnist's app-then-peer turns,
# FAMILIES (all six: the twins' torchvision names and "user") and PROFILE (convnext_tiny
# vit_b_16; PROFILE="" profiles none) the models recipe's families and those it
# profiles, KERNELS_FROM (unset) a folder of an earlier models call's kept kernels
# (FAMILY.autotune.textproto) that its families load instead of autotuning, CHOICES_FROM
# (unset) a folder of an earlier models call's measured choices (FAMILY.choices/, its
# $OUT/models, carried) that its families load instead of measuring (the second machine
# of the kind), HEURISTIC=0 leaves out the heuristic run of each family, FRESH_LIMIT
# (240) the seconds a fresh app run may take (its measured choice compiles twice), PROFILE_FRESH=1
# profiles from empty caches with a measured choice of its own and XLA's autotune log
# (the per-op truth: summary.json's kernels.slow_ops) instead of loading the first run's
# kernels, REPEATS (2) its app runs per family and coldstart's runs with the defaults
# and with every cut (the spread of a cold start), TWINS=0 leaves the models recipe's
# twins out (an app run from cold: ConvNeXt-T ~85 s, EfficientNetV2-S ~155 s on an H100,
# plus the measured choice's heuristic compile and ~60 timed steps; a twin's
# torch.compile ~65-150 s: one family a call), COMMIT
# the git commit the copied tree is (else the copy's `git rev-parse HEAD`). fashion_mnist's
# one-off diagnoses are gone, their findings kept: where the cold start's compiles went
# (DIAG=1, 2026-12-03-h200-fashion-mnist-9bf4239.json at 35cc76c) and what XLA's flags do
# to the cold compile (DIAG=xla, 2026-12-03-h200-fashion-mnist-c6d3e37-xla.json); the
# runner at commit c6d3e37 has both. The app's run folders go to
# /tmp/bench/NAME, made afresh for every run (a warm machine keeps the last call's
# folders, and resuming one would measure nothing); only their summaries come back.
set -u
RECIPE=${1:-}
B=${B:-256}
TRAIN=${TRAIN:-20480}
FASHION=${FASHION:-$PWD/.data/fashion-mnist}
TESTS=${TESTS:-1} PEER=${PEER:-1} TURNS=${TURNS:-2}  # real_data's GPU tests and peer; fashion's turns
REPEATS=${REPEATS:-2}  # coldstart's runs with the defaults, and with every cut
OUT=${OUT:-$PWD/bench-out}
R=$OUT/$RECIPE

case "$RECIPE" in  # the GPUs of one host each recipe needs
  step|real_data|digits|energy|fashion_mnist|coldstart|models|ladder|decide) NEED=1 ;;
  batchnorm|scale) NEED=2 ;;
  *) sed -n '2,/^set -u/p' "$0" | grep '^#' | cut -c3-; echo "error: unknown recipe '$RECIPE'" >&2; exit 2 ;;
esac
HAVE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$HAVE" -lt "$NEED" ]; then
  echo "error: recipe $RECIPE needs $NEED GPU(s) of one host; this machine has $HAVE" >&2
  exit 2
fi

# The environment: the carried wheels, the repository on the path, nvJPEG's library.
# .whl-gpu/ (nvimgcodec, nvjpeg: 29 MB) travels only with the recipes that read JPEGs.
WHEELS=$(ls .whl/*.whl .whl-gpu/*.whl 2>/dev/null)
if [ -n "$WHEELS" ]; then  # byte-compiled as pip does by default: else the first run of a
  # call compiled Keras's sources (~2 s) and the peer, preinstalled, did not
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade \
    --target /tmp/site $WHEELS || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$R" /tmp/bench

# What ran where: the collector copies these into the result JSON.
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "cores: $(nproc)"
  python3 -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__)"
  python3 -c "import torch; print('torch', torch.__version__)" 2>/dev/null || echo "torch: absent"
  python3 -c "import tensorflow" > /dev/null 2>&1 && echo "tensorflow: present" \
    || echo "tensorflow: absent"
  [ "$NEED" -gt 1 ] && nvidia-smi topo -m
} > "$R/machine.txt" 2>&1
case "$RECIPE" in  # the settings the recipe reads, for the command it records
  step) SETTINGS="B=$B " ;;
  real_data) SETTINGS="B=$B TRAIN=$TRAIN TESTS=$TESTS PEER=$PEER " ;;
  fashion_mnist) SETTINGS="TURNS=$TURNS " ;;
  coldstart) SETTINGS="REPEATS=$REPEATS " ;;
  scale) SETTINGS="TRAIN=$TRAIN " ;;
  batchnorm) SETTINGS=${BENCH_XLA:+"BENCH_XLA='$BENCH_XLA' "} ;;
  models) SETTINGS="${FAMILIES:+FAMILIES='$FAMILIES' }${PROFILE+PROFILE='$PROFILE' }${KERNELS_FROM:+KERNELS_FROM='${KERNELS_FROM#$PWD/}' }${CHOICES_FROM:+CHOICES_FROM='${CHOICES_FROM#$PWD/}' }REPEATS=${REPEATS:-2} ${TWINS:+TWINS=$TWINS }${FRESH_LIMIT:+FRESH_LIMIT=$FRESH_LIMIT }${HEURISTIC:+HEURISTIC=$HEURISTIC }${PROFILE_FRESH:+PROFILE_FRESH=$PROFILE_FRESH }" ;;
  *) SETTINGS="" ;;
esac
RECIPE=$RECIPE SETTINGS=$SETTINGS GPUS=$NEED python3 - > "$R/run.json" <<'PY'
import datetime, json, os, subprocess
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
print(json.dumps({
    "recipe": os.environ["RECIPE"], "gpus": int(os.environ["GPUS"]),
    "command": f"{os.environ['SETTINGS']}bash benchmarks/device_run.sh {os.environ['RECIPE']}",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    # COMMIT: the commit the copied tree is (a GPU machine's copy of .git may be stale).
    "commit": os.environ.get("COMMIT") or (commit.stdout.strip() if commit.returncode == 0
                                           else "")}, indent=2))
PY
: > "$R/exits.txt"

# app NAME GPUS SECONDS [VAR=value ...] -- [app flags ...]: the app (ResNet-50 by
# default, JAX on the GPUs, every callback on) in a fresh /tmp/bench/NAME with those
# variables set; its log, summary.json, metrics.jsonl (and sweep.json) come back as NAME.*.
app() {
  local name=$1 gpus=$2 limit=$3; shift 3; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local visible=0; [ "$gpus" = 2 ] && visible=0,1
  rm -rf "/tmp/bench/$name"
  env ${envs[@]+"${envs[@]}"} CUDA_VISIBLE_DEVICES=$visible timeout "$limit" \
    python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --verbose=2 \
    --logdir="/tmp/bench/$name" "$@" > "$R/$name.log" 2>&1
  local rc=$?; echo "$name $rc" >> "$R/exits.txt"; echo "$name exit $rc"
  cp "/tmp/bench/$name/summary.json" "$R/$name.json" 2>/dev/null
  cp "/tmp/bench/$name/sweep.json" "$R/$name.sweep.json" 2>/dev/null
  cp "/tmp/bench/$name/metrics.jsonl" "$R/$name.metrics.jsonl" 2>/dev/null
  cp "/tmp/bench/$name/kernels.json" "$R/$name.kernels.json" 2>/dev/null
  cp "/tmp/bench/$name/kernels/autotune.textproto" "$R/$name.autotune.textproto" 2>/dev/null
  grep -E "^epoch|^throughput|^top-1|^ +[0-9]+ |input_pipeline=|Error|error:" "$R/$name.log" | cut -c1-300
}

# peer NAME SECONDS [torch_peer.py flags ...]: the torch.compile peer, on GPU 0.
peer() {
  local name=$1 limit=$2; shift 2
  CUDA_VISIBLE_DEVICES=0 timeout "$limit" python3 benchmarks/torch_peer.py \
    --out "$R/$name.json" "$@" > "$R/$name.log" 2>&1
  local rc=$?; echo "$name $rc" >> "$R/exits.txt"; echo "$name exit $rc"
  grep -h '"images_per_sec"' "$R/$name.json" 2>/dev/null | cut -c1-300
}

# jpegs COUNT VALIDATION: a folder of ImageNet-sized JPEGs (made once per warm machine).
jpegs() {
  local folder=/tmp/bench-jpegs-$1-$2
  if [ ! -e "$folder/.done" ]; then
    rm -rf "$folder"
    python3 benchmarks/make_jpegs.py "$folder" --train="$1" --validation="$2" --classes=100 \
      > "$R/jpegs.log" 2>&1 && touch "$folder/.done"
  else
    echo "$folder made by an earlier call on this machine" > "$R/jpegs.log"
  fi
  echo "$folder"
}

# fashion_setup: Fashion-MNIST's IDX files unpacked to /tmp/fashion, $CACHES made empty,
# every shared library read once, the app's sources byte-compiled (fashion_mnist, coldstart).
fashion_setup() {
python3 - "$FASHION" /tmp/fashion <<'PY' || return 1
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
  # Turn 1 compiles from cold on both sides; later turns find turn 1's programs in
  # each one's persistent cache (JAX's, which the app keeps by default, and inductor's,
  # which torch.compile keeps by default in /tmp/torchinductor_$USER): both emptied here.
  # So is the CUDA driver's JIT cache (~/.nv/ComputeCache by default, CUDA_CACHE_PATH),
  # one per side: what the driver compiles for one would warm every later process on
  # the machine, whoever runs it (it held under 1 MiB for the app, and did not explain
  # the app's cold compile: 2026-12-03-h200-fashion-mnist-afb598d-jit.json at 35cc76c).
  CACHES=/tmp/bench/caches; rm -rf "$CACHES"; mkdir -p "$CACHES"
  # Compile caches cold, the file cache warm for both: every shared library either
  # side loads (JAX's, torch's, the CUDA libraries they share) is read once first, so
  # neither pays for the disk, nor does the one going second find it read for it.
python3 - > "$R/page_cache.txt" <<'PY'
import importlib.util, os, time
started, total = time.perf_counter(), 0
roots = {p for name in ("jax", "jaxlib", "jax_plugins", "torch", "triton", "nvidia")
         for spec in [importlib.util.find_spec(name)] if spec
         for p in (spec.submodule_search_locations or [])}
for root in sorted(roots):
    for folder, _, files in os.walk(root):
        for name in files:
            if ".so" in name:
                with open(os.path.join(folder, name), "rb") as f:
                    while chunk := f.read(1 << 24):
                        total += len(chunk)
print(f"read {total / 2**30:.2f} GiB of shared libraries in {time.perf_counter() - started:.1f} s")
PY
  cat "$R/page_cache.txt"
  # The app's own sources byte-compiled, as pip does when it installs a package (an
  # editable install, or this copied tree, leaves it to the first run); the peer's
  # torch came installed so.
  python3 -m compileall -q app callbacks flags preprocessing > /dev/null
}

case "$RECIPE" in
  step)
    for batch in 1024 256; do
      app "app$batch" 1 150 -- --dataset=synthetic --global_batch_size=$batch --epochs=1 \
        --steps_per_epoch=$((24576 / batch)) --validation_steps=-1
    done
    peer peer 170 --batch_sizes=256 --steps=90
    app prof 1 100 -- --dataset=synthetic --global_batch_size="$B" --epochs=1 \
      --steps_per_epoch=30 --validation_steps=-1 --profile_steps=20,25
    trace=$(find /tmp/bench/prof/plugins -name '*trace.json.gz' 2>/dev/null | head -1)
    if [ -n "$trace" ]; then
      python3 benchmarks/step_kernels.py "$trace" --json "$R/step_kernels.json" \
        > "$R/step_kernels.txt" 2>&1
    fi
    [ -d /tmp/bench/prof/plugins ] && tar czf "$R/trace.tgz" -C /tmp/bench/prof plugins
    ;;
  real_data)
    [ "$TESTS" = 1 ] && timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_nvjpeg_on_gpu.py \
      > "$R/gpu_tests.log" 2>&1
    status=$?; [ "$TESTS" = 1 ] || status=0
    [ "$TESTS" = 1 ] && { echo "gpu_tests $status" >> "$R/exits.txt"; echo "gpu tests exit $status"; }
    if [ $status != 0 ]; then  # a broken pipeline measures nothing: keep the device time
      tail -60 "$R/gpu_tests.log"; exit 1
    fi
    J=$(jpegs "$TRAIN" 1024); cat "$R/jpegs.log"
    app synthetic 1 120 -- --dataset=synthetic --global_batch_size="$B" --epochs=4 \
      --steps_per_epoch=$((TRAIN / B)) --validation_steps=-1
    app gpu 1 150 -- --dataset=folder:"$J" --input_pipeline=gpu --global_batch_size="$B" \
      --epochs=4 --validation_steps=-1
    [ "$PEER" = 1 ] && peer peer 140 --data="$J" --batch_sizes="$B" --steps=90 --warmup=15
    app grain 1 120 -- --dataset=folder:"$J" --input_pipeline=grain --global_batch_size="$B" \
      --epochs=2 --validation_steps=-1
    ;;
  digits)  # the app's defaults: small_resnet on digits (a later --model overrides app's)
    app digits 1 150 -- --model=small_resnet
    ;;
  energy)
    CUDA_VISIBLE_DEVICES=0 timeout 540 python3 benchmarks/energy_check.py \
      --logdir=/tmp/bench/energy --out "$R/energy_check.json" > "$R/energy.log" 2>&1
    rc=$?; echo "energy $rc" >> "$R/exits.txt"; echo "energy exit $rc"
    ;;
  batchnorm)
    SWEEP="--dataset=synthetic --steps_per_epoch=40"
    app one_gpu 1 165 -- $SWEEP --sweep_batch_sizes=256,1024
    app two_per_replica 2 165 -- $SWEEP --sweep_batch_sizes=512,2048
    app two_global 2 165 -- $SWEEP --sweep_batch_sizes=512,2048 --batchnorm_statistics=global
    if [ -n "${BENCH_XLA:-}" ]; then
      app two_xla 2 165 "XLA_FLAGS=$BENCH_XLA" -- $SWEEP --sweep_batch_sizes=512,2048
    fi
    ;;
  scale)
    J=$(jpegs "$TRAIN" 1024); cat "$R/jpegs.log"
    for gpus in 1 2; do  # the first epoch is warm-up: compile and the workers' start
      steps=$((TRAIN / (256 * gpus)))
      EACH="--global_batch_size=$((256 * gpus)) --validation_steps=-1"
      app "syn$gpus" $gpus 170 -- $EACH --dataset=synthetic --epochs=2 \
        --steps_per_epoch=$((80 / gpus)) --throughput_warmup_steps=$((80 / gpus))
      app "gpu$gpus" $gpus 170 -- $EACH --dataset=folder:"$J" --input_pipeline=gpu --epochs=3 \
        --throughput_warmup_steps=$steps
      app "grain$gpus" $gpus 170 -- $EACH --dataset=folder:"$J" --input_pipeline=grain \
        --epochs=3 --throughput_warmup_steps=$steps
    done
    app syn2_lhs 2 170 XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true -- \
      --global_batch_size=512 --validation_steps=-1 --dataset=synthetic --epochs=2 \
      --steps_per_epoch=40 --throughput_warmup_steps=40
    ;;
  fashion_mnist)
    fashion_setup || exit 1
    for turn in $(seq "$TURNS"); do  # app, peer, app, peer: the machine's drift hits both
      app "app$turn" 1 240 JAX_COMPILATION_CACHE_DIR="$CACHES/xla" \
        CUDA_CACHE_PATH="$CACHES/cuda-app" -- --model=small_resnet \
        --dataset=fashion_mnist --data_dir=/tmp/fashion --global_batch_size=512 --epochs=15 \
        --target_top1=0.93
      CUDA_VISIBLE_DEVICES=0 TORCHINDUCTOR_CACHE_DIR="$CACHES/inductor" \
        CUDA_CACHE_PATH="$CACHES/cuda-peer" \
        timeout 240 python3 benchmarks/torch_fashion_peer.py \
        --data_dir=/tmp/fashion --epochs=15 --batch=512 --out "$R/peer$turn.json" \
        > "$R/peer$turn.log" 2>&1
      rc=$?; echo "peer$turn $rc" >> "$R/exits.txt"; echo "peer$turn exit $rc"
      grep -E "^\{'epoch'" "$R/peer$turn.log" | tail -2
      # The same peer in eager mode (--no_compile): for a job this short a strong
      # PyTorch user may not compile; the speedup that counts is over the faster.
      CUDA_VISIBLE_DEVICES=0 CUDA_CACHE_PATH="$CACHES/cuda-eager" \
        timeout 240 python3 benchmarks/torch_fashion_peer.py --no_compile \
        --data_dir=/tmp/fashion --epochs=15 --batch=512 --out "$R/eager$turn.json" \
        > "$R/eager$turn.log" 2>&1
      rc=$?; echo "eager$turn $rc" >> "$R/exits.txt"; echo "eager$turn exit $rc"
    done
    ;;
  coldstart)  # where a cold start goes, and what each cut takes off it
    fashion_setup || exit 1
    JOB="--model=small_resnet --dataset=fashion_mnist --data_dir=/tmp/fashion
      --global_batch_size=512 --epochs=15 --target_top1=0.93"
    # cold NAME CUTS: the job from compile caches of its own, empty (JAX's and the CUDA
    # driver's), with BENCH_STARTUP_CUTS=CUTS (the defaults where empty)
    cold() {
      app "$1" 1 120 JAX_COMPILATION_CACHE_DIR="$CACHES/xla-$1" CUDA_CACHE_PATH="$CACHES/cuda-$1" \
        BENCH_STARTUP_CUTS="$2" -- $JOB
      grep -E "^start-up" "$R/$1.log"
    }
    # Every cut turned from its default, one at a time (app/engine/cold_start.py's CUTS).
    TURNED=$(python3 -c "from app.engine.cold_start import CUTS
print(' '.join(('-' if on else '') + name for name, (on, _) in CUTS.items()))") || exit 1
    for round in $(seq "$REPEATS"); do  # interleaved: the machine's drift hits all
      cold "defaults$round" ""
      cold "all$round" all
    done
    cold none none
    for turn in $TURNED; do
      cold "turned_${turn#-}" "$turn"
    done
    # Warm: the first run's caches again (what a second run of the job finds).
    app warm 1 120 JAX_COMPILATION_CACHE_DIR="$CACHES/xla-defaults1" \
      CUDA_CACHE_PATH="$CACHES/cuda-defaults1" -- $JOB
    grep -E "^start-up" "$R/warm.log"
    # What importing the frameworks costs, module by module (interpreter start-up aside).
    python3 -X importtime -c "import jax, keras; jax.devices()" 2> "$R/importtime.txt" \
      > /dev/null
    ;;
  decide)  # a probe, then the full run of the same flags: each from empty compile caches
    fashion_setup || exit 1
    F="--model=small_resnet --dataset=fashion_mnist --data_dir=/tmp/fashion
      --global_batch_size=512 --epochs=15"
    app probe 1 200 JAX_COMPILATION_CACHE_DIR="$CACHES/xla-probe" \
      CUDA_CACHE_PATH="$CACHES/cuda-probe" -- $F --benchmark=probe
    grep -E "^(probe|start-up|breakdown|machine|price):" "$R/probe.log"
    app full 1 240 JAX_COMPILATION_CACHE_DIR="$CACHES/xla-full" \
      CUDA_CACHE_PATH="$CACHES/cuda-full" -- $F --target_top1=0.93
    for name in probe full; do  # the folders app/report.py --target reads
      mkdir -p "$R/$name"
      cp /tmp/bench/$name/{config,summary,probe}.json /tmp/bench/$name/metrics.jsonl \
        "$R/$name/" 2>/dev/null
    done
    ;;
  ladder)  # each rung a short measured run; a ladder cut by its limit keeps its rungs
    L="--dataset=synthetic --benchmark=ladder --steps_per_epoch=96"
    app ladder_resnet50 1 290 -- $L --model=resnet50 --global_batch_size=128
    app ladder_vit_b16 1 290 -- $L --model=vit_b16 --global_batch_size=64
    ;;
  models)  # each family, then its twin, in turn: the machine's drift hits both
    FAMILIES=${FAMILIES:-"resnet50 vit_b_16 convnext_tiny efficientnet_v2_s mobilenet_v3_large user"}
    PROFILE=${PROFILE-"convnext_tiny vit_b_16"}  # set but empty: none profiled
    REPEATS=${REPEATS:-2} TWINS=${TWINS:-1} HEURISTIC=${HEURISTIC:-1}
    # A fresh run's limit: ConvNeXt-T's measured choice took 145 s on an H100 (its
    # heuristic run 64 s; 2026-12-07-h100-models-measured.json); EfficientNetV2-S's cold
    # compile alone is ~155 s
    FRESH_LIMIT=${FRESH_LIMIT:-240}
    SYN="--dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=120
      --validation_steps=-1"
    # Run NAME of a family from an empty JAX cache of its own (XLA's autotuner picks other
    # kernels from run to run; a shared cache would hand the first run's to every later
    # one), its kernels chosen by measurement (app/engine/measured.py: the choice is kept
    # in that cache folder, so it starts empty too) and kept (--keep_kernels:
    # NAME.kernels.json, NAME.autotune.textproto where the autotuned program won; the
    # choice as NAME.choices/). The first is NAME, the later ones NAME.run2, ...
    # With KERNELS_FROM (a folder of an earlier call's FAMILY.autotune.textproto: its
    # $OUT/models, carried), a family whose kernels are there loads them instead
    # (--kernels_from); with CHOICES_FROM (an earlier call's FAMILY.choices/), a family
    # loads the choice measured there (a copy: the carried folder stays as it came).
    fresh() { local name=$1; shift; rm -rf "/tmp/bench/caches/$name"
      local from=() store=()
      [ -n "${KERNELS_FROM:-}" ] && [ -f "$KERNELS_FROM/${name%%.*}.autotune.textproto" ] \
        && from=(--kernels_from="$KERNELS_FROM/${name%%.*}.autotune.textproto")
      if [ -n "${CHOICES_FROM:-}" ] && [ -d "$CHOICES_FROM/${name%%.*}.choices" ]; then
        rm -rf "/tmp/bench/choices/$name"; mkdir -p /tmp/bench/choices
        cp -r "$CHOICES_FROM/${name%%.*}.choices" "/tmp/bench/choices/$name"
        store=(BENCH_KERNEL_CHOICES="/tmp/bench/choices/$name")
      fi
      app "$name" 1 "$FRESH_LIMIT" JAX_COMPILATION_CACHE_DIR="/tmp/bench/caches/$name" \
        ${store[@]+"${store[@]}"} -- "$@" --keep_kernels ${from[@]+"${from[@]}"}
      grep -E "^kernel choice: " "$R/$name.log" | cut -c1-300
      [ -d "/tmp/bench/caches/$name/kernel_choices" ] \
        && cp -r "/tmp/bench/caches/$name/kernel_choices" "$R/$name.choices"
      rm -rf "/tmp/bench/caches/$name"; }
    for twin in $FAMILIES; do
      if [ "$twin" = user ]; then
        model=examples/my_model.py:make_model
      else
        model=$(cd benchmarks && python3 -c "from torch_models_peer import TWINS; print(TWINS['$twin'])")
      fi
      fresh "$twin" $SYN --model="$model"
      if [ "$HEURISTIC" = 1 ]; then  # XLA's heuristic choice alone, from empty caches
        rm -rf "/tmp/bench/caches/$twin.heuristic"
        app "$twin.heuristic" 1 240 JAX_COMPILATION_CACHE_DIR="/tmp/bench/caches/$twin.heuristic" \
          -- $SYN --model="$model" --xla_autotune=heuristic
        rm -rf "/tmp/bench/caches/$twin.heuristic"
      fi
      if [ "$twin" != user ] && [ "$TWINS" = 1 ]; then
        CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/torch_models_peer.py \
          --model="$twin" --steps=60 --out "$R/$twin.peer.json" > "$R/$twin.peer.log" 2>&1
        rc=$?; echo "$twin.peer $rc" >> "$R/exits.txt"; echo "$twin.peer exit $rc"
        grep -h '"images_per_sec"' "$R/$twin.peer.json" 2>/dev/null | head -1 | cut -c1-200
      fi
      for repeat in $(seq 2 "$REPEATS"); do
        fresh "$twin.run$repeat" $SYN --model="$model"
      done
      grep -h "^kernels: " "$R/$twin.log" "$R/$twin".run*.log 2>/dev/null | cut -c1-120
      case " $PROFILE " in *" $twin "*)  # a profiled run dispatches synchronously: not timed
        # with the first run's kernels: its breakdown is set against that run's step, and an
        # autotune of its own can choose others (call 4: ConvNeXt-T's profiled run took
        # 79.4 ms on the device a step where the run it was set against stepped in 57.2)
        # (the measured choice: its kept choice, loaded from a copy of its store, where the
        # heuristic program won; PROFILE_FRESH=1: a choice of its own from empty caches,
        # with XLA's autotune log kept, so that its trace can be set against it per op)
        kept=(); envs=(); limit=150
        if [ "${PROFILE_FRESH:-0}" = 1 ]; then  # (a cold compile, twice, and the A/B first)
          rm -rf "/tmp/bench/caches/$twin.profiled"; limit=270
          envs=(JAX_COMPILATION_CACHE_DIR="/tmp/bench/caches/$twin.profiled"); kept=(--keep_kernels)
        elif [ -f "/tmp/bench/$twin/kernels/autotune.textproto" ]; then
          kept=(--kernels_from="/tmp/bench/$twin")
        elif [ -d "$R/$twin.choices" ]; then
          rm -rf "/tmp/bench/choices/$twin.profiled"; mkdir -p /tmp/bench/choices
          cp -r "$R/$twin.choices" "/tmp/bench/choices/$twin.profiled"
          envs=(BENCH_KERNEL_CHOICES="/tmp/bench/choices/$twin.profiled")
        fi
        app "$twin.profiled" 1 "$limit" ${envs[@]+"${envs[@]}"} -- $SYN --steps_per_epoch=40 \
          --profile_steps=30,32 --model="$model" ${kept[@]+"${kept[@]}"}
        rm -rf "/tmp/bench/caches/$twin.profiled"
        grep -E "^breakdown|^kernels: |^kernel choice: " "$R/$twin.profiled.log" | cut -c1-400
        # the GPU's busy time a step read apart from the breakdown, for its idle's check
        trace=$(find "/tmp/bench/$twin.profiled/plugins/profile" -name '*.xplane.pb' \
          2>/dev/null | head -1)
        [ -n "$trace" ] && timeout 300 python3 benchmarks/busy_time.py "$trace" \
          --json "$R/$twin.busy.json" > "$R/$twin.busy.log" 2>&1
        cat "$R/$twin.busy.log" 2>/dev/null
        # the traced step's module as the trace holds it (HloProto, ~3 MB): the counter's
        # reading of it can be checked off the device (tests/hlo_fixtures.py's form)
        proto=$(find "/tmp/bench/$twin.profiled/plugins/profile" -name 'jit_train_step*.hlo_proto.pb' \
          2>/dev/null | head -1)
        [ -n "$proto" ] && cp "$proto" "$R/$twin.train_step.hlo_proto.pb" ;;
      esac
    done
    ;;
esac
ls "$R"
# The device call brings back only a few files of $OUT: the recipe's folder comes back as
# one archive too, RECIPE.tgz (call 5 got 8 of the models recipe's 39 files).
tar czf "$OUT/$RECIPE.tgz" -C "$OUT" "$RECIPE"
! grep -qv ' 0$' "$R/exits.txt"  # exit 1 if any run failed (exits.txt says which)
