#!/usr/bin/env python3
"""Prints a markdown table of one comparison folder: per concurrency level, each round's output
tokens/s and median TTFT for sluice and llama-server, and the median of the per-round ratios
(sluice / llama-server), so a figure survives a noisy hour.

    python3 bench/median_ratios.py bench/out/MODEL/WEIGHTS
"""
import json
import statistics
import sys
from pathlib import Path


def load(folder: Path, server: str) -> dict:
    runs = {}
    for path in sorted(folder.glob(f"{server}-r*.json")):
        round_no = int(path.stem.rsplit("-r", 1)[1])
        runs[round_no] = {lvl["concurrency"]: lvl for lvl in json.loads(path.read_text())["levels"]}
    return runs


def main() -> None:
    folder = Path(sys.argv[1])
    ours, peer = load(folder, "sluice"), load(folder, "llama-server")
    rounds = sorted(set(ours) & set(peer))
    if not rounds:
        print("(no paired rounds)")
        return
    levels = sorted(set.intersection(*(set(ours[r]) & set(peer[r]) for r in rounds)))
    print("| streams | sluice tok/s | llama-server tok/s | median ratio | sluice TTFT p50 ms | llama-server TTFT p50 ms | median TTFT ratio |")
    print("|---:|---|---|---:|---|---|---:|")
    for c in levels:
        tok_a = [ours[r][c]["output_tokens_per_s"] for r in rounds]
        tok_b = [peer[r][c]["output_tokens_per_s"] for r in rounds]
        ttft = lambda runs: [(runs[r][c].get("ttft_ms") or {}).get("p50") for r in rounds]
        ttft_a, ttft_b = ttft(ours), ttft(peer)
        ratio = statistics.median(a / b for a, b in zip(tok_a, tok_b) if b > 0) if any(tok_b) else float("nan")
        pairs = [(a, b) for a, b in zip(ttft_a, ttft_b) if a and b]
        ttft_ratio = statistics.median(a / b for a, b in pairs) if pairs else float("nan")
        fmt = lambda xs: " / ".join(f"{x:.1f}" if x is not None else "-" for x in xs)
        print(f"| {c} | {fmt(tok_a)} | {fmt(tok_b)} | **{ratio:.2f}x** | {fmt(ttft_a)} | {fmt(ttft_b)} | {ttft_ratio:.2f}x |")


if __name__ == "__main__":
    main()
