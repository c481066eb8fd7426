#!/usr/bin/env bash
# The replica-set benchmark (issue 28): for each router policy, a fresh replica set (cold caches)
# from bench/replicas.sh and the multi-turn sessions of bench/router_bench.py through it; then a
# run with a rolling restart of one replica under load; then a markdown table of them all
# ($OUT/report.md, to paste into BENCHMARKS.md).
#
#   bench/router-bench.sh                       # the full run (about 20-30 min on 2 cores)
#   SESSIONS=3 TURNS=3 DOC_TOKENS=300 POLICIES="cache_aware round_robin" bench/router-bench.sh  # a smoke run
#
# Environment (defaults in brackets), besides bench/replicas.sh's (N, MODEL, THREADS, ...):
#   POLICIES ["cache_aware round_robin consistent_hash power_of_two", plus kv_aware where
#     `sluice serve --help` has --kv-events]
#   RESTART_POLICY [cache_aware]: the policy of the rolling-restart run ("" skips it)
#   KV_CACHE_GIB [0.16]: each replica's KV pool. 0.16 GiB holds about 14K tokens of the default
#     Qwen2.5-0.5B-shaped model (12 KiB a token): a replica's share of the sessions' final prompts
#     (8 x ~2.75K / 2 replicas) with 25% headroom, i.e. the replicas hold every session between
#     them and one replica holds about 64% of them. `auto` sizes the pool for 4 full contexts
#     (every session fits on every replica; then only a session's first visit to each replica
#     misses, whatever the policy). Scale it with SESSIONS, DOC_TOKENS and N
#   SESSIONS [8] TURNS [6] DOC_TOKENS [2000] USER_TOKENS [80] MAX_TOKENS [32] THINK [0]
#   KV_INDEX [auto: on where `sluice serve --help` has --kv-events; 0 off]: every run also runs
#     bench/kv_index.py (router_bench.py --kv-index, under $VENV/bin/python with pyzmq and
#     msgspec, installed here): an index of which replica holds which prefix from the KV events
#     alone, checked after the load against each replica's own cached_tokens (report columns
#     "KV index: ..." and the lines below the table)
#   kv_aware is skipped, with a message, where the replicas have no
#     POST /v1/chat/completions/render (bench/replicas.sh exits 78 then)
#   OUT [bench/out/router]
set -euo pipefail
cd "$(dirname "$0")/.."
POLICIES_SET=${POLICIES:-}
POLICIES=${POLICIES:-"cache_aware round_robin consistent_hash power_of_two"}
RESTART_POLICY=${RESTART_POLICY-cache_aware}
export KV_CACHE_GIB=${KV_CACHE_GIB:-0.16}
OUT=${OUT:-bench/out/router}
WORKLOAD=(--sessions "${SESSIONS:-8}" --turns "${TURNS:-6}" --doc-tokens "${DOC_TOKENS:-2000}"
          --user-tokens "${USER_TOKENS:-80}" --max-tokens "${MAX_TOKENS:-32}" --think "${THINK:-0}")
# kv_aware routes on the replicas' KV events (ZMQ), where sluice publishes them.
SLUICE=${SLUICE_BIN:-target/release/sluice}; [ -x "$SLUICE" ] || SLUICE=/work/main/target/release/sluice
if [ -z "${POLICIES_SET:-}" ] && "$SLUICE" serve --help 2>/dev/null | grep -q -- '--kv-events'; then
  POLICIES="$POLICIES kv_aware"
fi
PY=(python3 bench/router_bench.py)
KV_INDEX=${KV_INDEX:-auto}
if [ "$KV_INDEX" != 0 ] && "$SLUICE" serve --help 2>/dev/null | grep -q -- '--kv-events'; then
  VENV=${VENV:-bench/out/venv}
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -c 'import zmq, msgspec' 2>/dev/null || "$VENV/bin/pip" install -q pyzmq msgspec
  PY=("$VENV/bin/python" bench/router_bench.py --kv-index)
fi
mkdir -p "$OUT"
runs=()
for policy in $POLICIES; do
  rc=0
  RUN_DIR="$OUT/$policy" POLICY=$policy bench/replicas.sh -- \
    "${PY[@]}" --label "$policy" "${WORKLOAD[@]}" --out "$OUT/$policy.json" || rc=$?
  if [ $rc = 78 ] && [ "$policy" = kv_aware ]; then
    echo "skipping kv_aware: the replicas cannot serve it (see the message above)" >&2
    continue
  fi
  [ $rc = 0 ] || exit $rc
  runs+=("$OUT/$policy.json")
done
if [ -n "$RESTART_POLICY" ]; then
  label="$RESTART_POLICY+restart"
  RUN_DIR="$OUT/$label" POLICY=$RESTART_POLICY bench/replicas.sh -- \
    "${PY[@]}" --label "$label" "${WORKLOAD[@]}" --restart-replica 1 --restart-at 0.3 \
      --out "$OUT/$label.json"
  runs+=("$OUT/$label.json")
fi
{
  python3 bench/router_bench.py --report "${runs[@]}"
  echo
  echo "    wrapper: $(env | grep -E '^(N|MODEL|THREADS|KV_CACHE_GIB|KV_INDEX|POLICIES|RESTART_POLICY|SESSIONS|TURNS|DOC_TOKENS|USER_TOKENS|MAX_TOKENS|THINK)=' | sort | tr '\n' ' ')bench/router-bench.sh"
} | tee "$OUT/report.md"
