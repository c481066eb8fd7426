#!/usr/bin/env python3
"""Images in, text out, against one running OpenAI-compatible server: time to first token of an
image plus a question, and images per second when `--concurrency` clients send them at once.

Every request carries a different image (PNG, made here from the request's index, `--size`
pixels on a side), so no server answers from an encoded-image cache; the question is short and
the same. Streamed chat completions, greedy, `ignore_eos`, `--max-tokens` each. Each client sends
`--requests` requests one after another; the window is from the first send to the last reply.

    python3 bench/vision_bench.py --url http://127.0.0.1:8191 --model NAME --label sluice \
        --concurrency 8 --requests 2 --out results.jsonl

Appends one JSON line to `--out`: label, concurrency, requests, TTFT p50/min/max (s), total
latency p50, images/s (requests over the window), output tokens/s, and every request's figures.
"""
import argparse
import base64
import io
import json
import statistics
import struct
import threading
import time
import urllib.request
import zlib


def png(index, size):
    """A `size` x `size` RGB PNG that differs for every index (a gradient with a stripe pattern
    keyed on the index), written with the standard library only."""
    rows = []
    for y in range(size):
        row = bytearray([0])
        for x in range(size):
            row += bytes(((x * 255 // size + index * 37) % 256, (y * 255 // size) % 256,
                          ((x + y + index * 11) // (1 + index % 7)) % 256))
        rows.append(bytes(row))
    raw = zlib.compress(b"".join(rows), 6)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def one_request(url, model, image, max_tokens, question):
    data_url = "data:image/png;base64," + base64.b64encode(image).decode()
    body = {
        "model": model,
        "stream": True,
        "temperature": 0,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_url}},
            {"type": "text", "text": question},
        ]}],
    }
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    first, tokens, prompt_tokens = None, 0, None
    with urllib.request.urlopen(request, timeout=3600) as response:
        for line in io.TextIOWrapper(response, encoding="utf-8"):
            line = line.strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            for choice in event.get("choices", []):
                if choice.get("delta", {}).get("content"):
                    tokens += 1
                    if first is None:
                        first = time.perf_counter() - start
            if event.get("usage"):
                prompt_tokens = event["usage"].get("prompt_tokens")
    total = time.perf_counter() - start
    return {"ttft": first, "total": total, "chunks": tokens, "prompt_tokens": prompt_tokens}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, default=2, help="per client")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--size", type=int, default=640)
    parser.add_argument("--seed", type=int, default=0, help="offsets the image indices")
    parser.add_argument("--question", default="Describe this image in one sentence.")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    n = args.concurrency * args.requests
    images = [png(args.seed * 1000 + i, args.size) for i in range(n)]
    results = [None] * n
    errors = []

    def client(c):
        for r in range(args.requests):
            i = c * args.requests + r
            try:
                results[i] = one_request(args.url, args.model, images[i], args.max_tokens, args.question)
            except Exception as e:  # noqa: BLE001: recorded, the run goes on
                errors.append(f"request {i}: {e}")

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    window = time.perf_counter() - start
    done = [r for r in results if r and r["ttft"] is not None]
    ttfts = [r["ttft"] for r in done]
    line = {
        "label": args.label, "concurrency": args.concurrency, "requests": n, "ok": len(done),
        "errors": errors, "window_s": round(window, 2),
        "ttft_p50": round(statistics.median(ttfts), 3) if ttfts else None,
        "ttft_min": round(min(ttfts), 3) if ttfts else None,
        "ttft_max": round(max(ttfts), 3) if ttfts else None,
        "total_p50": round(statistics.median(r["total"] for r in done), 3) if done else None,
        "images_per_s": round(len(done) / window, 4),
        "output_tok_per_s": round(sum(r["chunks"] for r in done) / window, 2),
        "prompt_tokens": sorted({r["prompt_tokens"] for r in done if r["prompt_tokens"]}),
        "per_request": results,
    }
    with open(args.out, "a") as f:
        f.write(json.dumps(line) + "\n")
    summary = {k: v for k, v in line.items() if k != "per_request"}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
