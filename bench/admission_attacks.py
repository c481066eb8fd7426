#!/usr/bin/env python3
"""Issue 30's admission attacks (items 4, 6, 7) against one sluice binary and the bundled model:
a load that never ends beside a healthy model, oversized and huge scoring requests, and one API
key's prompt work (completions, prompt logprobs, /tokenize) delaying another's short request.
Each scenario starts a fresh `BINARY serve` on a loopback port and reports statuses, the
victim's latency and the server's peak memory (VmHWM).

usage: python3 bench/admission_attacks.py BINARY SCENARIO...   (one JSON line per scenario)
scenarios: emb300 rerank256 emb_mem_plain emb_mem_trunc fair_completions fair_echo
           fair_tokenize hostile_load (needs --load-timeout) hostile_load_base (without it)
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED = os.path.join(REPO, "models/sluice-kjv-mini")
BIG = "In the beginning God created the heaven and the earth. " * 70_000  # ~3.9 MB


def start(args, port):
    log = open(os.path.join(tempfile.gettempdir(), f"admission-attacks-{port}.log"), "w")
    proc = subprocess.Popen([BIN, "serve", "--port", str(port)] + args, stderr=log, stdout=log, cwd=REPO)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            status, _, _ = call(port, "GET", "/health/startup", None, timeout=2)
            if status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def call(port, method, path, body, key=None, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json", "Host": "localhost"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers=headers)
    res = conn.getresponse()
    text = res.read().decode(errors="replace")
    return res.status, dict(res.getheaders()), text


def hwm(proc):
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024 / 1024  # GiB
    return None


def metric(port, name):
    _, _, text = call(port, "GET", "/metrics", None)
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + "{") or l.startswith(name + " "))


def concurrently(fns):
    out = [None] * len(fns)

    def run(i, f):
        t = time.time()
        try:
            out[i] = (f(), time.time() - t)
        except Exception as e:  # noqa: BLE001
            out[i] = (repr(e), time.time() - t)

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(fns)]
    for t in threads:
        t.start()
    return threads, out


def stop(proc):
    proc.kill()
    proc.wait()


def emb300(port):
    proc = start([], port)
    got = []
    for _ in range(3):
        s, h, b = call(port, "POST", "/v1/embeddings", {"model": "sluice-kjv-mini", "input": [f"verse {i}" for i in range(300)]})
        got.append((s, h.get("Retry-After") or h.get("retry-after"), b[:160]))
    s, _, b = call(port, "POST", "/v1/embeddings", {"model": "sluice-kjv-mini", "input": [f"verse {i}" for i in range(256)]})
    stop(proc)
    return {"300 inputs": got, "256 inputs": s}


def rerank256(port):
    proc = start(["--task", "embed"], port)
    docs = [f"document {i}" for i in range(256)]
    s, h, b = call(port, "POST", "/v1/rerank", {"model": "sluice-kjv-mini", "query": "q", "documents": docs})
    s2, _, _ = call(port, "POST", "/v1/rerank", {"model": "sluice-kjv-mini", "query": "q", "documents": docs[:255]})
    stop(proc)
    return {"256 documents": (s, h.get("Retry-After"), b[:200]), "255 documents": s2}


def emb_mem(port, truncate):
    proc = start([], port)
    body = {"model": "sluice-kjv-mini", "input": BIG}
    if truncate:
        body["truncate_prompt_tokens"] = 16
    threads, out = concurrently([lambda: call(port, "POST", "/v1/embeddings", body)[0] for _ in range(8)])
    for t in threads:
        t.join()
    peak = hwm(proc)
    stop(proc)
    return {"statuses": [o[0] for o in out], "seconds": round(max(o[1] for o in out), 1), "VmHWM_GiB": round(peak, 2)}


def fair_completions(port, echo):
    proc = start(["--api-key", "alice", "--api-key", "bob"], port)
    prompts = [[(i * 31 + j * 13) % 4000 + 50 for j in range(480)] for i in range(128)]
    body = {"model": "sluice-kjv-mini", "prompt": prompts, "max_tokens": 1}
    if echo:
        body.update({"echo": True, "logprobs": 1, "max_tokens": 0})
    threads, out = concurrently([lambda: call(port, "POST", "/v1/completions", body, key="alice")[0]])
    time.sleep(1.0)
    t = time.time()
    s, _, b = call(port, "POST", "/v1/completions", {"model": "sluice-kjv-mini", "prompt": "In the beginning", "max_tokens": 16, "ignore_eos": True}, key="bob")
    bob = time.time() - t
    for th in threads:
        th.join()
    counters = {n: metric(port, n) for n in ["sluice:fair_share_deferred_total", "sluice:fair_share_preemptions_total", "sluice:fair_share_prompt_tokens_deferred_total"]}
    stop(proc)
    return {"bob_status": s, "bob_seconds": round(bob, 2), "alice": (out[0][0], round(out[0][1], 2)), "counters": counters}


def fair_tokenize(port):
    proc = start(["--api-key", "alice", "--api-key", "bob"], port)
    body = {"model": "sluice-kjv-mini", "prompt": BIG}
    threads, out = concurrently([lambda: call(port, "POST", "/tokenize", body, key="alice")[0] for _ in range(8)])
    time.sleep(0.5)
    t = time.time()
    s, _, _ = call(port, "POST", "/tokenize", {"model": "sluice-kjv-mini", "prompt": "Hello"}, key="bob")
    bob = time.time() - t
    for th in threads:
        th.join()
    peak = hwm(proc)
    stop(proc)
    return {"bob_status": s, "bob_seconds": round(bob, 2), "alice_seconds": round(max(o[1] for o in out), 1), "VmHWM_GiB": round(peak, 2)}


def hostile_load(port, with_timeout):
    root = tempfile.mkdtemp()
    for name in ["healthy", "hostile"]:
        shutil.copytree(BUNDLED, os.path.join(root, name))
    fifo = os.path.join(root, "hostile", "tokenizer.json")
    os.remove(fifo)
    os.mkfifo(fifo)
    args = ["--models-dir", root] + (["--load-timeout", "10"] if with_timeout else [])
    proc = start(args, port)
    threads, out = concurrently([lambda: call(port, "POST", "/v1/completions", {"model": "hostile", "prompt": "x", "max_tokens": 1}, timeout=60)[:3:2]])
    time.sleep(0.5)
    t = time.time()
    try:
        s, _, _ = call(port, "POST", "/v1/completions", {"model": "healthy", "prompt": "In the beginning", "max_tokens": 4}, timeout=30)
    except Exception as e:  # noqa: BLE001
        s = repr(e)
    healthy = time.time() - t
    for th in threads:
        th.join()
    _, _, models = call(port, "GET", "/v1/models", None)
    status = {m["id"]: m["status"] for m in json.loads(models)["data"]}
    stop(proc)
    # The FIFO's blocked reader dies with the process.
    shutil.rmtree(root, ignore_errors=True)
    hostile = out[0][0]
    return {"healthy": (s, round(healthy, 2)), "hostile": (str(hostile)[:200], round(out[0][1], 1)), "status_after": status}


SCENARIOS = {
    "emb300": emb300,
    "rerank256": rerank256,
    "emb_mem_trunc": lambda p: emb_mem(p, True),
    "emb_mem_plain": lambda p: emb_mem(p, False),
    "fair_completions": lambda p: fair_completions(p, False),
    "fair_echo": lambda p: fair_completions(p, True),
    "fair_tokenize": fair_tokenize,
    "hostile_load": lambda p: hostile_load(p, True),
    "hostile_load_base": lambda p: hostile_load(p, False),
}

port = 18800 + os.getpid() % 500
for name in sys.argv[2:]:
    port += 1
    print(json.dumps({"scenario": name, "binary": os.path.basename(BIN), "result": SCENARIOS[name](port)}), flush=True)
