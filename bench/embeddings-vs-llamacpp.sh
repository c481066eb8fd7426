#!/usr/bin/env bash
# Embeddings per second, sluice against llama-server `--embedding`, on the same GGUF file: inputs
# of 256 tokens, one input per request (one client) and 64 inputs in one request. Both servers
# pool the last token (sluice: the model has no sentence-transformers files; llama-server:
# `--pooling last`), so they compute the same thing. Writes JSON per server and level to
# bench/out/embeddings/ and prints `sluice bench`'s lines.
#
#   bench/embeddings-vs-llamacpp.sh [GGUF]   (default bench/out/models/qwen3-0.6b-f16.gguf)
#   environment: SLUICE_BIN (default target/release/sluice), LLAMA_BIN_DIR (llama-server's
#                folder; default: the one ../shared/peers/llama-server.sh built),
#                BATCH1_SECS (measured seconds at batch 1, default 30), SLUICE_MODEL (what sluice
#                serves; default the GGUF itself, or the Hugging Face directory it was made from)
#
# Make the model first: bench/python bench/make_random_model.py bench/out/models --models qwen3-0.6b
# and bench/python ../shared/peers/to-gguf.py bench/out/models/qwen3-0.6b \
#   bench/out/models/qwen3-0.6b-f16.gguf --outtype f16
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GGUF="${1:-$ROOT/bench/out/models/qwen3-0.6b-f16.gguf}"
OUT="$ROOT/bench/out/embeddings"
BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
LLAMA="${LLAMA_BIN_DIR:-$(ls -d "$HOME"/.cache/sluice-peers/llama_cpp_python-*/vendor/llama.cpp/build/bin | tail -n 1)}"
mkdir -p "$OUT"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_healthy() {  # port pid log
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$1/health" > /dev/null && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3"; return 1; }
    sleep 0.1
  done
  return 1
}

measure() {  # label port
  local base="http://127.0.0.1:$2/v1"
  "$BIN" bench --base-url "$base" --endpoint embeddings --prompt-tokens 256 \
    --inputs-per-request 1 --concurrency 1 --warmup-secs 5 --duration-secs "${BATCH1_SECS:-30}" \
    --drain-secs 60 --label "$1" --out "$OUT/$1-batch1.json"
  "$BIN" bench --base-url "$base" --endpoint embeddings --prompt-tokens 256 \
    --inputs-per-request 64 --concurrency 1 --warmup-secs 0 --duration-secs 1200 \
    --requests-per-level 1 --drain-secs 1200 --label "$1" --out "$OUT/$1-batch64.json"
}

PORT="$(free_port)"
"$BIN" serve --model "${SLUICE_MODEL:-$GGUF}" --host 127.0.0.1 --port "$PORT" --max-model-len 2048 \
  > "$OUT/sluice.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
wait_healthy "$PORT" "$SERVER" "$OUT/sluice.log"
measure sluice "$PORT"
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true

PORT="$(free_port)"
LD_LIBRARY_PATH="$LLAMA" "$LLAMA/llama-server" -m "$GGUF" --host 127.0.0.1 --port "$PORT" \
  --embedding --pooling last -c 16384 -np 4 -b 2048 -ub 2048 --threads "$(nproc)" \
  > "$OUT/llama-server.log" 2>&1 &
SERVER=$!
wait_healthy "$PORT" "$SERVER" "$OUT/llama-server.log"
measure llama-server "$PORT"
