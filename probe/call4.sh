set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax TF_CPP_MIN_LOG_LEVEL=2
R=/tmp/r4; rm -rf $R; mkdir -p $R /tmp/bench
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
SYN="--accelerator=gpu --backend=jax --verbose=2 --dataset=synthetic --global_batch_size=256 --epochs=1 --steps_per_epoch=120 --validation_steps=-1 --model=vit_b16"
run() { local name=$1; shift; rm -rf /tmp/bench/$name
  timeout 80 "$@" $SYN --logdir=/tmp/bench/$name > $R/$name.log 2>&1; el "$name exit $?"
  cp /tmp/bench/$name/summary.json $R/$name.json 2>/dev/null; grep -E "^throughput" $R/$name.log | cut -c1-120; }
run vit python3 app/main.py
run vit_noflash python3 -c "import keras, runpy, sys; keras.config.disable_flash_attention(); sys.argv = ['app/main.py'] + sys.argv[1:]; runpy.run_path('app/main.py', run_name='__main__')"
CUDA_VISIBLE_DEVICES=0 timeout 75 python3 benchmarks/torch_models_peer.py --model=vit_b_16 --steps=45 --warmup=10 --out $R/vit.peer.json > $R/vit.peer.log 2>&1; el "vit peer $?"; grep -h '"images_per_sec"' $R/vit.peer.json | head -1
XLA_FLAGS=--xla_gpu_enable_cudnn_layer_norm=true run vit_cudnnln python3 app/main.py
CUDA_VISIBLE_DEVICES=0 timeout 80 python3 benchmarks/torch_models_peer.py --model=mobilenet_v3_large --steps=45 --warmup=10 --out $R/mobilenet.peer.json > $R/mobilenet.peer.log 2>&1; el "mobilenet peer $?"; grep -h '"images_per_sec"' $R/mobilenet.peer.json | head -1
