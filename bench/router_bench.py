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

    bench/replicas.sh -- python3 bench/router_bench.py --label cache_aware --out run.json
    python3 bench/router_bench.py --report run1.json run2.json > table.md

Standard library only.
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

    def session(s):
        rng = random.Random(args.seed * 1000 + s)
        messages = [{"role": "system", "content":
                     f"Case file {s}-{rng.randrange(10**9)}. Answer questions about this document.\n"
                     + words(rng, doc_words)}]
        time.sleep(args.stagger * s)
        for t in range(args.turns):
            messages.append({"role": "user", "content": f"Question {t + 1}: " + words(rng, user_words) + "?"})
            sent = time.perf_counter()
            rec = stream_chat(router, model, messages, args.max_tokens, f"session-{s}", args.timeout)
            rec.update(session=s, turn=t, sent_s=sent - t_start, done_s=time.perf_counter() - t_start)
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
        "command": "python3 " + " ".join(sys.argv),
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
        "turns": records,
    }
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        json.dump(result, open(args.out, "w"), indent=1)
    print(summary_line(result))
    return result


def fmt(v, spec=".2f", none="n/a"):
    return none if v is None else format(v, spec)


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
               "| TTFT p50 | TTFT p90 | TTFT p50, turns 2+ | completion tok/s | req/s | wall | prompt tokens per replica |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        split = " / ".join(str(v.get("queries", 0)) for v in r["per_replica"].values())
        extra = ""
        if r.get("restart"):
            e = r["restart"][0]
            extra = f" (replica restarted: exit {e['exit_s']:.1f} s after SIGTERM, healthy {e['down_s']:.1f} s)"
        out.append(f"| {r['label']}{extra} | {r['ok']} / {r['failed']} | {fmt(r['hit_rate_metrics'], '.1%')} "
                   f"| {fmt(r['hit_rate_usage'], '.1%')} | {fmt(r['ttft_p50_s'])} s | {fmt(r['ttft_p90_s'])} s "
                   f"| {fmt(r['ttft_p50_later_turns_s'])} s | {r['completion_tok_s']:.2f} | {r['requests_s']:.3f} "
                   f"| {r['wall_s']:.0f} s | {split} |")
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
