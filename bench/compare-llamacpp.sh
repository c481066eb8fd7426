#!/usr/bin/env bash
# Serves the very same GGUF file from sluice and from llama.cpp's llama-server in turn and measures
# both with the very same `sluice bench` sweep; writes a side-by-side markdown table (ratios are
# sluice / llama-server, the median over rounds) and an SVG chart per model and weight type into
# bench/out/, and prints the markdown.
#
#   bench/compare-llamacpp.sh [options]
#     --models LIST          comma-separated (default smollm2-135m,qwen2.5-0.5b; also qwen3-0.6b
#                            and llama3.1-8b, a Llama-3.1-8B-shaped GGUF written by
#                            bench/make_large_gguf.py: ~15 GiB f16 on disk)
#     --concurrency LIST     levels to sweep (default 1,4,16,64)
#     --prompt-tokens N      (default 128)        --output-tokens N   (default 128)
#     --warmup-secs S        per level (default 10)
#     --duration-secs S      measured per level (default 30)
#     --drain-secs S         wait for in-flight requests after each level (default 15)
#     --ctx-per-seq N        context per sequence on both servers (default 512)
#     --weights LIST         GGUF types to serve, comma-separated: f16 and any llama-quantize
#                            preset (q8_0, q4_k_m, q4_0, ...); default f16
#     --rounds N             measure each server N times, alternating A/B/A/B (default 1); the
#                            report quotes the median ratio per level
#     --only sluice|llama-server   measure one server only (the other's JSON is reused if present)
#     --skip-llama-bench     do not run llama-bench
#   environment: BENCH_OUT (default bench/out), SLUICE_BIN (use this sluice binary, no build),
#                SLUICE_PORT / LLAMA_PORT (default 8171 / 8172), SLUICE_PEERS_DIR
#
# Steps: build llama-server (../shared/peers/llama-server.sh, cached), make the random-weight
# models (bench/make_random_model.py), convert each to GGUF f16 (../shared/peers/to-gguf.py) and
# quantize it (llama-quantize), build sluice in release, run `llama-bench -p 512 -n 128` per file,
# then per model and weight type, per round: start one server on loopback with the .gguf file,
# wait for /health, run the sweep, stop it, start the other. With the defaults the whole script
# takes about 20 minutes on 2 cores once llama.cpp is built. Nothing else should be running:
# foreign CPU load moves these numbers more than anything measured here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${BENCH_OUT:-$ROOT/bench/out}"
PEERS="${SLUICE_PEERS_DIR:-$ROOT/../shared/peers}"
MODELS="smollm2-135m,qwen2.5-0.5b"
CONCURRENCY="1,4,16,64"
PROMPT_TOKENS=128
OUTPUT_TOKENS=128
WARMUP=10
DURATION=30
DRAIN=15
CTX_PER_SEQ=512
WEIGHTS="f16"
ROUNDS=1
ONLY=""
LLAMA_BENCH=1
SLUICE_PORT="${SLUICE_PORT:-8171}"
LLAMA_PORT="${LLAMA_PORT:-8172}"
THREADS="$(nproc)"

while [ $# -gt 0 ]; do
  case "$1" in
    --models) MODELS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --prompt-tokens) PROMPT_TOKENS="$2"; shift 2 ;;
    --output-tokens) OUTPUT_TOKENS="$2"; shift 2 ;;
    --warmup-secs) WARMUP="$2"; shift 2 ;;
    --duration-secs) DURATION="$2"; shift 2 ;;
    --drain-secs) DRAIN="$2"; shift 2 ;;
    --ctx-per-seq) CTX_PER_SEQ="$2"; shift 2 ;;
    --weights) WEIGHTS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --skip-llama-bench) LLAMA_BENCH=0; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$ONLY" in ""|sluice|llama-server) ;; *) echo "--only takes sluice or llama-server" >&2; exit 2 ;; esac

MAX_CONCURRENCY="$(tr ',' '\n' <<<"$CONCURRENCY" | sort -n | tail -1)"
LOGS="$OUT/logs"
mkdir -p "$OUT/models" "$LOGS"
log() { echo "[compare $(date +%H:%M:%S)] $*" >&2; }

SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_server EXIT INT TERM

# wait_healthy PORT LOGFILE: polls /health until it answers 200, the server dies, or 10 minutes pass.
wait_healthy() {
  local port="$1" logfile="$2"
  for _ in $(seq 1200); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      log "server exited during start-up; last lines of $logfile:"; tail -20 "$logfile" >&2; return 1
    fi
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then
      return 0
    fi
    sleep 0.5
  done
  log "server on port $port not healthy after 10 minutes"; return 1
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# 1. llama.cpp
if [ "$ONLY" != sluice ]; then
  log "building llama-server (cached after the first time)"
  LLAMA_BIN="$("$PEERS/llama-server.sh")"
  log "llama.cpp binaries: $LLAMA_BIN"
fi

# 2. sluice, release (SLUICE_BIN=path skips the build and uses that binary)
if [ -n "${SLUICE_BIN:-}" ]; then
  SLUICE="$SLUICE_BIN"
else
  SLUICE="${CARGO_TARGET_DIR:-$ROOT/target}/release/sluice"
  log "building sluice --release"
  (cd "$ROOT" && cargo build --release --bin sluice >&2)
fi

# A kernel whose intrinsics stayed out-of-line calls costs whole percents of these figures.
"$ROOT/scripts/check-intrinsics" "$SLUICE" >&2 || log "WARNING: $SLUICE calls SIMD intrinsics out of line (above); its figures are not representative"

# 3. models and their GGUF files, one per weight type
for model in ${MODELS//,/ }; do
  dir="$OUT/models/$model"
  # Every file asked for is there (the f16 source may have been deleted to save disk).
  missing=0
  for w in ${WEIGHTS//,/ }; do [ -f "$dir.$w.gguf" ] || missing=1; done
  [ "$missing" = 0 ] && continue
  if [ "$model" = llama3.1-8b ] && [ ! -f "$dir.f16.gguf" ]; then
    # Too large for a safetensors round trip: written as GGUF f16 directly, tensor by tensor.
    log "making random-weight $model (GGUF f16, ~15 GiB)"
    "$ROOT/bench/python" "$ROOT/bench/make_large_gguf.py" "$dir.f16.gguf.tmp" >"$LOGS/make-$model.log" 2>&1
    mv "$dir.f16.gguf.tmp" "$dir.f16.gguf"
  fi
  if [ ! -f "$dir.f16.gguf" ] && [ ! -f "$dir/model.safetensors" ]; then
    log "making random-weight $model"
    "$ROOT/bench/python" "$ROOT/bench/make_random_model.py" "$OUT/models" --models "$model" >/dev/null
  fi
  if [ ! -f "$dir.f16.gguf" ]; then
    log "converting $model to GGUF f16"
    "$ROOT/bench/python" "$PEERS/to-gguf.py" "$dir" "$dir.f16.gguf.tmp" --outtype f16 >"$LOGS/to-gguf-$model.log" 2>&1
    mv "$dir.f16.gguf.tmp" "$dir.f16.gguf"
  fi
  for w in ${WEIGHTS//,/ }; do
    if [ ! -f "$dir.$w.gguf" ]; then
      log "quantizing $model to $w"
      LLAMA_BIN="${LLAMA_BIN:-$("$PEERS/llama-server.sh")}"
      "$LLAMA_BIN/llama-quantize" "$dir.f16.gguf" "$dir.$w.gguf.tmp" "${w^^}" \
        >"$LOGS/quantize-$model-$w.log" 2>&1
      mv "$dir.$w.gguf.tmp" "$dir.$w.gguf"
    fi
  done
done

# 4. llama-bench: the peer's own view of prefill and decode speed on these files
if [ "$ONLY" != sluice ] && [ "$LLAMA_BENCH" = 1 ]; then
  for model in ${MODELS//,/ }; do
    for w in ${WEIGHTS//,/ }; do
      log "llama-bench $model $w -p 512 -n 128"
      "$LLAMA_BIN/llama-bench" -m "$OUT/models/$model.$w.gguf" -p 512 -n 128 -t "$THREADS" -r 3 \
        -o md >"$OUT/llama-bench-$model-$w.md" 2>"$LOGS/llama-bench-$model-$w.log"
      cat "$OUT/llama-bench-$model-$w.md" >&2
    done
  done
fi

# run_sweep LABEL PORT MODEL DIR: the same workload against whichever server listens on PORT.
run_sweep() {
  local label="$1" port="$2" model="$3" dir="$4"
  "$SLUICE" bench --base-url "http://127.0.0.1:$port/v1" --model "$model" --label "$label" \
    --prompt-tokens "$PROMPT_TOKENS" --output-tokens "$OUTPUT_TOKENS" \
    --concurrency "$CONCURRENCY" --warmup-secs "$WARMUP" --duration-secs "$DURATION" \
    --drain-secs "$DRAIN" --out "$dir/$label.json" --svg "$dir/$label.svg" \
    2> >(tee "$LOGS/bench-$label-$model.log" >&2)
}

# serve_sluice MODEL GGUF
serve_sluice() {
  local model="$1" gguf="$2"
  port_free "$SLUICE_PORT" || { log "port $SLUICE_PORT is taken"; return 1; }
  log "sluice serve $gguf on :$SLUICE_PORT"
  "$SLUICE" serve --model "$gguf" --served-model-name "$model" \
    --host 127.0.0.1 --port "$SLUICE_PORT" --max-num-seqs "$MAX_CONCURRENCY" \
    --max-model-len "$CTX_PER_SEQ" >"$LOGS/sluice-$model.log" 2>&1 &
  SERVER_PID=$!
  wait_healthy "$SLUICE_PORT" "$LOGS/sluice-$model.log"
}

# serve_llama MODEL GGUF
serve_llama() {
  local model="$1" gguf="$2"
  port_free "$LLAMA_PORT" || { log "port $LLAMA_PORT is taken"; return 1; }
  log "llama-server $gguf on :$LLAMA_PORT (-np $MAX_CONCURRENCY -c $((MAX_CONCURRENCY * CTX_PER_SEQ)))"
  "$LLAMA_BIN/llama-server" -m "$gguf" --alias "$model" \
    --host 127.0.0.1 --port "$LLAMA_PORT" -t "$THREADS" -tb "$THREADS" \
    -np "$MAX_CONCURRENCY" -c "$((MAX_CONCURRENCY * CTX_PER_SEQ))" --no-webui \
    >"$LOGS/llama-server-$model.log" 2>&1 &
  SERVER_PID=$!
  wait_healthy "$LLAMA_PORT" "$LOGS/llama-server-$model.log"
}

# 5. the sweeps, one server at a time, A/B/A/B: each round alternates which server goes first,
# so that neither always runs on a machine warmed (or throttled) by the other.
index=0
for model in ${MODELS//,/ }; do
  for w in ${WEIGHTS//,/ }; do
    dir="$OUT/$model/$w"
    mkdir -p "$dir"
    for round in $(seq "$ROUNDS"); do
      if [ $((index % 2)) = 0 ]; then order="sluice llama-server"; else order="llama-server sluice"; fi
      for server in $order; do
        [ -n "$ONLY" ] && [ "$ONLY" != "$server" ] && continue
        if [ "$server" = sluice ]; then
          serve_sluice "$model" "$OUT/models/$model.$w.gguf"
          run_sweep "sluice-r$round" "$SLUICE_PORT" "$model" "$dir"
        else
          serve_llama "$model" "$OUT/models/$model.$w.gguf"
          run_sweep "llama-server-r$round" "$LLAMA_PORT" "$model" "$dir"
        fi
        # Peak resident memory of the server process over its whole life (load included).
        echo "$server-r$round $(awk '/VmHWM/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null)" \
          >>"$dir/peak-rss-kib.txt"
        stop_server
      done
      index=$((index + 1))
    done
  done
done

# 6. the side-by-side report
REPORT="$OUT/comparison.md"
{
  echo "## sluice vs llama-server, the same GGUF files"
  echo
  echo "Measured $(date -u +'%Y-%m-%d %H:%M UTC') on $(nproc) CPU cores" \
       "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), sluice" \
       "$(cd "$ROOT" && git rev-parse --short HEAD), llama.cpp from llama-cpp-python 0.3.36." \
       "Random weights with the real shapes; prompt $PROMPT_TOKENS tokens, output $OUTPUT_TOKENS" \
       "tokens (ignore_eos), closed-loop clients, ${WARMUP}s warm-up + ${DURATION}s measured per level," \
       "$ROUNDS round(s) per server alternating." \
       "llama-server: \`-np $MAX_CONCURRENCY -c $((MAX_CONCURRENCY * CTX_PER_SEQ))\` ($CTX_PER_SEQ per slot);" \
       "sluice: \`--max-num-seqs $MAX_CONCURRENCY --max-model-len $CTX_PER_SEQ\`. Ratios are sluice / llama-server."
  for model in ${MODELS//,/ }; do
    for w in ${WEIGHTS//,/ }; do
      dir="$OUT/$model/$w"
      echo
      echo "### $model, $w"
      echo
      python3 "$ROOT/bench/median_ratios.py" "$dir"
      last="$(ls "$dir"/sluice-r*.json 2>/dev/null | sort -V | tail -1)"
      peer="$(ls "$dir"/llama-server-r*.json 2>/dev/null | sort -V | tail -1)"
      if [ -n "$last" ] && [ -n "$peer" ]; then
        "$SLUICE" bench --merge "$last" "$peer" --svg "$dir/comparison.svg" \
          --title "$model ($w, random weights): sluice vs llama-server" >/dev/null
        echo
        echo "![$model $w chart]($model/$w/comparison.svg)"
      fi
      if [ -f "$dir/peak-rss-kib.txt" ]; then
        echo
        echo "Peak RSS (VmHWM, MiB): $(awk '{printf "%s%s %.0f", (NR > 1 ? ", " : ""), $1, $2 / 1024}' "$dir/peak-rss-kib.txt")"
      fi
      if [ -f "$OUT/llama-bench-$model-$w.md" ]; then
        echo
        echo "llama-bench \`-p 512 -n 128 -t $THREADS\`:"
        echo
        cat "$OUT/llama-bench-$model-$w.md"
      fi
    done
  done
} >"$REPORT"
log "wrote $REPORT and the charts under $OUT/"
cat "$REPORT"
