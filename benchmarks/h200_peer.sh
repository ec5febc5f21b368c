#!/usr/bin/env bash
# One H200: the app's gpu pipeline and the PyTorch peer on the same $TRAIN (20,480)
# JPEGs, in one call (the peer's warm-up now runs past the batches its DataLoader made
# ahead while it compiled); first, whether nvJPEG calls allocators it is given
# (benchmarks/nvjpeg_pools_probe.py; run here in its first version, through
# NvImageCodecCanvases, which gave nvJPEG the pools then).
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
TRAIN=${TRAIN:-20480}
R=/tmp/rd; mkdir -p $R
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=$TRAIN --validation=256 --classes=100 \
  > $R/jpegs.log 2>&1; cat $R/jpegs.log
timeout 60 python3 benchmarks/nvjpeg_pools_probe.py /tmp/jpegs/train > $R/pools.log 2>&1
echo "pools probe exit $?"; grep -v "^$" $R/pools.log | grep -iv "nvjpeg2k\|nvtiff\|pip install" | tail -5
rm -rf /tmp/gpu  # a warm machine keeps the last call's run folders
timeout 100 python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 \
  --global_batch_size=256 --verbose=2 --logdir=/tmp/gpu --dataset=folder:/tmp/jpegs \
  --input_pipeline=gpu --epochs=3 --validation_steps=-1 > $R/gpu.log 2>&1
echo "gpu exit $?"; cp /tmp/gpu/summary.json $R/gpu.json; grep -E "^epoch|^throughput" $R/gpu.log
timeout 130 python3 benchmarks/torch_peer.py --data=/tmp/jpegs --batch_sizes=256 --steps=60 \
  --out $R/peer.json > $R/peer.log 2>&1; echo "peer exit $?"
grep -hE '"images_per_sec"|block_step' -A4 $R/peer.json | tr -d ' \n' | cut -c1-300; echo
tar czf "$OUT/peer.tgz" -C /tmp rd
