#!/usr/bin/env bash
# The benchmarks on a lent GPU machine, in one command, in under 8 minutes:
#
#     bash bench/gpu.sh            # from the repository root
#
# Uses the Python that has TensorFlow with a GPU (PYTHON, else .venv/bin/python,
# else python3). If the project's packages are missing it installs them: from
# wheels carried in bench/wheels/ when that folder exists (the device machine may
# have no network), else from PyPI. Then it measures, with the `base` preset,
# mixed_bfloat16 and XLA:
#   1. ceiling + training: the bf16 matmul rate, and each design's non-padding
#      target tokens/s and fraction of that rate (ours vs the tutorial's design vs
#      KerasHub), XLA only (the GPU default);
#   2. decoding: cached vs uncached greedy, beam 4.
# Each part has its own time limit and JSON file (under $OUT when set, as on the
# device tool, else bench/results/), so one overrunning part loses only itself.
# Override sizes with TOKEN_BUDGET, BASELINE_BATCH, STEPS, PRESET.
set -u
cd "$(dirname "$0")/.."

PRESET=${PRESET:-base}
TOKEN_BUDGET=${TOKEN_BUDGET:-8192}
BASELINE_BATCH=${BASELINE_BATCH:-64}
STEPS=${STEPS:-6}
RESULTS=${OUT:-bench/results}
mkdir -p "$RESULTS"

if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2

if ! "$PYTHON" -c "import tensorflow, tensorflow_text, keras, sentencepiece, keras_hub" 2>/dev/null; then
  echo "installing the requirements ..."
  if [ -d bench/wheels ]; then
    "$PYTHON" -m pip install --quiet --no-index --find-links bench/wheels -r requirements.txt
  else
    "$PYTHON" -m pip install --quiet -r requirements.txt
  fi
fi
if ! "$PYTHON" -c "import keras_transformer" 2>/dev/null; then
  "$PYTHON" -m pip install --quiet --no-deps --no-build-isolation -e . \
    || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PYTHON" - <<'PY'
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
print(f"TensorFlow {tf.__version__}, GPUs: {gpus}")
if not gpus:
    print("WARNING: no GPU visible to TensorFlow; the numbers below are CPU numbers.")
PY

status=0
echo "== ceiling + training (${PRESET}, mixed_bfloat16, XLA) =="
timeout 330 "$PYTHON" -m bench ceiling training --preset "$PRESET" \
  --mixed-precision mixed_bfloat16 --xla on --token-budget "$TOKEN_BUDGET" \
  --baseline-batch-size "$BASELINE_BATCH" --steps "$STEPS" \
  --output "$RESULTS/gpu-training.json" || { echo "training: exit $?"; status=1; }

echo "== decoding (${PRESET}, mixed_bfloat16, XLA) =="
timeout 120 "$PYTHON" -m bench decoding --preset "$PRESET" \
  --mixed-precision mixed_bfloat16 --xla on --output "$RESULTS/gpu-decoding.json" \
  || { echo "decoding: exit $?"; status=1; }
exit $status
