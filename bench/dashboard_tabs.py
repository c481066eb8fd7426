"""Does an open dashboard slow decoding? Runs `sluice bench` against one server, rotating three
conditions per round: nothing else (`none`); the HTTP requests of N dashboards without a
browser (`poll`: per dashboard, /metrics every second and /admin/models every two, what a
dashboard in a browser on another machine costs the server); and N headless Chromium windows
showing the dashboard on this machine (`tabs`: the same requests plus the browsers' own CPU on
the cores the server uses). Prints decode throughput and inter-token latency per run.

    .venv/bin/python bench/dashboard_tabs.py [--tabs 3] [--rounds 3] [--duration-secs 15]

Needs the browser test dependencies (./scripts/test installs them) and target/debug/sluice.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from conftest import CHAT_MODEL, Server, make_driver, open_page, wait  # noqa: E402


def bench(server, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [args.bin, "bench", "--base-url", f"{server.url}/v1", "--model", CHAT_MODEL,
             "--concurrency", str(args.concurrency), "--duration-secs", str(args.duration_secs),
             "--warmup-secs", "2", "--prompt-tokens", "32", "--output-tokens", "128", "--out", out.name],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def poll_like_dashboards(server, n, stop):
    """N threads issuing the dashboard's requests on its schedule until `stop` is set."""
    def one():
        tick = 0
        while not stop.wait(1.0):
            server.get("/metrics")
            if tick % 2 == 0:
                server.get("/admin/models")
            tick += 1
    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def cpu_seconds(pids):
    """User plus system CPU seconds of these processes and all their descendants."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    ticks, stack = 0, list(pids)
    while stack:
        pid = stack.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            pass
        stack.extend(children.get(pid, []))
    return ticks / os.sysconf("SC_CLK_TCK")


def idle_dashboard_cpu(secs):
    """CPU share of one visible dashboard's browser and of the server it polls, no traffic."""
    server = Server()
    driver = make_driver()
    try:
        open_page(driver, server.url, "#/dashboard")
        time.sleep(3)
        browser_pid = driver.service.process.pid
        b0, s0, t0 = cpu_seconds([browser_pid]), cpu_seconds([server.proc.pid]), time.time()
        time.sleep(secs)
        dt = time.time() - t0
        print(f"one dashboard over {dt:.0f} s: browser {100 * (cpu_seconds([browser_pid]) - b0) / dt:.2f}% "
              f"of a core, server {100 * (cpu_seconds([server.proc.pid]) - s0) / dt:.3f}% of a core")
    finally:
        driver.quit()
        server.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tabs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--duration-secs", type=int, default=15)
    p.add_argument("--bin", default=str(ROOT / "target" / "debug" / "sluice"))
    p.add_argument("--idle-cpu-secs", type=int, default=0,
                   help="instead: measure one idle dashboard's CPU (browser and server) for this long")
    args = p.parse_args()
    if args.idle_cpu_secs:
        idle_dashboard_cpu(args.idle_cpu_secs)
        return
    server = Server()
    results = {"none": [], "poll": [], "tabs": []}
    try:
        for _ in range(args.rounds):
            for mode in results:
                drivers = []
                stop = threading.Event()
                if mode == "poll":
                    poll_like_dashboards(server, args.tabs, stop)
                if mode == "tabs":
                    for _ in range(args.tabs):
                        d = make_driver()
                        open_page(d, server.url, "#/dashboard")
                        wait(d, lambda d: int(d.find_element("id", "chart-tokens").get_attribute("data-points")) >= 2)
                        drivers.append(d)
                try:
                    r = bench(server, args)
                finally:
                    stop.set()
                    for d in drivers:
                        d.quit()
                level = r["levels"][0]
                results[mode].append(level)
                print(f"{mode:>4}: {level['output_tokens_per_s']:8.1f} out tok/s, ITL p50 "
                      f"{level['itl_ms']['p50']:.3f} ms p99 {level['itl_ms']['p99']:.3f} ms, "
                      f"errors {level['errors']}", flush=True)
                time.sleep(1)
    finally:
        server.stop()
    mean = {m: statistics.mean(x["output_tokens_per_s"] for x in v) for m, v in results.items()}
    itl = {m: statistics.mean(x["itl_ms"]["p50"] for x in v) for m, v in results.items()}
    for mode in ("poll", "tabs"):
        print(f"mean out tok/s: none {mean['none']:.1f}, {mode} x{args.tabs} {mean[mode]:.1f} "
              f"(ratio {mean[mode] / mean['none']:.3f}); ITL p50 ms: {itl['none']:.3f} vs {itl[mode]:.3f}")


if __name__ == "__main__":
    main()
