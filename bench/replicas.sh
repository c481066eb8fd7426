#!/usr/bin/env bash
# A replica set on one machine (issue 28): N sluice replicas on loopback ports behind vllm-router
# (PyPI `vllm-router`, the Rust router of vLLM's production stack). Waits until every replica and
# the router answer, then either runs a command (`-- CMD ...`, with ROUTER_URL, REPLICAS (space-separated) and
# RUN_DIR exported) and tears everything down, or waits for Ctrl-C. Logs, pids and each replica's
# command line (for a rolling restart, see bench/router_bench.py --restart-replica) go to $RUN_DIR.
#
#   bench/replicas.sh                                  # 2 replicas + router (cache_aware) until Ctrl-C
#   POLICY=round_robin N=2 bench/replicas.sh -- python3 bench/router_bench.py --label round_robin
#
# Environment (defaults in brackets):
#   N [2] replicas; MODEL [/work/main/bench/out/models/qwen2.5-0.5b.q4_k_m.gguf]
#   SLUICE_BIN [target/release/sluice, else /work/main/target/release/sluice]
#   POLICY [cache_aware]: random round_robin cache_aware kv_aware power_of_two consistent_hash ...
#   THREADS [nproc / N, at least 1]: RAYON_NUM_THREADS of each replica (they share the CPU)
#   KV_CACHE_GIB [auto]: --kv-cache-memory of each replica; MAX_MODEL_LEN [8192]
#   BASE_PORT [18100]: replica i listens on BASE_PORT+i; ROUTER_PORT [18000]
#   RUN_DIR [bench/out/replicas]; ROUTER_BIN [bench/out/venv/bin/vllm-router, created if missing]
#   SLUICE_ARGS, ROUTER_ARGS: extra arguments for each replica / the router
#   DRAIN_TIMEOUT [300]: --drain-timeout of each replica, where sluice has the flag
#   KV_EVENTS [auto]: give each replica `--kv-events tcp://127.0.0.1:(BASE_PORT+100+i)` and the
#     router --kv-event-source for it (needed by POLICY=kv_aware) when `sluice serve --help` has
#     the flag; 0 turns it off. With it, `--kv-events-replay tcp://127.0.0.1:(BASE_PORT+200+i)`
#     where sluice has that flag, and KV_EVENTS_ENDPOINTS / KV_REPLAY_ENDPOINTS (space-separated,
#     in the order of REPLICAS) exported to the command (bench/kv_index.py subscribes to them).
#     POLICY=kv_aware also needs `POST /v1/chat/completions/render` on the replicas (the router
#     renders a chat request to token ids with it): where it answers 404 the script stops with
#     exit status 78 before starting the router
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2}
MODEL=${MODEL:-/work/main/bench/out/models/qwen2.5-0.5b.q4_k_m.gguf}
if [ -z "${SLUICE_BIN:-}" ]; then
  SLUICE_BIN=target/release/sluice
  [ -x "$SLUICE_BIN" ] || SLUICE_BIN=/work/main/target/release/sluice
fi
POLICY=${POLICY:-cache_aware}
THREADS=${THREADS:-$(( $(nproc) / N > 0 ? $(nproc) / N : 1 ))}
KV_CACHE_GIB=${KV_CACHE_GIB:-auto}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-8192}
BASE_PORT=${BASE_PORT:-18100}
ROUTER_PORT=${ROUTER_PORT:-18000}
RUN_DIR=${RUN_DIR:-bench/out/replicas}
VENV=${VENV:-bench/out/venv}
ROUTER_BIN=${ROUTER_BIN:-$VENV/bin/vllm-router}
KV_EVENTS=${KV_EVENTS:-auto}
read -r -a SLUICE_EXTRA <<< "${SLUICE_ARGS:-}"
read -r -a ROUTER_EXTRA <<< "${ROUTER_ARGS:-}"

if [ ! -x "$ROUTER_BIN" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q vllm-router httpx
fi

mkdir -p "$RUN_DIR"
rm -f "$RUN_DIR"/replica-*.pid "$RUN_DIR"/replica-*.json "$RUN_DIR"/router.pid

# Every process here is started in its own session (setsid), so that a Ctrl-C on the terminal
# reaches this script only and the teardown below decides the order: router first, then the
# replicas (SIGTERM, so they drain), each by the pid in its file (a restarted replica has a new one).
teardown() {
  trap - EXIT INT TERM
  local f pid
  for f in "$RUN_DIR/router.pid" "$RUN_DIR"/replica-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$RUN_DIR/router.pid" "$RUN_DIR"/replica-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Ready: GET /health/ready answers 200 where the replica has it (it listens, and answers 503,
# while the model loads and while it drains), else GET /health answers 200.
ready() { # BASE_URL
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1/health/ready" || true)
  [ "$code" = 200 ] || { [ "$code" = 404 ] && curl -sf -o /dev/null --max-time 2 "$1/health"; }
}
wait_http() { # URL SECONDS [PID]; URL "ready:BASE" waits for ready BASE
  local deadline=$(( SECONDS + $2 ))
  until if [ "${1#ready:}" != "$1" ]; then ready "${1#ready:}"; else curl -sf -o /dev/null --max-time 2 "$1"; fi; do
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then echo "process $3 died; see $RUN_DIR" >&2; return 1; fi
    if [ $SECONDS -ge $deadline ]; then echo "$1 did not answer within $2 s" >&2; return 1; fi
    sleep 0.5
  done
}

has_kv_events=0 has_kv_replay=0
if [ "$KV_EVENTS" != 0 ] && "$SLUICE_BIN" serve --help 2>/dev/null | grep -q -- '--kv-events'; then
  has_kv_events=1
  if "$SLUICE_BIN" serve --help 2>/dev/null | grep -q -- '--kv-events-replay'; then has_kv_replay=1; fi
fi

REPLICA_URLS=()
KV_SOURCES=()
KV_EVENTS_ENDPOINTS="" KV_REPLAY_ENDPOINTS=""
for i in $(seq 1 "$N"); do
  port=$(( BASE_PORT + i ))
  url="http://127.0.0.1:$port"
  REPLICA_URLS+=("$url")
  args=("$SLUICE_BIN" serve --model "$MODEL" --port "$port" --kv-cache-memory "$KV_CACHE_GIB"
        --max-model-len "$MAX_MODEL_LEN")
  if [ $has_kv_events = 1 ]; then
    zmq="tcp://127.0.0.1:$(( BASE_PORT + 100 + i ))"
    args+=(--kv-events "$zmq")
    KV_SOURCES+=(--kv-event-source "$url=$zmq")
    KV_EVENTS_ENDPOINTS="${KV_EVENTS_ENDPOINTS:+$KV_EVENTS_ENDPOINTS }$zmq"
    if [ $has_kv_replay = 1 ]; then
      replay="tcp://127.0.0.1:$(( BASE_PORT + 200 + i ))"
      args+=(--kv-events-replay "$replay")
      KV_REPLAY_ENDPOINTS="${KV_REPLAY_ENDPOINTS:+$KV_REPLAY_ENDPOINTS }$replay"
    fi
  fi
  # Running requests finish on SIGTERM: give them longer than a CPU prefill of a long prompt.
  if "$SLUICE_BIN" serve --help 2>/dev/null | grep -q -- '--drain-timeout'; then
    args+=(--drain-timeout "${DRAIN_TIMEOUT:-300}")
  fi
  args+=("${SLUICE_EXTRA[@]}")
  # What bench/router_bench.py needs to restart this replica the same way.
  python3 - "$RUN_DIR/replica-$i.json" "$url" "$THREADS" "$RUN_DIR/replica-$i.log" "${args[@]}" <<'EOF'
import json, sys
path, url, threads, log, *argv = sys.argv[1:]
json.dump({"url": url, "env": {"RAYON_NUM_THREADS": threads}, "log": log, "argv": argv},
          open(path, "w"), indent=1)
EOF
  echo "== $(date -u +%FT%TZ) start: RAYON_NUM_THREADS=$THREADS ${args[*]}" >> "$RUN_DIR/replica-$i.log"
  RAYON_NUM_THREADS=$THREADS setsid "${args[@]}" >> "$RUN_DIR/replica-$i.log" 2>&1 < /dev/null &
  echo $! > "$RUN_DIR/replica-$i.pid"
done
for i in $(seq 1 "$N"); do
  wait_http "ready:${REPLICA_URLS[$((i-1))]}" 300 "$(cat "$RUN_DIR/replica-$i.pid")"
done

# Readiness: /health/ready where the replica has it (it answers 503 while draining on SIGTERM),
# else /health (then a stopping replica is noticed by its refused connections).
health=/health
if curl -sf -o /dev/null "${REPLICA_URLS[0]}/health/ready"; then health=/health/ready; fi

# Health checked every second and one failure takes a replica out (one success brings it back);
# failed requests are retried on a worker the policy picks again, and one failure opens a
# worker's circuit breaker for 3 s, so a retry does not go back to the replica that refused it.
router_args=("$ROUTER_BIN" --host 127.0.0.1 --port "$ROUTER_PORT" --policy "$POLICY"
  --worker-urls "${REPLICA_URLS[@]}"
  --prometheus-host 127.0.0.1 --prometheus-port $(( ROUTER_PORT + 1000 ))
  --worker-startup-timeout-secs 300 --worker-startup-check-interval 1
  --health-check-endpoint "$health" --health-check-interval-secs 1 --health-check-timeout-secs 2
  --health-failure-threshold 1 --health-success-threshold 1
  --retry-max-retries 8 --retry-initial-backoff-ms 100 --retry-max-backoff-ms 2000
  --cb-failure-threshold 1 --cb-success-threshold 1 --cb-timeout-duration-secs 3
  --request-timeout-secs 900 --log-level info)
if [ "$POLICY" = kv_aware ]; then
  if [ $has_kv_events = 0 ]; then
    echo "POLICY=kv_aware needs KV events: $SLUICE_BIN serve has no --kv-events (or KV_EVENTS=0)" >&2
    exit 78
  fi
  # The router renders each chat request to token ids on a worker before it looks them up.
  render=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'content-type: application/json' \
    -d '{"messages":[{"role":"user","content":"hi"}]}' "${REPLICA_URLS[0]}/v1/chat/completions/render" || true)
  if [ "$render" = 404 ]; then
    echo "POLICY=kv_aware needs POST /v1/chat/completions/render on the replicas (vllm-router renders chat" \
      "requests to token ids with it); ${REPLICA_URLS[0]} answers 404: this sluice has no render endpoint" >&2
    exit 78
  fi
  # The events' topic is kv@<pod>@<model>: the model is the id the replicas serve.
  served=$(curl -s "${REPLICA_URLS[0]}/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
  router_args+=("${KV_SOURCES[@]}" --kv-event-block-size 16 --kv-event-model "$served")
fi
router_args+=("${ROUTER_EXTRA[@]}")
echo "== $(date -u +%FT%TZ) start: ${router_args[*]}" >> "$RUN_DIR/router.log"
setsid "${router_args[@]}" >> "$RUN_DIR/router.log" 2>&1 < /dev/null &
echo $! > "$RUN_DIR/router.pid"
ROUTER_URL="http://127.0.0.1:$ROUTER_PORT"
wait_http "$ROUTER_URL/v1/models" 120 "$(cat "$RUN_DIR/router.pid")"

pool=$(grep -o 'holds [0-9]* tokens' "$RUN_DIR/replica-1.log" | tail -1 || true)
{
  echo "vllm-router $("$VENV/bin/pip" show vllm-router 2>/dev/null | sed -n 's/^Version: //p') policy=$POLICY health=$health"
  echo "router: ${router_args[*]}"
  echo "replicas: N=$N RAYON_NUM_THREADS=$THREADS kv-cache-memory=$KV_CACHE_GIB (${pool:-pool size not logged}) kv-events=$has_kv_events"
} | tee "$RUN_DIR/setup.txt" >&2
echo "ready: router $ROUTER_URL, replicas ${REPLICA_URLS[*]}" >&2

export ROUTER_URL RUN_DIR KV_EVENTS_ENDPOINTS KV_REPLAY_ENDPOINTS
REPLICAS="${REPLICA_URLS[*]}"
export REPLICAS
if [ "${1:-}" = -- ]; then
  shift
  "$@"
else
  echo "Ctrl-C stops the router and the replicas" >&2
  # A trapped signal interrupts `wait` at once (it would wait for a foreground sleep to end).
  while :; do sleep 3600 & wait $! || true; done
fi
