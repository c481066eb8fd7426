#!/usr/bin/env python3
"""Summarizes bench/agent-replay.sh's output: summed time to first token per configuration, the
first turn of each session, the longest warm turn against the cold probe, and what the disk tier
read per token against what computing costs.

    python3 bench/agent_replay_report.py bench/out/replay
"""
import json
import os
import sys
from collections import defaultdict


def metrics(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        name, value = line.rsplit(" ", 1)
        out[name.split("{")[0]] = float(value)
    return out


def main():
    root = sys.argv[1]
    rows = [json.loads(line) for line in open(os.path.join(root, "turns.jsonl"))]
    by_label = defaultdict(list)
    for r in rows:
        by_label[r["label"]].append(r)
    cold = by_label.get("sluice cold probe", [])
    cold_s = cold[-1]["ttft_s"] if cold else None
    cold_tokens = cold[-1]["prompt_tokens"] if cold else None
    print("| configuration | turns | summed TTFT | first turn of each session | last turn (~max context) | cached tokens, last turn |")
    print("|---|---:|---:|---|---|---:|")
    for label, turns in by_label.items():
        if label == "sluice cold probe":
            continue
        firsts = [r for r in turns if r["turn"] == 0]
        last_turn = max(r["turn"] for r in turns)
        lasts = [r for r in turns if r["turn"] == last_turn]
        total = sum(r["ttft_s"] for r in turns)
        print(f"| {label} | {len(turns)} | {total:.1f} s | "
              + ", ".join(f"{r['ttft_s']:.2f}" for r in firsts) + " s | "
              + ", ".join(f"{r['ttft_s']:.2f}" for r in lasts) + f" s ({lasts[0]['prompt_tokens']} tokens) | "
              + ", ".join(str(r["cached_tokens"]) for r in lasts) + " |")
    if cold_s:
        print(f"\ncold probe: {cold_tokens} tokens, nothing cached: TTFT {cold_s:.1f} s "
              f"({cold_tokens / cold_s:.0f} tokens/s)")
    totals = {label: sum(r["ttft_s"] for r in turns) for label, turns in by_label.items()}

    def both(prefix):
        return totals.get(prefix, 0) + totals.get(prefix + ", after restart", 0)

    llama = both("llama-server")
    for label in ["sluice default", "sluice disk tier"]:
        if llama and both(label):
            print(f"{label} (both passes) vs llama-server (both passes): "
                  f"{both(label):.1f} s vs {llama:.1f} s, {llama / both(label):.1f}x lower")
    # Over the turns llama-server completed (a run may be cut short: its turns take longest).
    if by_label.get("llama-server"):
        common = {(r["session"], r["turn"]) for r in by_label["llama-server"]}
        peer = sum(r["ttft_s"] for r in by_label["llama-server"])
        print(f"\nover the {len(common)} turns llama-server completed (its first pass: {peer:.1f} s):")
        for label, turns in by_label.items():
            if label.startswith("llama-server") or label == "sluice cold probe":
                continue
            mine = sum(r["ttft_s"] for r in turns if (r["session"], r["turn"]) in common)
            print(f"  {label}: {mine:.1f} s, {peer / mine:.1f}x lower than llama-server")
    m = metrics(os.path.join(root, "metrics-disk-2.txt"))
    read_s, hits = m.get("sluice:kv_disk_read_seconds_total"), m.get("sluice:prefix_cache_disk_hits_total")
    if read_s and hits and cold_s:
        per_read = read_s / hits
        per_compute = cold_s / cold_tokens
        print(f"disk tier after restart: {hits:.0f} tokens read back in {read_s:.3f} s "
              f"({per_read * 1e6:.1f} us/token) vs computing {per_compute * 1e6:.0f} us/token "
              f"at the cold probe's length: {per_compute / per_read:.0f}x faster")


if __name__ == "__main__":
    main()
