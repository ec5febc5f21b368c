set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax TF_CPP_MIN_LOG_LEVEL=2
R=/tmp/r; rm -rf $R; mkdir -p $R /tmp/bench
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
app() { local name=$1; shift; rm -rf /tmp/bench/$name
  timeout 150 python3 app/main.py --accelerator=gpu --backend=jax --verbose=2 --dataset=synthetic \
    --global_batch_size=256 --epochs=1 --steps_per_epoch=100 --validation_steps=-1 \
    --logdir=/tmp/bench/$name "$@" > $R/$name.log 2>&1; el "$name exit $?"
  grep -E "^throughput|images/sec|rror" $R/$name.log | tail -3 | cut -c1-300; }
timeout 100 python3 probe/convnext_ops.py jax > $R/ops_jax.txt 2>&1; el ops_jax; tail -1 $R/ops_jax.txt
app convnext --model=applications:ConvNeXtTiny --profile_steps=70,72
timeout 90 python3 probe/xprof_dump.py /tmp/bench/convnext $R/convnext_tools > $R/xprof_dump.log 2>&1; el dump; grep -v "^I0000\|^W0000\|^E0000" $R/xprof_dump.log | tail -8 | cut -c1-300
tar czf $R/convnext_xplane.tgz -C /tmp/bench/convnext plugins; ls -la $R/convnext_xplane.tgz
timeout 170 python3 benchmarks/torch_models_peer.py --model=convnext_tiny --steps=60 --out $R/peer_convnext.json --profile_out $R/peer_convnext_kernels.txt > $R/peer_convnext.log 2>&1; el "peer exit $?"; tail -2 $R/peer_convnext.log | cut -c1-300
XLA_FLAGS=--xla_gpu_enable_cudnn_layer_norm=true app convnext_cudnnln --model=applications:ConvNeXtTiny
timeout 120 python3 probe/convnext_ops.py torch > $R/ops_torch.txt 2>&1; el ops_torch; tail -1 $R/ops_torch.txt

