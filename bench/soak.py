#!/usr/bin/env python3
"""Disconnect storm and mixed soak against a real `sluice serve`, loopback only, bounded in time.

Starts the server itself (so it knows its pid), drives it, and reports what leaked: the server's
RSS and open file descriptors (sampled from /proc/<pid> every second), running and waiting
sequences and KV blocks in use (from /metrics) once the load stops, and every error.

    bench/soak.py storm [--clients 500] [--concurrency 100] [--seconds 60]
    bench/soak.py soak  [--streams 32] [--seconds 120]
    common: --bin PATH (default target/release/sluice) --server-arg ARG (repeatable, passed to
            `sluice serve`) --json PATH (also write the report there)

storm: waves of `--clients` streaming chat requests (256 tokens each), `--concurrency` at a time,
each dropped (socket closed without a word) after 1 to 8 reads of its stream, or, for half of
them, right after sending the request; waves repeat until `--seconds` have passed, and the RSS
and descriptors after each settled wave are reported. soak: `--streams` workers for `--seconds`, each looping over a mix of
streaming chat read to the end, non-streaming completions, n=2 with stop strings, streams
abandoned midway, /tokenize and /health.

Exit status 1 when something leaked or a request failed in a way it should not have.
Only the standard library; nothing leaves 127.0.0.1.
"""

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the server


class Server:
    def __init__(self, binary, extra_args):
        self.proc = subprocess.Popen(
            [binary, "serve", "--host", "127.0.0.1", "--port", "0", "--no-ui", *extra_args],
            cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.log = []
        listening = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://([\d.]+):(\d+)", line)
                if m:
                    self.host, self.port = m.group(1), int(m.group(2))
                # It listens before its preload; measure once the models are loaded.
                if "started: every --preload model is loaded" in line:
                    listening.set()

        threading.Thread(target=drain, daemon=True).start()
        if not listening.wait(300):
            self.proc.kill()
            sys.exit("sluice serve did not start:\n" + "".join(self.log))

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ---------------------------------------------------------------- raw HTTP over asyncio


async def request(server, method, path, body=None, read="all", timeout=120):
    """One request on its own connection. read: "all" (to the end), "head" (status line only,
    then close), or an int (close after that many body chunks). Returns (status, body bytes)."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(server.host, server.port), timeout)
    try:
        payload = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
        writer.write(head.encode() + payload)
        await writer.drain()
        if read == 0:
            return None, b""
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        parts = status_line.split()
        status = int(parts[1]) if len(parts) > 1 else None
        if read == "head":
            return status, b""
        got = b""
        chunks = 0
        while True:
            data = await asyncio.wait_for(reader.read(65536), timeout)
            if not data:
                break
            got += data
            chunks += 1
            if isinstance(read, int) and chunks >= read:
                break
        return status, got
    finally:
        writer.close()


async def metrics(server):
    _, raw = await request(server, "GET", "/metrics")
    text = raw.decode(errors="replace")
    values = {}
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc"):
        found = re.findall(rf"^{re.escape(name)}{{[^}}]*}} ([0-9.e+-]+)$", text, re.M)
        values[name] = sum(float(v) for v in found)
    return values


class Sampler:
    """Samples the server's RSS and descriptors every second while the load runs."""

    def __init__(self, server):
        self.server, self.rss, self.fds, self.running = server, [], [], True

    async def run(self):
        while self.running:
            self.rss.append(self.server.rss_mib())
            self.fds.append(self.server.fds())
            await asyncio.sleep(1)


async def settle(server, seconds=30):
    """Waits for running and waiting sequences and KV usage to reach 0; returns the last reading."""
    deadline = time.time() + seconds
    while True:
        m = await metrics(server)
        if all(v == 0 for v in m.values()) or time.time() > deadline:
            return m
        await asyncio.sleep(0.2)


def chat(model, content, **extra):
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


# ---------------------------------------------------------------- the two loads


async def storm(server, model, args, errors):
    rng = random.Random(14)
    done = {"dropped": 0, "answered_before_drop": 0}
    sem = asyncio.Semaphore(args.concurrency)

    async def one(i):
        async with sem:
            read = 0 if i % 2 == 0 else rng.randint(1, 8)
            body = chat(model, f"Tell a long story number {i}", max_tokens=256, stream=True,
                        ignore_eos=True)
            try:
                status, _ = await request(server, "POST", "/v1/chat/completions", body, read=read)
                if status not in (None, 200, 429):
                    errors.append(f"storm client {i}: HTTP {status}")
                if status == 200:
                    done["answered_before_drop"] += 1
                done["dropped"] += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported
                errors.append(f"storm client {i}: {type(e).__name__}: {e}")

    # Waves of `clients` until the time is spent; after each, the server settles and its RSS
    # and descriptors are read, so growth from wave to wave (a leak) shows apart from warm-up.
    start = time.time()
    waves = []
    while not waves or time.time() - start < args.seconds:
        offset = len(waves) * args.clients
        tasks = [asyncio.create_task(one(offset + i)) for i in range(args.clients)]
        await asyncio.wait_for(asyncio.gather(*tasks), args.seconds + 60)
        await settle(server)
        waves.append((server.rss_mib(), server.fds()))
    return {"clients_per_wave": args.clients, "waves": len(waves),
            "clients": args.clients * len(waves), "concurrency": args.concurrency,
            "seconds": round(time.time() - start, 1),
            "rss_mib_after_wave_1": round(waves[0][0], 1),
            "rss_mib_after_last_wave": round(waves[-1][0], 1),
            "fds_after_each_wave": sorted(set(f for _, f in waves)), **done}


async def soak(server, model, args, errors):
    counts = {"stream": 0, "complete": 0, "n2_stop": 0, "abandoned": 0, "tokenize": 0,
              "health": 0, "rejected_429": 0}
    stop_at = time.time() + args.seconds

    async def worker(w):
        rng = random.Random(w)
        i = 0
        while time.time() < stop_at:
            i += 1
            kind = rng.choice(["stream", "stream", "complete", "n2_stop", "abandoned",
                               "tokenize", "health"])
            try:
                if kind == "stream":
                    status, got = await request(server, "POST", "/v1/chat/completions",
                                                chat(model, f"Worker {w} asks {i}", max_tokens=64,
                                                     stream=True))
                    ok = status == 200 and b"[DONE]" in got
                elif kind == "complete":
                    status, got = await request(server, "POST", "/v1/completions",
                                                {"model": model, "prompt": f"In the day {i}",
                                                 "max_tokens": 32})
                    ok = status == 200
                elif kind == "n2_stop":
                    status, got = await request(server, "POST", "/v1/chat/completions",
                                                chat(model, "And it came to pass", max_tokens=48,
                                                     n=2, stop=["\n", "Lord"], temperature=0.8))
                    ok = status == 200
                elif kind == "abandoned":
                    status, got = await request(server, "POST", "/v1/chat/completions",
                                                chat(model, "Begin", max_tokens=200, stream=True,
                                                     ignore_eos=True), read=rng.randint(1, 4))
                    ok = status == 200
                elif kind == "tokenize":
                    status, got = await request(server, "POST", "/tokenize",
                                                {"model": model, "prompt": "hello " * (i % 50)})
                    ok = status == 200
                else:
                    status, got = await request(server, "GET", "/health")
                    ok = status == 200
                if status == 429:
                    counts["rejected_429"] += 1
                elif ok:
                    counts[kind] += 1
                else:
                    errors.append(f"soak {kind}: HTTP {status}: {got[-200:]!r}")
            except Exception as e:  # noqa: BLE001
                errors.append(f"soak {kind}: {type(e).__name__}: {e}")

    start = time.time()
    await asyncio.gather(*(worker(w) for w in range(args.streams)))
    return {"streams": args.streams, "seconds": round(time.time() - start, 1), **counts}


# ---------------------------------------------------------------- driver


async def main_async(args):
    server = Server(args.bin, args.server_arg)
    try:
        _, raw = await request(server, "GET", "/v1/models")
        model = json.loads(raw.split(b"\r\n\r\n", 1)[1])["data"][0]["id"]
        # Warm up (first-request allocations are not leaks), then take the baseline.
        await request(server, "POST", "/v1/completions",
                      {"model": model, "prompt": "warm", "max_tokens": 4})
        await asyncio.sleep(1)
        base_rss, base_fds = server.rss_mib(), server.fds()
        errors = []
        sampler = Sampler(server)
        sampling = asyncio.create_task(sampler.run())
        load = storm if args.command == "storm" else soak
        summary = await load(server, model, args, errors)
        sampler.running = False
        await sampling
        after = await settle(server)
        await asyncio.sleep(1.5)  # connections closing, refused sockets lingering
        end_rss, end_fds = server.rss_mib(), server.fds()
        half = len(sampler.rss) // 2
        report = {
            "load": args.command, "model": model, **summary,
            "errors": len(errors), "error_samples": errors[:10],
            "rss_mib": {"baseline": round(base_rss, 1), "peak": round(max(sampler.rss or [0]), 1),
                        "end": round(end_rss, 1),
                        "second_half_growth": round(max(sampler.rss[half:] or [0])
                                                    - (sampler.rss[half] if sampler.rss else 0), 1)},
            "fds": {"baseline": base_fds, "peak": max(sampler.fds or [0]), "end": end_fds},
            "after_load": after,
        }
        leaks = []
        if end_fds > base_fds:
            leaks.append(f"{end_fds - base_fds} file descriptors more than at the start")
        if after["vllm:num_requests_running"] or after["vllm:num_requests_waiting"]:
            leaks.append("sequences still running or waiting after the load")
        if after["vllm:kv_cache_usage_perc"]:
            leaks.append("KV blocks still in use after the load")
        report["leaks"] = leaks
        return report
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["storm", "soak"])
    p.add_argument("--bin", default=str(ROOT / "target" / "release" / "sluice"))
    p.add_argument("--server-arg", action="append", default=[])
    p.add_argument("--clients", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--streams", type=int, default=32)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--json")
    args = p.parse_args()
    if args.seconds is None:
        args.seconds = 60.0 if args.command == "storm" else 120.0
    report = asyncio.run(main_async(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    sys.exit(1 if report["leaks"] or report["errors"] else 0)


if __name__ == "__main__":
    main()
