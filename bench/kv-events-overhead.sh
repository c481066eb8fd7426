#!/usr/bin/env bash
# Does publishing KV events slow serving? Serves one GGUF file with and without `--kv-events`
# (then with a subscriber that reads every batch and one that never reads), alternating, and
# measures each with the same `sluice bench` level: output tokens/s, TTFT, and the mean engine
# step time from /metrics. Reports the events the reading subscriber got, its sequence gaps and
# the server's dropped-events counter.
#
#   bench/kv-events-overhead.sh [--model FILE] [--rounds N] [--concurrency C]
#                               [--prompt-tokens N] [--output-tokens N] [--duration-secs S]
#   defaults: bench/out/models/qwen2.5-0.5b.q4_k_m.gguf, 2 rounds, 16 streams, 512-token
#   prompts (distinct per request: every one is new to the prefix cache, so every prompt's
#   blocks are stored and, with a small pool, evicted: the most events a workload makes),
#   64 output tokens, 90 s windows. Nothing else should be running.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${BENCH_OUT:-$ROOT/bench/out}/kv-events"
BIN="${SLUICE_BIN:-$ROOT/target/release/sluice}"
MODEL="$ROOT/bench/out/models/qwen2.5-0.5b.q4_k_m.gguf"
ROUNDS=2
CONC=16
PROMPT=512
OUTPUT=64
DURATION=90
PORT="${SLUICE_PORT:-8181}"
ZPORT=$((PORT + 1))
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --concurrency) CONC="$2"; shift 2 ;;
    --prompt-tokens) PROMPT="$2"; shift 2 ;;
    --output-tokens) OUTPUT="$2"; shift 2 ;;
    --duration-secs) DURATION="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || { python3 -m venv "$ROOT/.venv"; PY="$ROOT/.venv/bin/python"; }
"$PY" -c 'import zmq, msgspec' 2>/dev/null || "$PY" -m pip install --quiet pyzmq msgspec

metric() { # name -> sum over its samples
  curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v n="$1" '$1 ~ "^"n"({|$)" {s += $2} END {print s+0}'
}

run() { # label, extra serve args...
  local label="$1"; shift
  "$BIN" serve --model "$MODEL" --port "$PORT" --max-num-seqs "$CONC" "$@" \
    >"$OUT/$label.serve.log" 2>&1 &
  local server=$!
  for _ in $(seq 600); do curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.5; done
  local subs=()
  if [[ "$label" == events* ]]; then
    "$PY" "$ROOT/bench/kv_events_sub.py" "tcp://127.0.0.1:$ZPORT" >"$OUT/$label.sub.json" &
    subs+=($!)
    "$PY" "$ROOT/bench/kv_events_sub.py" "tcp://127.0.0.1:$ZPORT" --idle >/dev/null &
    subs+=($!)
    sleep 1
  fi
  local steps0 secs0
  steps0=$(metric sluice:engine_steps_total); secs0=$(metric sluice:engine_step_seconds_total)
  "$BIN" bench --base-url "http://127.0.0.1:$PORT/v1" --concurrency "$CONC" \
    --prompt-tokens "$PROMPT" --output-tokens "$OUTPUT" --warmup-secs 10 \
    --duration-secs "$DURATION" --drain-secs 60 --label "$label" --out "$OUT/$label.json" \
    >"$OUT/$label.bench.log" 2>&1
  local steps1 secs1
  steps1=$(metric sluice:engine_steps_total); secs1=$(metric sluice:engine_step_seconds_total)
  local dropped; dropped=$(metric sluice:kv_events_dropped_total)
  local queued; queued=$(metric sluice:kv_events_total)
  for s in "${subs[@]}"; do kill -TERM "$s" 2>/dev/null || true; done
  for s in "${subs[@]}"; do wait "$s" 2>/dev/null || true; done
  kill -TERM "$server"; wait "$server" 2>/dev/null || true
  "$PY" - "$OUT/$label.json" "$label" "$steps0" "$steps1" "$secs0" "$secs1" "$queued" "$dropped" \
    "$OUT/$label.sub.json" <<'PY' | tee -a "$OUT/rows.md"
import json, os, sys
path, label, s0, s1, t0, t1, queued, dropped, sub = sys.argv[1:]
level = json.load(open(path))["levels"][0]
steps, secs = float(s1) - float(s0), float(t1) - float(t0)
got = json.load(open(sub)) if os.path.exists(sub) and os.path.getsize(sub) else {}
events = f"{got.get('events', 0)} events, {got.get('stored_blocks', 0)} stored / {got.get('removed_blocks', 0)} removed blocks, {got.get('gaps', 0)} gaps; server queued {int(float(queued))}, dropped {int(float(dropped))}" if got else "-"
print(f"| {label} | {level['output_tokens_per_s']:.1f} | {level['ttft_ms']['p50'] / 1000:.2f} | {1000 * secs / max(steps, 1):.1f} | {events} |")
PY
}

echo "| run | output tok/s | TTFT p50 s | mean step ms | KV events |" >"$OUT/rows.md"
echo "|---|---:|---:|---:|---|" >>"$OUT/rows.md"
for r in $(seq "$ROUNDS"); do
  run "plain-$r" --kv-cache-memory 0.25
  run "events-$r" --kv-cache-memory 0.25 --kv-events "tcp://127.0.0.1:$ZPORT"
done
echo
grep -m1 "model name" /proc/cpuinfo
cat "$OUT/rows.md"
