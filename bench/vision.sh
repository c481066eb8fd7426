#!/usr/bin/env bash
# Images in, text out: sluice against llama-server on the same language-model GGUF and mmproj
# files, alternating, one server at a time: time to first token of one image plus a question (one
# client), and images per second with CONCURRENCY clients at once (the same server, CONCURRENCY
# sequences, for both). Every request sends a new
# image (bench/vision_bench.py), so neither server answers from an encoded-image cache.
#
#   MODEL=bench/out/vision/gemma3-4b-vision.q4_k_m.gguf \
#   MMPROJ=bench/out/vision/mmproj-gemma3-4b-vision-f16.gguf bench/vision.sh
#     ROUNDS (default 2), CONCURRENCY (default 8), REQUESTS1 (default 2: requests of the one-client
#     run), REQUESTS (default 1: requests per client of the concurrent run), MAX_TOKENS (default 16),
#     SIZE (default 640: image side in pixels), CONFIGS (default "sluice llama"), LLAMA_BIN,
#     SLUICE_ARGS (more flags for sluice, e.g. "--vision-dtype bf16"), LLAMA_MMPROJ (another
#     projector file for llama-server, e.g. a bf16 one; MMPROJ by default)
#   Writes bench/out/vision/results.jsonl and prints a summary line per run. Nothing else should
#   run meanwhile.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${MODEL:?MODEL=path/to/language-model.gguf}"
MMPROJ="${MMPROJ:?MMPROJ=path/to/mmproj.gguf}"
OUT="${BENCH_OUT:-$ROOT/bench/out}/vision"
ROUNDS="${ROUNDS:-2}"
CONCURRENCY="${CONCURRENCY:-8}"
LLAMA_BIN="${LLAMA_BIN:-$HOME/.cache/sluice-peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin}"
SLUICE="${SLUICE_BIN:-$ROOT/target/release/sluice}"
PORT="${PORT:-8193}"
THREADS="$(nproc)"
CTX=4096
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
NAME="$(basename "$MODEL" .gguf)"
PY="${PYTHON:-python3}"

serve() {
  local config="$1" streams="$2" cmd
  case "$config" in
    # shellcheck disable=SC2206 # SLUICE_ARGS is a list of flags
    sluice) cmd=("$SLUICE" serve --model "$MODEL" --mmproj "$MMPROJ" --served-model-name "$NAME"
      --port "$PORT" --max-num-seqs "$streams" --max-model-len "$CTX" ${SLUICE_ARGS:-}) ;;
    llama) cmd=("$LLAMA_BIN/llama-server" -m "$MODEL" --mmproj "${LLAMA_MMPROJ:-$MMPROJ}" --alias "$NAME"
      --port "$PORT" -t "$THREADS" -tb "$THREADS" -np "$streams" -c $((CTX * streams)) --no-webui) ;;
  esac
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
    echo "port $PORT is taken" >&2; return 1
  fi
  "${cmd[@]}" >"$OUT/$config-$streams.log" 2>&1 &
  PID=$!
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || { echo "$config exited" >&2; tail -20 "$OUT/$config-$streams.log" >&2; return 1; }
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "$config did not start" >&2; tail -20 "$OUT/$config-$streams.log" >&2; return 1
}

stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }

run() {
  local config="$1" clients="$2" requests="$3" seed="$4"
  "$PY" "$ROOT/bench/vision_bench.py" --url "http://127.0.0.1:$PORT" --model "$NAME" \
    --label "$config" --concurrency "$clients" --requests "$requests" --seed "$seed" \
    --max-tokens "${MAX_TOKENS:-16}" --size "${SIZE:-640}" --out "$RESULTS"
}

# One server per configuration and round (CONCURRENCY sequences), warmed by a short text
# request (the weights paged in, the threads started), then one client, then CONCURRENCY.
measure() {
  local config="$1" round="$2"
  serve "$config" "$CONCURRENCY"
  # Until it answers (a server may listen before its model is loaded).
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
      -d "{\"model\": \"$NAME\", \"max_tokens\": 2, \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}" \
      >/dev/null && break
    sleep 2
  done
  run "$config" 1 "${REQUESTS1:-2}" "$round"
  run "$config" "$CONCURRENCY" "${REQUESTS:-1}" "$((round + 100))"
  stop
}

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x$(nproc), $MODEL + $MMPROJ (llama-server: ${LLAMA_MMPROJ:-$MMPROJ}), sluice flags: ${SLUICE_ARGS:-none}" | tee -a "$RESULTS"
for round in $(seq "$ROUNDS"); do
  for config in ${CONFIGS:-sluice llama}; do
    measure "$config" "$round"
  done
done
