#!/usr/bin/env bash
# Runs lm-evaluation-harness (`lm_eval`, PyPI) against a real `sluice serve` of the bundled model
# through `local-completions`, end to end: a loglikelihood task (multiple choice) and a perplexity
# task (loglikelihood_rolling), both on local JSON data in bench/lm-eval/tasks (the standard tasks
# download their data sets from the Hugging Face hub). Then recomputes the perplexity from
# sluice's own prompt logprobs (`/v1/completions` with echo + logprobs + max_tokens 0) and fails
# unless the two agree.
#
#   bench/lm-eval/run.sh
#   environment: SLUICE_BIN (default: target/debug/sluice, built if missing),
#                LM_EVAL_VENV (default bench/out/lm-eval-venv), BENCH_OUT (default bench/out)
#
# Cost: `pip install "lm_eval[api]==0.4.13" transformers` (no torch: the API models do not need it)
# takes ~2 minutes and ~0.9 GB once; the evaluation itself takes seconds. Not part of
# ./scripts/test for that reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${BENCH_OUT:-$ROOT/bench/out}"
VENV="${LM_EVAL_VENV:-$OUT/lm-eval-venv}"
TASKS="$ROOT/bench/lm-eval/tasks"
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/lm_eval" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "lm_eval[api]==0.4.13" transformers
fi
BIN="${SLUICE_BIN:-$ROOT/target/debug/sluice}"
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --locked --bin sluice)

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$BIN" serve --host 127.0.0.1 --port "$PORT" > "$OUT/lm-eval-server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$OUT/lm-eval-server.log"; exit 1; }
  sleep 0.1
done
MODEL="$(curl -sf "http://127.0.0.1:$PORT/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')"

cd "$TASKS"  # the task files name their data files relative to here
HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 "$VENV/bin/lm_eval" \
  --model local-completions \
  --model_args "model=$MODEL,base_url=http://127.0.0.1:$PORT/v1/completions,tokenizer_backend=huggingface,tokenizer=$ROOT/models/sluice-kjv-mini,tokenized_requests=True,max_length=512,num_concurrent=4" \
  --include_path "$TASKS" \
  --tasks sluice_kjv_choice,sluice_kjv_perplexity \
  --output_path "$OUT/lm-eval" \
  --log_samples

RESULTS="$(ls -t "$OUT"/lm-eval/*/results_*.json | head -n 1)"
"$VENV/bin/python" "$ROOT/bench/lm-eval/own_perplexity.py" \
  --base-url "http://127.0.0.1:$PORT" --model "$MODEL" \
  --tokenizer "$ROOT/models/sluice-kjv-mini" \
  --data "$TASKS/kjv_perplexity.jsonl" --lm-eval-results "$RESULTS"
