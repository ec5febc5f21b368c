# Sourced by the GPU scripts (repository root, on the device machine): install the
# Keras wheels carried in .whl/ (the GPU machines have no network and no Keras; .whl/ is
# git-ignored: put the keras, namex and optree wheels there) and set the environment.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
