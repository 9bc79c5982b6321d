#!/usr/bin/env bash
# The main job: train a small zh→en translator on the bundled corpus, evaluate it,
# export it for TF Serving, serve it with the embedded server, translate through it.
#
#   make demo                  # 25 minutes of training on a CPU (MINUTES=... to change)
#   RUN=runs/zh-en MINUTES=60 make demo
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES="${MINUTES:-25}"
RUN="${RUN:-runs/zh-en}"
NAME="${NAME:-zh_en}"
BASE="${BASE:-export}"
REST_PORT="${REST_PORT:-8501}"
GRPC_PORT="${GRPC_PORT:-8500}"
KT="${KT:-.venv/bin/keras-transformer}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

step() { printf '\n== %s\n' "$*"; }

step "train: preset small, ${MINUTES} minutes, run folder ${RUN} (rerun to resume)"
"$KT" train --preset small --data data/cmn-eng/cmn.txt --src zh --tgt en --run "$RUN" --minutes "$MINUTES"

step "evaluate on the held-out test split (beam 4): translations beside references, BLEU"
"$KT" evaluate --run "$RUN" --split test --beam 4 --output "$RUN/test.hypotheses.txt" --show 6

step "export to ${BASE}/${NAME}/<version> for TensorFlow Serving"
"$KT" export --run "$RUN" --name "$NAME" --base "$BASE" --beam 4

step "serve ${BASE}/${NAME} on 127.0.0.1 (REST ${REST_PORT}, gRPC ${GRPC_PORT})"
"$KT" serve --model_name "$NAME" --model_base_path "$BASE/$NAME" \
  --port "$GRPC_PORT" --rest_api_port "$REST_PORT" > "$RUN/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:${REST_PORT}/v1/models/${NAME}" | grep -q AVAILABLE; then break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then cat "$RUN/serve.log"; exit 1; fi
  sleep 1
done
curl -sf "http://127.0.0.1:${REST_PORT}/v1/models/${NAME}"; echo

step "translate through the server (REST, then gRPC)"
"$KT" translate --server "http://127.0.0.1:${REST_PORT}" --model "$NAME" "我们来试试。" "机器学习很有趣。" "你今天晚上有空吗？"
"$KT" translate --server "127.0.0.1:${GRPC_PORT}" --model "$NAME" "我们来试试。"
curl -s -X POST "http://127.0.0.1:${REST_PORT}/v1/models/${NAME}:predict" \
  -H 'Content-Type: application/json' -d '{"instances": ["我们来试试。"]}'; echo

step "pictures"
"$KT" plot-attention --run "$RUN" "机器学习很有趣。" -o "$RUN/attention.png"
"$KT" plot-history --run "$RUN" -o "$RUN/history.png"
.venv/bin/python -c "import json,sys; e=json.load(open(sys.argv[1])); print('test split:', e['bleu_text']); print('           ', e['chrf_text'])" "$RUN/evaluation.json"
echo "pictures: $RUN/attention.png $RUN/history.png"
echo "web page: http://127.0.0.1:${REST_PORT}/?model=${NAME} (run: $KT serve --model_name $NAME --model_base_path $BASE/$NAME)"
