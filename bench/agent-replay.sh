#!/usr/bin/env bash
# The agent-replay benchmark (issue 27): coding-agent sessions interleaved, then the same sessions
# after a restart, against sluice (default; with the disk tier over a RAM pool too small for the
# sessions) and llama-server (its prompt cache as documented: --cache-ram, --cache-reuse,
# --slot-save-path) on the same GGUF file. Time to first token per turn lands in $OUT/turns.jsonl
# (bench/agent_replay.py); bench/agent_replay_report.py summarizes it.
#   MODEL=bench/out/models/qwen2.5-0.5b.q4_k_m.gguf OUT=bench/out/replay bench/agent-replay.sh
set -euo pipefail
MODEL=${MODEL:?a GGUF file}
OUT=${OUT:-bench/out/replay}
SESSIONS=${SESSIONS:-3} TURNS=${TURNS:-8} SYSTEM_TOKENS=${SYSTEM_TOKENS:-6000}
TURN_TOKENS=${TURN_TOKENS:-1700} TPW=${TPW:-1.2} SMALL_POOL=${SMALL_POOL:-0.3} TOOLS=${TOOLS:-24}
PHASES=${PHASES:-"sluice disk llama cold"}
SLUICE=${SLUICE_BIN:-target/release/sluice}
LLAMA=${LLAMA_BIN:-$(../shared/peers/llama-server.sh)/llama-server}
PORT=${PORT:-18500}
mkdir -p "$OUT"
REPLAY=(python3 bench/agent_replay.py --url "http://127.0.0.1:$PORT" --model m --sessions "$SESSIONS"
        --turns "$TURNS" --system-tokens "$SYSTEM_TOKENS" --turn-tokens "$TURN_TOKENS"
        --tokens-per-word "$TPW" --tools "$TOOLS" --out "$OUT/turns.jsonl")
PID=
wait_up() { for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return; sleep 0.5; done; echo "server did not start" >&2; exit 1; }
stop() { [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null || true; PID=; }
trap stop EXIT
sluice() { "$SLUICE" serve --model "$MODEL" --served-model-name m --port "$PORT" "$@" >>"$OUT/sluice.log" 2>&1 & PID=$!; wait_up; }
llama() { "$LLAMA" -m "$MODEL" --alias m --port "$PORT" -c 32768 -np 1 -t "$(nproc)" --cache-ram 8192 \
          --cache-reuse 256 --slot-save-path "$OUT/llama-slots" >>"$OUT/llama.log" 2>&1 & PID=$!; wait_up; }
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | $(nproc) cores | $(date -u +%FT%TZ) | $MODEL" >> "$OUT/turns.jsonl.meta"
for phase in $PHASES; do
  case $phase in
    sluice)
      sluice; "${REPLAY[@]}" --label "sluice default"; stop
      sluice; "${REPLAY[@]}" --label "sluice default, after restart"; stop ;;
    disk)
      rm -rf "$OUT/kv-disk"
      sluice --kv-cache-memory "$SMALL_POOL" --kv-disk-cache "$OUT/kv-disk"; "${REPLAY[@]}" --label "sluice disk tier"
      curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^(sluice:kv_disk|sluice:prefix_cache|vllm:prefix_cache)' > "$OUT/metrics-disk-1.txt"; stop
      sluice --kv-cache-memory "$SMALL_POOL" --kv-disk-cache "$OUT/kv-disk"; "${REPLAY[@]}" --label "sluice disk tier, after restart"
      curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^(sluice:kv_disk|sluice:prefix_cache|vllm:prefix_cache|sluice:engine_step)' > "$OUT/metrics-disk-2.txt"; stop ;;
    llama)
      mkdir -p "$OUT/llama-slots"
      llama; "${REPLAY[@]}" --label "llama-server"; stop
      llama; "${REPLAY[@]}" --label "llama-server, after restart"; stop ;;
    cold)
      sluice; "${REPLAY[@]}" --label "sluice cold probe" --cold-probe; stop ;;
  esac
done
