#!/usr/bin/env bash
# One H200: where the GPU pipeline's time goes under training (nsys, if present;
# else the app's own jax trace). Writes $OUT/nsys_*.txt or $OUT/trace.tgz.
set -u
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=5120 --validation=256 --classes=100
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
APP="python3 app/main.py --accelerator=gpu --backend=jax --model=resnet50 --global_batch_size=256 --dataset=folder:/tmp/jpegs --input_pipeline=gpu --epochs=2 --validation_steps=-1 --verbose=2"
if [ -n "$NSYS" ]; then
  timeout 240 $NSYS profile -t cuda,osrt --cuda-memory-usage=false -o /tmp/p -f true $APP --logdir=/tmp/prof > $OUT/app.log 2>&1
  echo "profile exit $?"
  for r in cuda_api_sum cuda_gpu_kern_sum cuda_gpu_mem_time_sum; do
    timeout 60 $NSYS stats -q --report $r --format csv /tmp/p.nsys-rep > $OUT/nsys_$r.txt 2>&1; done
  head -30 $OUT/nsys_cuda_api_sum.txt | cut -c1-200
else
  timeout 200 $APP --logdir=/tmp/prof --profile_steps=25,30 > $OUT/app.log 2>&1; echo "app exit $?"
  tar czf $OUT/trace.tgz -C /tmp/prof plugins; ls -la $OUT
fi
grep -E "^throughput" $OUT/app.log
