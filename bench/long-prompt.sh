#!/usr/bin/env bash
# A long prompt: sluice against llama-server on the same GGUF file, alternating, one server at a
# time. Per server and round: the prompt's time to first token alone, then DECODERS streams
# decoding for WINDOW seconds alone, then beside one more long prompt, then alone again (bench/long_prompt.py).
#
#   MODEL=bench/out/models/qwen2.5-0.5b.q4_k_m.gguf bench/long-prompt.sh
#     WORDS (default 8000: prompt words, about one token each), DECODERS (default 15), ROUNDS
#     (default 1), WINDOW (default 30), CONFIGS (default "sluice llama"; "sluice-bf16" is sluice
#     with a bf16 KV cache), LLAMA_BIN, SLUICE_ARGS,
#     LABEL (a suffix for the labels, e.g. naming SLUICE_ARGS),
#     MMPROJ with IMAGE_SIZE: the long prompt is instead an image of IMAGE_SIZE pixels a side
#     and a short question, both servers given the projector file (what a screenshot does to
#     the streams decoding beside it)
#   Writes bench/out/long-prompt/results.jsonl and prints one JSON line per run. Nothing else
#   should run meanwhile.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${MODEL:?MODEL=path/to/model.gguf}"
OUT="${BENCH_OUT:-$ROOT/bench/out}/long-prompt"
ROUNDS="${ROUNDS:-1}"
WORDS="${WORDS:-8000}"
DECODERS="${DECODERS:-15}"
LLAMA_BIN="${LLAMA_BIN:-$HOME/.cache/sluice-peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin}"
SLUICE="${SLUICE_BIN:-$ROOT/target/release/sluice}"
PORT="${PORT:-8194}"
THREADS="$(nproc)"
STREAMS=$((DECODERS + 1))
CTX=$((WORDS * 5 / 4 + 512))
IMAGE_ARGS=()
if [ -n "${IMAGE_SIZE:-}" ]; then
  : "${MMPROJ:?MMPROJ=path/to/mmproj.gguf with IMAGE_SIZE}"
  CTX=4096
  IMAGE_ARGS=(--image-size "$IMAGE_SIZE")
fi
mkdir -p "$OUT"
NAME="$(basename "$MODEL" .gguf)"
PY="${PYTHON:-python3}"

serve() {
  local config="$1" cmd
  case "$config" in
    sluice | sluice-bf16) cmd=("$SLUICE" serve --model "$MODEL" --served-model-name "$NAME"
      --port "$PORT" --max-num-seqs "$STREAMS" --max-model-len "$CTX" ${SLUICE_ARGS:-})
      if [ "$config" = sluice-bf16 ]; then cmd+=(--kv-cache-dtype bf16); fi
      if [ -n "${MMPROJ:-}" ]; then cmd+=(--mmproj "$MMPROJ"); fi ;;
    llama) cmd=("$LLAMA_BIN/llama-server" -m "$MODEL" --alias "$NAME" --port "$PORT"
      -t "$THREADS" -tb "$THREADS" -np "$STREAMS" -c $((CTX * STREAMS)) --no-webui)
      if [ -n "${MMPROJ:-}" ]; then cmd+=(--mmproj "$MMPROJ"); fi ;;
  esac
  # The previous server must be gone (a draining one still answers).
  for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 || break
    sleep 0.5
  done
  "${cmd[@]}" >"$OUT/$config.log" 2>&1 &
  PID=$!
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || { echo "$config exited" >&2; tail -20 "$OUT/$config.log" >&2; return 1; }
    if curl -sf "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"model\":\"$NAME\",\"prompt\":\"hi\",\"max_tokens\":2}" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  echo "$config did not start" >&2; tail -20 "$OUT/$config.log" >&2; return 1
}

stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $MODEL" >&2
for round in $(seq "$ROUNDS"); do
  for config in ${CONFIGS:-sluice llama}; do
    serve "$config"
    "$PY" "$ROOT/bench/long_prompt.py" --url "http://127.0.0.1:$PORT" --model "$NAME" \
      --label "$config${LABEL:+-$LABEL}-r$round" --prompt-words "$WORDS" --decoders "$DECODERS" \
      --window "${WINDOW:-30}" --decode-tokens "${DECODE_TOKENS:-4000}" "${IMAGE_ARGS[@]}" \
      --stamps "$OUT/$config${LABEL:+-$LABEL}-r$round.stamps.json" --out "$OUT/results.jsonl" || true
    stop
  done
done
