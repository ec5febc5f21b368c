# Sourced by the gpu-pipeline diagnosis scripts (repository root, on the device machine):
# the environment, $JPEGS_TRAIN (10,240) ImageNet-sized JPEGs in /tmp/jpegs, logs in /tmp/logs, and
#   staged NAME GPUS [VAR=value ...] -- [app flags ...]
# which runs the app through benchmarks/gpu_stages.py in a fresh /tmp/NAME (ResNet-50 bf16, 256 per GPU,
# every callback on, 3 epochs, no validation) with those variables set, prints one line
# (benchmarks/stages_line.py) and packs /tmp/logs into $OUT/logs.tgz.
source benchmarks/device_env.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
L=/tmp/logs; mkdir -p $L
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; } > $L/machine.txt 2>&1
python3 benchmarks/make_jpegs.py /tmp/jpegs --train=${JPEGS_TRAIN:-10240} --validation=256 --classes=100 > $L/jpegs.log 2>&1
cat $L/jpegs.log
staged() {
  local name=$1 gpus=$2; shift 2; local envs=(STAGES_OUT=$L/$name.stages.json)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local visible=0; [ "$gpus" = 2 ] && visible=0,1
  rm -rf /tmp/$name  # a warm machine keeps the last call's run folders: resuming one would measure nothing
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=$visible timeout ${STAGED_TIMEOUT:-100} \
    python3 benchmarks/gpu_stages.py --accelerator=gpu --backend=jax --model=resnet50 \
    --global_batch_size=$((256 * gpus)) --verbose=2 --validation_steps=-1 --epochs=3 \
    --logdir=/tmp/$name "$@" > $L/$name.log 2>&1
  local rc=$?; cp /tmp/$name/summary.json $L/$name.json 2>/dev/null
  python3 benchmarks/stages_line.py $L $name $rc
  tar czf $OUT/logs.tgz -C /tmp logs
}
