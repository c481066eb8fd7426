#!/usr/bin/env python3
"""Multi-turn sessions through a router in front of sluice replicas (issue 28): how well the
router's policy keeps each conversation on the replica that holds its prefix.

Every session has a document of its own (about --doc-tokens tokens) as its system prompt and a
growing conversation: each turn appends a user message of about --user-tokens tokens to the
history (the replies the model streamed back included) and asks for --max-tokens more. All
sessions run at once, each one sending its next turn when the previous one has finished (plus
--think seconds), so every request after a session's first starts with the whole previous prompt.
Requests stream (TTFT is the time to the first content chunk) and carry an `X-Session-ID` header
(what the router's consistent_hash and sticky policies key on; cache_aware and round_robin ignore it).

Reports, over the run: the prefix-cache hit rate from each replica's /metrics (deltas of
vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total, polled every second, a counter
that went back to a smaller value counted as a restarted replica's), the same from the responses'
usage.prompt_tokens_details.cached_tokens, TTFT p50/p90, completion tokens/s and requests/s, and
the requests that failed at the client (no retries here: a failure is what a user would see).

--restart-replica I sends SIGTERM to replica I (its pid and command line from --run-dir, as
bench/replicas.sh writes them) once --restart-at of the requests have finished, waits for it to
exit (it drains), starts it again the same way and waits for /health.

--kv-index (needs pyzmq and msgspec: run it with bench/out/venv/bin/python) runs
bench/kv_index.py beside the load: an index of which replica holds which prefix, from the
replicas' KV events alone (endpoints from $KV_EVENTS_ENDPOINTS and $KV_REPLAY_ENDPOINTS, as
bench/replicas.sh exports them). Once the load has stopped, a check phase: every turn's prompt is
tokenized (POST /tokenize with the turn's messages) and
- routing: the replica that computed each turn (the one that stored the prompt's last full block
  first, by the events) against the replica the index says held the longest cached prefix when
  the turn was sent (what a prefix-aware router with this index would have picked), and the
  cached tokens the index predicted there against the response's usage.cached_tokens;
- probes: for each session's last prompt and each replica, one at a time with the events settled
  in between, the index's predicted cached tokens, then that prompt sent straight to that replica
  (max_tokens 1) and its usage.prompt_tokens_details.cached_tokens: agreement (exact matches /
  probes) and the mean absolute difference. /tokenize's token count is checked against the
  chat completion's usage.prompt_tokens.

    bench/replicas.sh -- python3 bench/router_bench.py --label cache_aware --out run.json
    bench/replicas.sh -- bench/out/venv/bin/python bench/router_bench.py --label cache_aware --kv-index
    python3 bench/router_bench.py --report run1.json run2.json > table.md

Standard library only, but for --kv-index.
"""
import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.error
import urllib.request

WORDS = (
    "river stone market winter garden letter engine harbor signal forest copper window "
    "ledger station candle meadow bridge orchard valley thunder canvas anchor silver lantern "
    "harvest circuit mirror timber compass violet granite parcel rocket saddle marble tunnel "
    "quartz falcon ribbon glacier pepper cotton shadow beacon cradle dragon ember feather "
    "fossil goblet hammer island jacket kettle ladder magnet needle oyster pillow quiver "
    "rabbit spindle tablet umbrella velvet walnut yarrow zephyr account budget contract "
    "delivery invoice payment receipt schedule shipment supplier warranty clause tenant "
    "policy premium claim audit balance credit deposit interest mortgage pension revenue"
).split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(max(1, n)))


def http_json(url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def tokens_per_word(replica, model):
    """Measured on the model's tokenizer (POST /tokenize, as vLLM and sluice have it)."""
    sample = words(random.Random(7), 400)
    try:
        n = http_json(f"{replica}/tokenize", {"model": model, "prompt": sample})["count"]
        return n / 400
    except Exception as e:  # noqa: BLE001
        print(f"(no /tokenize on {replica}: {e}; assuming 1.3 tokens a word)", file=sys.stderr)
        return 1.3


# ---------------------------------------------------------------- replica metrics


def scrape(replica, timeout=2):
    """The counters this report needs, summed over models; None when the replica does not answer."""
    want = {
        "vllm:prefix_cache_queries_total": "queries",
        "vllm:prefix_cache_hits_total": "hits",
        "vllm:prompt_tokens_total": "prompt_tokens",
        "vllm:generation_tokens_total": "generation_tokens",
        "vllm:request_success_total": "requests",
    }
    try:
        with urllib.request.urlopen(f"{replica}/metrics", timeout=timeout) as r:
            text = r.read().decode()
    except Exception:  # noqa: BLE001
        return None
    out = {v: 0.0 for v in want.values()}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in want:
            try:
                out[want[name]] += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return out


class Counters:
    """Per-replica deltas of monotonic counters, across restarts (a counter that went down is a
    new process: its whole value is new)."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.last = {r: scrape(r) for r in replicas}
        self.total = {r: {} for r in replicas}
        self.resets = {r: 0 for r in replicas}
        self.lock = threading.Lock()

    def poll(self, replica):
        now = scrape(replica)
        if now is None:
            return
        with self.lock:
            last = self.last.get(replica)
            reset = last is not None and now["queries"] < last["queries"]
            if reset:
                self.resets[replica] += 1
            for k, v in now.items():
                base = 0.0 if (last is None or reset) else last[k]
                self.total[replica][k] = self.total[replica].get(k, 0.0) + (v - base)
            self.last[replica] = now

    def poll_all(self):
        for r in self.replicas:
            self.poll(r)


# ---------------------------------------------------------------- one streamed turn


def stream_chat(router, model, messages, max_tokens, session_id, timeout):
    parts = urllib.parse.urlparse(router)
    body = json.dumps({
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,  # fixed-length replies: random-weight models stop anywhere
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    })
    rec = {"ok": False, "ttft_s": None, "text": "", "usage": None, "error": None, "status": None}
    started = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body,
                     {"content-type": "application/json", "x-session-id": session_id})
        resp = conn.getresponse()
        rec["status"] = resp.status
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read()[:200].decode(errors='replace')}"
            return rec
        done = False
        pieces = []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                rec["error"] = f"stream error: {chunk['error']}"
                return rec
            for choice in chunk.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    if rec["ttft_s"] is None:
                        rec["ttft_s"] = time.perf_counter() - started
                    pieces.append(content)
            if chunk.get("usage"):
                rec["usage"] = chunk["usage"]
        rec["text"] = "".join(pieces)
        if not done:
            rec["error"] = "stream ended without [DONE]"
        elif rec["ttft_s"] is None:
            rec["error"] = "no content"
        else:
            rec["ok"] = True
        return rec
    except Exception as e:  # noqa: BLE001
        rec["error"] = f"{type(e).__name__}: {e}"
        return rec
    finally:
        rec["e2e_s"] = time.perf_counter() - started
        conn.close()


# ---------------------------------------------------------------- rolling restart


def status_of(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:  # noqa: BLE001
        return None


def is_ready(base):
    """GET /health/ready answers 200 where the replica has it (503 while loading or draining),
    else GET /health answers 200."""
    code = status_of(f"{base}/health/ready")
    return code == 200 or (code == 404 and status_of(f"{base}/health") == 200)


def restart_replica(run_dir, index, log):
    spec = json.load(open(os.path.join(run_dir, f"replica-{index}.json")))
    pid_file = os.path.join(run_dir, f"replica-{index}.pid")
    pid = int(open(pid_file).read())
    event = {"replica": spec["url"], "old_pid": pid, "sigterm_at": time.time()}
    log(f"restart: SIGTERM to replica {index} (pid {pid})")
    os.kill(pid, signal.SIGTERM)
    t0 = time.perf_counter()
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if time.perf_counter() - t0 > 300:
            log("restart: replica still running after 300 s; SIGKILL")
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    event["exit_s"] = time.perf_counter() - t0
    log(f"restart: replica {index} exited after {event['exit_s']:.1f} s; starting it again")
    with open(spec["log"], "ab") as f:
        f.write(f"== {time.strftime('%FT%TZ', time.gmtime())} restart: {' '.join(spec['argv'])}\n".encode())
        proc = subprocess.Popen(spec["argv"], env={**os.environ, **spec["env"]}, stdout=f,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    open(pid_file, "w").write(str(proc.pid))
    event["new_pid"] = proc.pid
    while True:
        if is_ready(spec["url"]):
            break
        if proc.poll() is not None:
            log(f"restart: the new replica exited with {proc.returncode}")
            break
        time.sleep(0.2)
    event["down_s"] = time.perf_counter() - t0
    log(f"restart: replica {index} healthy again {event['down_s']:.1f} s after SIGTERM")
    return event


# ---------------------------------------------------------------- the run


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def run(args):
    replicas = (args.replicas or os.environ.get("REPLICAS", "")).split()
    router = args.router or os.environ.get("ROUTER_URL", "http://127.0.0.1:18000")
    run_dir = args.run_dir or os.environ.get("RUN_DIR", "bench/out/replicas")
    if not replicas:
        sys.exit("no replicas: pass --replicas or run under bench/replicas.sh")
    model = args.model or http_json(f"{router}/v1/models")["data"][0]["id"]
    tpw = tokens_per_word(replicas[0], model)
    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", file=sys.stderr, flush=True)

    doc_words = int(args.doc_tokens / tpw)
    user_words = int(args.user_tokens / tpw)
    total = args.sessions * args.turns
    log(f"{args.label}: {args.sessions} sessions x {args.turns} turns through {router} to "
        f"{len(replicas)} replicas; model {model}; {tpw:.2f} tokens/word")

    counters = Counters(replicas)
    records = []
    rec_lock = threading.Lock()
    finished = threading.Event()
    restart_events = []
    restart_trigger = threading.Event()
    prompts = {}  # (session, turn) -> the messages sent
    kv = None
    if args.kv_index:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import kv_index
        events = (args.kv_events or os.environ.get("KV_EVENTS_ENDPOINTS", "")).split()
        replay = (args.kv_replay or os.environ.get("KV_REPLAY_ENDPOINTS", "")).split() or None
        if len(events) != len(replicas):
            sys.exit(f"--kv-index: {len(events)} KV event endpoints for {len(replicas)} replicas "
                     "(pass --kv-events or run under bench/replicas.sh with a sluice that has --kv-events)")
        kv = kv_index.KvIndex(replicas, events, replay, log=log).start()
        log(f"kv-index: subscribed to {' '.join(events)}" + (f", replay {' '.join(replay)}" if replay else ""))

    def session(s):
        rng = random.Random(args.seed * 1000 + s)
        messages = [{"role": "system", "content":
                     f"Case file {s}-{rng.randrange(10**9)}. Answer questions about this document.\n"
                     + words(rng, doc_words)}]
        time.sleep(args.stagger * s)
        for t in range(args.turns):
            messages.append({"role": "user", "content": f"Question {t + 1}: " + words(rng, user_words) + "?"})
            prompts[(s, t)] = [dict(m) for m in messages]
            sent = time.perf_counter()
            sent_at = time.time()
            rec = stream_chat(router, model, messages, args.max_tokens, f"session-{s}", args.timeout)
            rec.update(session=s, turn=t, sent_s=sent - t_start, sent_at=sent_at,
                       done_s=time.perf_counter() - t_start)
            text = rec.pop("text")
            if rec["ok"]:
                messages.append({"role": "assistant", "content": text})
            else:
                log(f"session {s} turn {t}: FAILED {rec['error']}")
            with rec_lock:
                records.append(rec)
                if args.restart_replica and len(records) >= args.restart_at * total:
                    restart_trigger.set()
            if args.think:
                time.sleep(rng.expovariate(1 / args.think))

    def poller():
        while not finished.is_set():
            counters.poll_all()
            finished.wait(1.0)

    def restarter():
        restart_trigger.wait()
        if finished.is_set():
            return
        counters.poll(replicas[args.restart_replica - 1])
        restart_events.append(restart_replica(run_dir, args.restart_replica, log))

    threads = [threading.Thread(target=session, args=(s,)) for s in range(args.sessions)]
    aux = [threading.Thread(target=poller, daemon=True)]
    if args.restart_replica:
        aux.append(threading.Thread(target=restarter, daemon=True))
    for t in aux + threads:
        t.start()
    last_report = 0
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        if len(records) >= last_report + max(1, total // 10):
            last_report = len(records)
            log(f"{len(records)}/{total} requests done")
    wall = time.perf_counter() - t_start
    finished.set()
    restart_trigger.set()
    if args.restart_replica and len(aux) > 1:
        aux[1].join(timeout=600)
    counters.poll_all()

    ok = [r for r in records if r["ok"]]
    failed = [r for r in records if not r["ok"]]
    ttft = [r["ttft_s"] for r in ok]
    completion = sum((r["usage"] or {}).get("completion_tokens", 0) for r in ok)
    prompt = sum((r["usage"] or {}).get("prompt_tokens", 0) for r in ok)
    cached = sum(((r["usage"] or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
                 for r in ok)
    per_replica = {r: {k: round(v) for k, v in counters.total[r].items()} for r in replicas}
    queries = sum(v.get("queries", 0) for v in per_replica.values())
    hits = sum(v.get("hits", 0) for v in per_replica.values())
    later = [r["ttft_s"] for r in ok if r["turn"] > 0]
    kv_result = None
    if kv is not None:
        try:
            kv_result = kv_check(kv, replicas, model, prompts, ok, per_replica, log)
        finally:
            kv.close()
    result = {
        "label": args.label,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "date": time.strftime("%FT%TZ", time.gmtime()),
        "model": model,
        "router": router,
        "replicas": replicas,
        "setup": open(os.path.join(run_dir, "setup.txt")).read()
        if os.path.exists(os.path.join(run_dir, "setup.txt")) else None,
        "command": (os.path.relpath(sys.executable) if args.kv_index else "python3") + " " + " ".join(sys.argv),
        "workload": {k: getattr(args, k) for k in
                     ("sessions", "turns", "doc_tokens", "user_tokens", "max_tokens", "think", "stagger", "seed")},
        "tokens_per_word": round(tpw, 3),
        "requests": len(records),
        "ok": len(ok),
        "failed": len(failed),
        "failures": [{k: r[k] for k in ("session", "turn", "status", "error", "sent_s")} for r in failed],
        "wall_s": round(wall, 2),
        "hit_rate_metrics": hits / queries if queries else None,
        "hit_rate_usage": cached / prompt if prompt else None,
        "metrics_queries": queries,
        "metrics_hits": hits,
        "usage_prompt_tokens": prompt,
        "usage_cached_tokens": cached,
        "per_replica": per_replica,
        "replica_restarts_seen": counters.resets,
        "ttft_p50_s": pct(ttft, 0.5),
        "ttft_p90_s": pct(ttft, 0.9),
        "ttft_p50_later_turns_s": pct(later, 0.5),
        "completion_tokens": completion,
        "completion_tok_s": completion / wall,
        "requests_s": len(ok) / wall,
        "restart": restart_events,
        "kv_index": kv_result,
        "turns": records,
    }
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        json.dump(result, open(args.out, "w"), indent=1)
    print(summary_line(result))
    if kv_result:
        print(kv_summary(kv_result))
    return result


# ---------------------------------------------------------------- the KV index's check


def kv_check(kv, replicas, model, prompts, ok, per_replica, log):
    """After the load: routing as the events saw it, then one probe per session and replica."""
    import kv_index
    kv.settle(quiet=1.0)
    short = {r: f"r{i + 1}" for i, r in enumerate(replicas)}
    tokens = {}
    for rec in ok:
        key = (rec["session"], rec["turn"])
        tokens[key] = kv_index.tokenize_chat(replicas[0], model, prompts[key])
    # Routing, turn by turn: who computed it, and who held most of it when it was sent.
    turns = []
    for rec in sorted(ok, key=lambda r: (r["session"], r["turn"])):
        key = (rec["session"], rec["turn"])
        ids = tokens[key]
        served, _ = kv.stored_by(ids)
        best, top, hits = kv.best(ids, live_at=rec["sent_at"])
        usage = rec.get("usage") or {}
        turns.append({
            "session": key[0], "turn": key[1], "prompt_tokens": len(ids),
            "usage_prompt_tokens": usage.get("prompt_tokens"),
            "served_by": short.get(served), "index_best": short[best], "best_tokens": top,
            "hits_at_send": {short[r]: h for r, h in hits.items()},
            "predicted_on_served": hits.get(served) if served else None,
            "usage_cached": (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0,
        })
    later = [t for t in turns if t["turn"] > 0 and t["served_by"]]
    on_best = [t for t in later if t["hits_at_send"][t["served_by"]] == t["best_tokens"]]
    forgone = sum(t["best_tokens"] - t["hits_at_send"][t["served_by"]] for t in later)
    under_load = [t for t in turns if t["served_by"]]
    attributed = {short[r]: sum(1 for t in turns if t["served_by"] == short[r]) for r in replicas}
    last = {}
    for t in turns:
        last[t["session"]] = t
    # Probes: each session's last prompt on every replica, the events settled before each.
    probes = []
    end_of_load = {}
    for s, t in sorted(last.items()):
        ids = tokens[(s, t["turn"])]
        best, top, hits = kv.best(ids)
        end_of_load[s] = {"index_best": short[best], "best_tokens": top,
                          "hits": {short[r]: h for r, h in hits.items()}}
    for s, t in sorted(last.items()):
        key = (s, t["turn"])
        ids = tokens[key]
        for r in replicas:
            kv.settle()
            predicted = kv.cached_tokens(ids)[r]
            prompt_tokens, cached = kv_index.probe_chat(r, model, prompts[key])
            probes.append({"session": s, "turn": t["turn"], "replica": short[r], "tokenize_count": len(ids),
                           "prompt_tokens": prompt_tokens, "predicted": predicted, "cached": cached})
            log(f"kv-index probe: session {s} on {short[r]}: predicted {predicted}, "
                f"cached_tokens {cached} ({len(ids)} tokens, prompt_tokens {prompt_tokens})")
    kv.settle()
    exact = sum(1 for p in probes if p["predicted"] == p["cached"])
    mismatched = [p for p in probes if p["prompt_tokens"] != p["tokenize_count"]]
    return {
        "replicas": {short[r]: r for r in replicas},
        "probes": len(probes),
        "probes_exact": exact,
        "agreement": exact / len(probes) if probes else None,
        "mean_abs_diff": statistics.mean(abs(p["predicted"] - p["cached"]) for p in probes) if probes else None,
        "tokenize_mismatches": len(mismatched),
        "tokenize_mismatch_examples": mismatched[:5],
        "routing_turns": len(later),
        "router_on_index_best": len(on_best),
        "router_on_index_best_rate": len(on_best) / len(later) if later else None,
        "tokens_forgone": forgone,
        "under_load_exact": sum(1 for t in under_load if t["predicted_on_served"] == t["usage_cached"]),
        "under_load_turns": len(under_load),
        "under_load_mean_abs_diff": statistics.mean(abs(t["predicted_on_served"] - t["usage_cached"])
                                                    for t in under_load) if under_load else None,
        "unattributed_turns": sum(1 for t in turns if not t["served_by"]),
        "turns_attributed": attributed,
        "requests_by_metrics": {short[r]: per_replica[r].get("requests", 0) for r in replicas},
        "last_turn_routing": {str(s): {"served_by": t["served_by"], "index_best_at_send": t["index_best"],
                                       "hits_at_send": t["hits_at_send"], **{"end_of_load": end_of_load[s]}}
                              for s, t in sorted(last.items())},
        "events": {short[r]: v for r, v in kv.stats().items()},
        "probe_list": probes,
        "turn_list": turns,
    }


def kv_summary(k):
    lines = [f"kv-index: probes {k['probes_exact']}/{k['probes']} exact "
             f"({fmt(k['agreement'], '.1%')}), mean |predicted - cached_tokens| {fmt(k['mean_abs_diff'], '.1f')} tokens; "
             f"/tokenize vs usage.prompt_tokens mismatches {k['tokenize_mismatches']}"]
    lines.append(f"kv-index: router on the index's longest-prefix replica for {k['router_on_index_best']}/"
                 f"{k['routing_turns']} turns after the first ({fmt(k['router_on_index_best_rate'], '.1%')}), "
                 f"{k['tokens_forgone']} cached tokens forgone; under load the index predicted the served "
                 f"replica's cached_tokens exactly for {k['under_load_exact']}/{k['under_load_turns']} turns "
                 f"(mean |diff| {fmt(k['under_load_mean_abs_diff'], '.1f')})")
    lines.append(f"kv-index: turns attributed by the events {k['turns_attributed']} "
                 f"(unattributed {k['unattributed_turns']}) vs requests by /metrics {k['requests_by_metrics']}")
    for r, st in k["events"].items():
        lines.append(f"kv-index: {r}: {st['messages']} messages, {st['stored_blocks']} blocks stored, "
                     f"{st['removed_blocks']} removed, {st['cleared']} clears, {st['gaps']} gaps "
                     f"({st['batches_replayed']} batches replayed, {st['lost_batches']} lost), "
                     f"{st['restarts']} restarts, live {st['live_blocks']}")
    return "\n".join(lines)


def fmt(v, spec=".2f", none="n/a"):
    return none if v is None else format(v, spec)


def kv_cells(k):
    if not k:
        return "n/a | n/a"
    return (f"{k['probes_exact']}/{k['probes']} ({fmt(k['mean_abs_diff'], '.1f')}) "
            f"| {k['router_on_index_best']}/{k['routing_turns']}")


def summary_line(r):
    return (f"{r['label']}: {r['ok']}/{r['requests']} ok, {r['failed']} failed; hit rate "
            f"{fmt(r['hit_rate_metrics'], '.1%')} (metrics) {fmt(r['hit_rate_usage'], '.1%')} (usage); "
            f"TTFT p50 {fmt(r['ttft_p50_s'])} s p90 {fmt(r['ttft_p90_s'])} s; "
            f"{r['completion_tok_s']:.2f} completion tok/s, {r['requests_s']:.3f} req/s; wall {r['wall_s']:.0f} s")


# ---------------------------------------------------------------- markdown report


def report(paths, baseline_label, aware_label):
    runs = [json.load(open(p)) for p in paths]
    first = runs[0]
    w = first["workload"]
    out = []
    out.append(f"CPU: {first['cpu']} ({first['cores']} cores, shared by the replicas, the router and the "
               f"client); {first['date']}; model `{first['model']}`; {len(first['replicas'])} replicas.")
    if first.get("setup"):
        for line in first["setup"].strip().splitlines():
            if line.startswith(("replicas:", "vllm-router")):
                out.append(f"{line}  ")
    out.append(f"Workload: {w['sessions']} sessions x {w['turns']} turns, all sessions at once; each session a "
               f"~{w['doc_tokens']}-token document of its own as system prompt, ~{w['user_tokens']}-token user turns, "
               f"{w['max_tokens']} completion tokens a turn (fed back into the history); streaming.")
    out.append("")
    out.append("| policy | requests ok / failed | prefix hit rate (replica /metrics) | hit rate (usage.cached_tokens) "
               "| TTFT p50 | TTFT p90 | TTFT p50, turns 2+ | completion tok/s | req/s | wall | prompt tokens per replica "
               "| KV index: probes exact (mean abs diff) | router on the index's longest prefix, turns 2+ |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        split = " / ".join(str(v.get("queries", 0)) for v in r["per_replica"].values())
        extra = ""
        if r.get("restart"):
            e = r["restart"][0]
            extra = f" (replica restarted: exit {e['exit_s']:.1f} s after SIGTERM, healthy {e['down_s']:.1f} s)"
        out.append(f"| {r['label']}{extra} | {r['ok']} / {r['failed']} | {fmt(r['hit_rate_metrics'], '.1%')} "
                   f"| {fmt(r['hit_rate_usage'], '.1%')} | {fmt(r['ttft_p50_s'])} s | {fmt(r['ttft_p90_s'])} s "
                   f"| {fmt(r['ttft_p50_later_turns_s'])} s | {r['completion_tok_s']:.2f} | {r['requests_s']:.3f} "
                   f"| {r['wall_s']:.0f} s | {split} | {kv_cells(r.get('kv_index'))} |")
    by = {r["label"]: r for r in runs}
    if baseline_label in by and aware_label in by:
        b, a = by[baseline_label], by[aware_label]
        out.append("")
        if b["hit_rate_metrics"] and a["hit_rate_metrics"] is not None:
            ratio = a["hit_rate_metrics"] / b["hit_rate_metrics"]
            out.append(f"Hit rate {aware_label} / {baseline_label}: {ratio:.2f}x (target >= 2x: "
                       f"{'met' if ratio >= 2 else 'not met'}).  ")
        if a["ttft_p50_s"] and b["ttft_p50_s"]:
            ratio = b["ttft_p50_s"] / a["ttft_p50_s"]
            out.append(f"TTFT p50 {baseline_label} / {aware_label}: {ratio:.2f}x (target >= 3x: "
                       f"{'met' if ratio >= 3 else 'not met'}).")
    kv_runs = [r for r in runs if r.get("kv_index")]
    if kv_runs:
        out.append("")
        out.append("KV index (bench/kv_index.py, from the replicas' KV events alone): after the load, each "
                   "session's last prompt on every replica, the index's predicted cached tokens against the "
                   "replica's usage.cached_tokens; routing from the events (the replica that stored a turn's "
                   "last full block first) against the replica holding the longest prefix when it was sent.")
        out.append("")
        for r in kv_runs:
            for line in kv_summary(r["kv_index"]).splitlines():
                out.append(f"    {r['label']}: {line.removeprefix('kv-index: ')}")
    out.append("")
    out.append("Commands:")
    out.append("")
    for r in runs:
        out.append(f"    {r['label']}: {r['command']}")
    if first.get("setup"):
        for line in first["setup"].strip().splitlines():
            if line.startswith("router:"):
                out.append(f"    {line}")
                out.append("    (every run: the same router command with its own --policy)")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--router", help="router URL (default $ROUTER_URL)")
    p.add_argument("--replicas", help="space-separated replica URLs, for /metrics (default $REPLICAS)")
    p.add_argument("--run-dir", help="where bench/replicas.sh keeps pids and command lines (default $RUN_DIR)")
    p.add_argument("--model")
    p.add_argument("--label", default="run")
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--doc-tokens", type=int, default=2000)
    p.add_argument("--user-tokens", type=int, default=80)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--think", type=float, default=0.0, help="mean seconds between a reply and the next turn")
    p.add_argument("--stagger", type=float, default=0.0, help="session k starts k * STAGGER seconds in")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--restart-replica", type=int, default=0, help="1-based replica to restart under load")
    p.add_argument("--restart-at", type=float, default=0.3, help="fraction of the requests done before it")
    p.add_argument("--kv-index", action="store_true",
                   help="run bench/kv_index.py beside the load and check it afterwards (pyzmq, msgspec)")
    p.add_argument("--kv-events", help="space-separated KV event endpoints, one per replica "
                   "(default $KV_EVENTS_ENDPOINTS)")
    p.add_argument("--kv-replay", help="space-separated replay endpoints (default $KV_REPLAY_ENDPOINTS)")
    p.add_argument("--out", help="write the run (summary and every request) as JSON here")
    p.add_argument("--report", nargs="+", metavar="RUN_JSON", help="print a markdown table of these runs")
    p.add_argument("--baseline", default="round_robin", help="label the targets compare against")
    p.add_argument("--aware", default="cache_aware", help="label of the cache-aware run")
    args = p.parse_args()
    if args.report:
        print(report(args.report, args.baseline, args.aware))
    else:
        run(args)


if __name__ == "__main__":
    main()
