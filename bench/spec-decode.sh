#!/usr/bin/env bash
# Speculative decoding, sluice against llama-server on the same GGUF file: output tokens per
# second of an edit-a-file workload (the reply restates a document the prompt holds) and a
# free-text one, at one stream; the free-text one at 16 streams too (sluice plain vs speculating).
#
#   MODEL=bench/out/models/qwen2.5-0.5b.q4_k_m.gguf bench/spec-decode.sh
#     ROUNDS (default 2): each configuration is measured ROUNDS times, in turn (A B C ... A B C)
#     DOC_TOKENS (default 1500), EDIT_TOKENS (default 256), CHAT_TOKENS (default 128),
#     CTX (default 8192: context per sequence on both servers), TEMPERATURE (default 0: greedy;
#       the timed requests are seeded), FIXED_POINT (default 0: edit documents rewritten this many
#       times towards the model's own restatement, for models that do not restate what they see)
#     CONFIGS: which to run (default: every prompt-lookup one below; sluice-draft and
#       llama-draft use the draft model DRAFT=path.gguf, llama.cpp's `-md DRAFT --spec-type
#       draft-simple`)
#     WORKLOADS (default "edit chat"; empty: the 16-stream runs only), STREAMS16 (default 1: the 16-stream chat runs, REQUESTS16
#       requests per stream, default 12: a window of a minute or more)
#     LLAMA_BIN: llama.cpp's bin folder (default: the peers cache)
#   The edit prompts are made once, by the first configuration, and saved beside the results: every
#   server gets the very same text.
#   Writes bench/out/spec-decode/results.jsonl (one line per configuration, workload and round)
#   and prints it. Nothing else should run meanwhile.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${MODEL:?MODEL=path/to/file.gguf}"
OUT="${BENCH_OUT:-$ROOT/bench/out}/spec-decode"
ROUNDS="${ROUNDS:-2}"
DOC_TOKENS="${DOC_TOKENS:-1500}"
EDIT_TOKENS="${EDIT_TOKENS:-256}"
CHAT_TOKENS="${CHAT_TOKENS:-128}"
CTX="${CTX:-8192}"
LLAMA_BIN="${LLAMA_BIN:-$HOME/.cache/sluice-peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin}"
SLUICE="${SLUICE_BIN:-$ROOT/target/release/sluice}"
PORT="${PORT:-8191}"
THREADS="$(nproc)"
CONFIGS="${CONFIGS:-sluice sluice-ngram llama llama-ngram-simple llama-ngram-map-k llama-ngram-mod llama-ngram-cache}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
NAME="$(basename "$MODEL" .gguf)"

serve() {
  local config="$1" streams="$2" cmd
  case "$config" in
    sluice) cmd=("$SLUICE" serve --model "$MODEL" --port "$PORT" --max-num-seqs "$streams"
      --max-model-len "$CTX") ;;
    sluice-ngram) cmd=("$SLUICE" serve --model "$MODEL" --port "$PORT" --max-num-seqs "$streams"
      --max-model-len "$CTX" --speculative ngram) ;;
    sluice-draft) cmd=("$SLUICE" serve --model "$MODEL" --port "$PORT" --max-num-seqs "$streams"
      --max-model-len "$CTX" --speculative "draft:$DRAFT") ;;
    llama-draft) cmd=("$LLAMA_BIN/llama-server" -m "$MODEL" --alias "$NAME" --port "$PORT"
      -t "$THREADS" -tb "$THREADS" -np "$streams" -c $((CTX * streams)) --no-webui
      -md "$DRAFT" --spec-type draft-simple) ;;
    llama) cmd=("$LLAMA_BIN/llama-server" -m "$MODEL" --alias "$NAME" --port "$PORT"
      -t "$THREADS" -tb "$THREADS" -np "$streams" -c $((CTX * streams)) --no-webui) ;;
    llama-*) cmd=("$LLAMA_BIN/llama-server" -m "$MODEL" --alias "$NAME" --port "$PORT"
      -t "$THREADS" -tb "$THREADS" -np "$streams" -c $((CTX * streams)) --no-webui
      --spec-type "${config#llama-}" --spec-draft-n-max 16) ;;
  esac
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
    echo "port $PORT is taken" >&2; return 1
  fi
  "${cmd[@]}" >"$OUT/$config.log" 2>&1 &
  PID=$!
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || { echo "$config exited" >&2; cat "$OUT/$config.log" >&2; return 1; }
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "$config did not start" >&2; cat "$OUT/$config.log" >&2; return 1
}

stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }

measure() {
  local config="$1" workload="$2" streams="$3" tokens="$4" requests="$5"
  serve "$config" "$streams"
  python3 "$ROOT/bench/spec_decode.py" --url "http://127.0.0.1:$PORT" --model "$NAME" \
    --label "$config" --workload "$workload" --streams "$streams" --requests "$requests" \
    --max-tokens "$tokens" --document-tokens "$DOC_TOKENS" --out "$RESULTS" \
    --prompts-file "$OUT/prompts-$NAME-$DOC_TOKENS-${FIXED_POINT:-0}.json" \
    --temperature "${TEMPERATURE:-0}" --fixed-point "${FIXED_POINT:-0}"
  if [[ "$config" == sluice* ]]; then
    curl -s "http://127.0.0.1:$PORT/metrics" | grep -E "^vllm:spec_decode_num_(draft|accepted)_tokens_total" || true
  fi
  stop
}

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x$(nproc), $MODEL" | tee -a "$RESULTS"
for round in $(seq "$ROUNDS"); do
  for config in $CONFIGS; do
    for workload in ${WORKLOADS-edit chat}; do
      tokens=$EDIT_TOKENS; [ "$workload" = chat ] && tokens=$CHAT_TOKENS
      measure "$config" "$workload" 1 "$tokens" 2
    done
  done
  [ "${STREAMS16:-1}" = 1 ] || continue
  for config in sluice sluice-ngram; do
    if [[ " $CONFIGS " == *" $config "* ]]; then measure "$config" chat 16 "$CHAT_TOKENS" "${REQUESTS16:-12}"; fi
  done
done
