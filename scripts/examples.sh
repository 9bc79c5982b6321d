#!/usr/bin/env bash
# The worked examples beside the translator (docs/guides/tasks.md): an English language
# model and a sentence-type classifier, both from the bundled corpus, trained, evaluated,
# exported, served by one embedded server and queried through it.
#
#   bash scripts/examples.sh                      # 10 + 5 minutes of training on a CPU
#   LM_MINUTES=25 CLASSIFY_MINUTES=10 bash scripts/examples.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LM_MINUTES="${LM_MINUTES:-10}"
CLASSIFY_MINUTES="${CLASSIFY_MINUTES:-5}"
LM_RUN="${LM_RUN:-runs/lm-en}"
CLASSIFY_RUN="${CLASSIFY_RUN:-runs/type-en}"
BASE="${BASE:-export}"
REST_PORT="${REST_PORT:-8501}"
GRPC_PORT="${GRPC_PORT:-8500}"
KT="${KT:-.venv/bin/keras-transformer}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

step() { printf '\n== %s\n' "$*"; }

step "language model: English side of data/cmn-eng, preset small, ${LM_MINUTES} minutes"
"$KT" train --task lm --preset small --data data/cmn-eng/cmn.txt --column en --run "$LM_RUN" \
  --minutes "$LM_MINUTES"
"$KT" evaluate --run "$LM_RUN" --split test

step "classifier: sentence type (data/sentence-type/en.tsv), preset small, ${CLASSIFY_MINUTES} minutes"
"$KT" train --task classify --preset small --data data/sentence-type/en.tsv --language en \
  --run "$CLASSIFY_RUN" --minutes "$CLASSIFY_MINUTES"
"$KT" evaluate --run "$CLASSIFY_RUN" --split test

step "export both to ${BASE}/english and ${BASE}/sentence_type"
"$KT" export --run "$LM_RUN" --name english --base "$BASE"
"$KT" export --run "$CLASSIFY_RUN" --name sentence_type --base "$BASE"

step "serve both on 127.0.0.1 (REST ${REST_PORT}, gRPC ${GRPC_PORT}) from one model config file"
CONFIG="$(mktemp)"
trap 'rm -f "$CONFIG"' EXIT
cat > "$CONFIG" <<CONFIG
model_config_list {
  config { name: 'english' base_path: '$PWD/$BASE/english' model_platform: 'tensorflow' }
  config { name: 'sentence_type' base_path: '$PWD/$BASE/sentence_type' model_platform: 'tensorflow' }
}
CONFIG
"$KT" serve --model_config_file "$CONFIG" --port "$GRPC_PORT" --rest_api_port "$REST_PORT" \
  > "$LM_RUN/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -f "$CONFIG"' EXIT
for name in english sentence_type; do
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:${REST_PORT}/v1/models/${name}" | grep -q AVAILABLE; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then cat "$LM_RUN/serve.log"; exit 1; fi
    sleep 1
  done
done

step "generate through the server: greedy (serving_default), then sampled (sample)"
curl -s -X POST "http://127.0.0.1:${REST_PORT}/v1/models/english:predict" \
  -d '{"instances": [{"text": "Tom is"}, {"text": "I would like to"}]}'; echo
curl -s -X POST "http://127.0.0.1:${REST_PORT}/v1/models/english:predict" \
  -d '{"signature_name": "sample", "instances": [
        {"text": "Tom is", "temperature": 0.8, "top_k": 40, "top_p": 0.95, "seed": 1, "max_new_tokens": 20},
        {"text": "Tom is", "temperature": 0.8, "top_k": 40, "top_p": 0.95, "seed": 2, "max_new_tokens": 20}]}'; echo

step "classify through the server: :predict, then TF Serving's Classify API (tf.Example in)"
curl -s -X POST "http://127.0.0.1:${REST_PORT}/v1/models/sentence_type:predict" \
  -d '{"instances": [{"text": "Where are you going"}, {"text": "I am going home"}]}'; echo
curl -s -X POST "http://127.0.0.1:${REST_PORT}/v1/models/sentence_type:classify" \
  -d '{"signature_name": "classify", "examples": [{"text": "Where are you going"}, {"text": "What a beautiful day"}]}'; echo
echo "web page: http://127.0.0.1:${REST_PORT}/?model=english and ?model=sentence_type (while a server runs)"
