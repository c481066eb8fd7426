#!/usr/bin/env python3
"""A long prompt against one running OpenAI-compatible server: its time to first token alone,
and what it does to streams that are decoding when it arrives (and they to it).

    python3 bench/long_prompt.py --url http://127.0.0.1:8191 --model NAME --label sluice \
        --prompt-words 8000 --decoders 15 --out results.jsonl

Every long prompt is different (seeded common English words, about one token each, led by a
random nonce), so no server answers it from a prompt cache; `usage.prompt_tokens` says how
long it really was. Steps:
1. `--alone` long prompts one after another, each `max_tokens` 1: the unloaded time to first
   token (the whole request: prefill plus one token).
2. `--decoders` streams (a short prompt, greedy, `ignore_eos`, long `max_tokens`) start; after
   `--warmup` seconds their inter-token gaps are recorded for `--window` seconds (decoding
   alone); then one more long prompt is sent and the gaps recorded while it is in flight
   (decoding beside it), with its own time to first token.
With `--image-size N` the "long prompt" is instead one chat request carrying a new N x N image
and a short question (what a screenshot does to the streams: the image is encoded before its
prompt is prefilled).
Appends one JSON line to `--out` with the figures (p50/p99 gaps in ms, TTFT in s).
"""
import argparse
import base64
import io
import json
import random
import statistics
import threading
import time
import urllib.request

WORDS = (
    "the of and to in is was that for on with as by at from his her they this have had are "
    "not but be which one all were when we there can an your more their if will would about "
    "out up them into has time some could these two may first then do any like my now over "
    "such our man me even most made after also did many before must through back years where "
    "much way well down should because each just those people how too little state good very "
    "make world still own see men work long get here between both life being under never day "
    "same another know while last might us great old year off come since against go came "
    "right used take three house river water music window garden letter morning system "
    "number market table course country doctor paper story report record minute rather"
).split()


def long_prompt(words, seed):
    rng = random.Random(seed)
    nonce = f"Note {random.Random().getrandbits(64):x}."
    return nonce + " " + " ".join(rng.choice(WORDS) for _ in range(words))


def post(url, body, timeout=3600):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)


def one_long(args, seed):
    if args.image_size:
        from vision_bench import png
        url = "data:image/png;base64," + base64.b64encode(png(seed, args.image_size)).decode()
        route, body = "/v1/chat/completions", {"model": args.model, "max_tokens": 1,
                                               "temperature": 0, "messages": [{
            "role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                        {"type": "text", "text": "What is in this image?"}]}]}
    else:
        route, body = "/v1/completions", {"model": args.model, "max_tokens": 1,
                                          "prompt": long_prompt(args.prompt_words, seed),
                                          "temperature": 0, "cache_prompt": False}
    start = time.perf_counter()
    with post(args.url + route, body) as response:
        reply = json.load(response)
    return {"ttft_s": time.perf_counter() - start,
            "prompt_tokens": reply.get("usage", {}).get("prompt_tokens")}


def decoder(args, index, stamps, stop):
    body = {"model": args.model, "prompt": f"Stream {index}: tell a long story about the river.",
            "max_tokens": args.decode_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}
    with post(args.url + "/v1/completions", body) as response:
        for line in io.TextIOWrapper(response, encoding="utf-8"):
            if stop.is_set():
                return
            line = line.strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[6:])
                if event.get("choices"):
                    stamps.append(time.perf_counter())


def gaps_within(all_stamps, start, end):
    """Inter-token gaps (ms) of every stream whose later token falls in [start, end]."""
    out = []
    for stamps in all_stamps:
        s = list(stamps)
        out += [(b - a) * 1e3 for a, b in zip(s, s[1:]) if start <= b <= end]
    return out


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--prompt-words", type=int, default=8000)
    ap.add_argument("--image-size", type=int, default=0,
                    help="send an image of this many pixels a side instead of a long prompt")
    ap.add_argument("--alone", type=int, default=1, help="long prompts timed alone first")
    ap.add_argument("--decoders", type=int, default=15)
    ap.add_argument("--decode-tokens", type=int, default=4000)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stamps", help="also write every stream's token times (s) to this file")
    args = ap.parse_args()

    alone = [one_long(args, 1000 + i) for i in range(args.alone)]
    result = {"label": args.label, "prompt_words": args.prompt_words,
              "image_size": args.image_size, "alone": alone}
    if args.decoders:
        stop = threading.Event()
        all_stamps = [[] for _ in range(args.decoders)]
        threads = [threading.Thread(target=decoder, args=(args, i, all_stamps[i], stop),
                                    daemon=True) for i in range(args.decoders)]
        for t in threads:
            t.start()
        time.sleep(args.warmup)
        w0 = time.perf_counter()
        time.sleep(args.window)
        w1 = time.perf_counter()
        loaded = one_long(args, 2000)
        w2 = time.perf_counter()
        time.sleep(args.window)
        w3 = time.perf_counter()
        stop.set()
        before, during = gaps_within(all_stamps, w0, w1), gaps_within(all_stamps, w1, w2)
        after = gaps_within(all_stamps, w2, w3)
        around = before + after
        if args.stamps:
            with open(args.stamps, "w") as f:
                json.dump({"window": [w0, w1, w2, w3],
                           "streams": [list(s) for s in all_stamps]}, f)
        result.update({
            "decoders": args.decoders,
            "gaps_alone_ms": {"n": len(before), "p50": pct(before, 0.5), "p99": pct(before, 0.99),
                              "mean": statistics.mean(before) if before else None},
            "gaps_beside_prompt_ms": {"n": len(during), "p50": pct(during, 0.5),
                                      "p99": pct(during, 0.99),
                                      "max": max(during) if during else None},
            "gaps_after_ms": {"n": len(after), "p50": pct(after, 0.5), "p99": pct(after, 0.99)},
            "gaps_alone_around_ms": {"n": len(around), "p50": pct(around, 0.5),
                                     "p99": pct(around, 0.99)},
            "loaded": loaded,
        })
    with open(args.out, "a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
