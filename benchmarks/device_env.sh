# Sourced by the GPU scripts (repository root, on the device machine): install the
# Keras wheels carried in .whl/ (shared/gpu-machine.md) and set the environment.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
