#!/usr/bin/env bash
# Fine-tuning, worked through: the demo's translator adapted to one domain (questions),
# and what that does to the domain and to the general test split.
#
#   bash scripts/finetune.sh                  # after `make demo` (RUN=runs/zh-en)
#   RUN=runs/zh-en STEPS=300 bash scripts/finetune.sh
#
# The in-domain data comes from the run's own held-out splits, so nothing the base model
# trained on is reused and nothing it is tested on is trained on:
#   fine-tuning data:  the question pairs (English ends with "?") of the validation split;
#   in-domain test:    the question pairs of the test split;
#   general test:      the whole test split.
# The base model never trained on its validation split (it only measured the loss there).
# `--split-seed 1`: the split hashes each pair with its seed, so the base run's seed would
# put all of these pairs (its validation pairs) into validation again.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN="${RUN:-runs/zh-en}"
TUNED="${TUNED:-${RUN}-questions}"
STEPS="${STEPS:-60}"
KT="${KT:-.venv/bin/keras-transformer}"
WORK="${TUNED}.data"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

step() { printf '\n== %s\n' "$*"; }

mkdir -p "$WORK"
# source<TAB>target lines whose target is a question.
awk -F'\t' '$2 ~ /\?$/' "$RUN/splits/validation.tsv" > "$WORK/train-questions.tsv"
awk -F'\t' '$2 ~ /\?$/' "$RUN/splits/test.tsv" > "$WORK/test-questions.tsv"
echo "fine-tuning pairs: $(wc -l < "$WORK/train-questions.tsv"); in-domain test pairs: $(wc -l < "$WORK/test-questions.tsv")"

step "fine-tune ${RUN} on the validation split's questions for ${STEPS} steps into ${TUNED}"
"$KT" train --run "$TUNED" --init-from "$RUN" --data "$WORK/train-questions.tsv" \
  --src-column 0 --tgt-column 1 --dictionary none --max-steps "$STEPS" \
  --split-seed 1 \
  --batch-tokens 2048 --warmup-steps 20 --lr-scale 0.05 --patience 3 --verbose 2

# The tuned run's own validation split is a few of these pairs: its best weights (the
# lowest validation loss) are the ones before it overfits 200 sentences.
for model in "$RUN" "$TUNED"; do
  weights=()
  [ "$model" = "$TUNED" ] && weights=(--weights best)
  step "evaluate ${model}: in-domain (questions of the test split), then the whole test split"
  "$KT" evaluate --run "$model" "${weights[@]}" --data "$WORK/test-questions.tsv" --beam 4 \
    --show 0 --output "$WORK/$(basename "$model").questions.txt"
  "$KT" evaluate --run "$model" "${weights[@]}" --data "$RUN/splits/test.tsv" --beam 4 \
    --show 0 --output "$WORK/$(basename "$model").test.txt"
done
