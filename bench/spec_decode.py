#!/usr/bin/env python3
"""Output tokens per second of one server under a speculative-decoding workload, streamed
`/v1/completions`, greedy, `ignore_eos`, the same prompts for every server.

Workloads:
  edit   an "edit a file" request: the prompt shows a document and asks for it back; for a
         random-weight model the document is the model's own greedy continuation of the
         request's opening (fetched first, untimed), so the reply restates what the prompt holds
         (`--document-tokens` long), as an agent's file rewrite does with a real model.
  chat   free text: a prompt of words never repeated, nothing to look up.

    python3 bench/spec_decode.py --url http://127.0.0.1:8000 --model m --label sluice \
        --workload edit --streams 1 --requests 4 --max-tokens 256 --out out.jsonl

Every prompt is sent once first (one token, untimed), so the timed requests find it in the
server's prompt cache. Each stream sends its requests one after another; prints and appends (label, workload, streams,
tokens, seconds, tokens/s) per request and the aggregate. Uses only the standard library.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

WORDS = (
    "file path line error test build function return value string number list map type "
    "module import class method field struct trait impl crate config option result async "
    "await thread lock buffer stream request response header status client server cache "
    "token block index query parse format write read open close check assert expect match "
    "update delete insert select table column schema version commit branch merge diff patch"
).split()


def post(url, path, body, stream):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raise RuntimeError(f"{res.status}: {res.read()[:500]!r}")
    if not stream:
        return json.loads(res.read())
    return res


def complete(url, model, prompt, max_tokens, temperature=0.0, seed=0):
    """Streams one completion (greedy unless `temperature`); returns (text, tokens, seconds from
    first token to last)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
            "seed": seed, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    res = post(url, "/v1/completions", body, True)
    text, first, last, tokens = [], None, None, None
    for raw in res:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        for c in chunk.get("choices", []):
            if c.get("text"):
                now = time.monotonic()
                first = first or now
                last = now
                text.append(c["text"])
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    return "".join(text), tokens, (last - first) if first else 0.0


def opening(rng, words):
    return "Here is the file, then the same file again with the fix applied.\n\n" + " ".join(
        rng.choice(WORDS) for _ in range(words))


def edit_prompt(args, seed):
    """The opening, the document it leads to, then the opening again: what follows is the
    document once more. With --fixed-point N the document is then replaced N times by what the
    model writes after opening + document + opening, which moves it towards a text the model
    restates exactly (a random-weight model does not restate a document it was shown)."""
    rng = random.Random(seed)
    head = opening(rng, 40)
    document, _, _ = complete(args.url, args.model, head, args.document_tokens)
    for i in range(args.fixed_point):
        again, _, _ = complete(args.url, args.model, head + document + "\n\n" + head,
                               args.document_tokens)
        same = next((k for k, (a, b) in enumerate(zip(document, again)) if a != b),
                    min(len(document), len(again)))
        print(f"fixed point {i + 1}: the first {same} of {len(again)} characters restated",
              file=sys.stderr)
        document = again
    return head + document + "\n\n" + head


def chat_prompt(seed):
    rng = random.Random(seed)
    return "Tell me about " + " ".join(rng.choice(WORDS) for _ in range(60)) + "."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--workload", choices=["edit", "chat"], required=True)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--requests", type=int, default=3, help="per stream")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--document-tokens", type=int, default=1500)
    p.add_argument("--fixed-point", type=int, default=0,
                   help="edit workload: rewrite the document this many times towards the "
                        "model's own restatement")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature of the timed requests (seeded per request)")
    p.add_argument("--out")
    p.add_argument("--prompts-file",
                   help="reuse the prompts saved here (made and saved on the first run), so "
                        "every server gets the very same text")
    args = p.parse_args()
    saved = {}
    if args.prompts_file:
        try:
            with open(args.prompts_file) as f:
                saved = json.load(f)
        except FileNotFoundError:
            pass
    prompts = {}
    for s in range(args.streams):
        for r in range(args.requests):
            seed = 1000 * s + r
            key = f"{args.workload}-{seed}"
            if key not in saved:
                saved[key] = edit_prompt(args, seed) if args.workload == "edit" else chat_prompt(seed)
            prompts[(s, r)] = saved[key]
    if args.prompts_file:
        with open(args.prompts_file, "w") as f:
            json.dump(saved, f)
    # Each prompt once, one token, untimed: both servers then hold it in their prompt caches and
    # the timed requests measure the decoding.
    for prompt in prompts.values():
        complete(args.url, args.model, prompt, 1)
    results, lock = [], threading.Lock()

    def stream(s):
        for r in range(args.requests):
            _, tokens, seconds = complete(args.url, args.model, prompts[(s, r)], args.max_tokens,
                                          args.temperature, 1000 * s + r)
            with lock:
                results.append((tokens, seconds))

    started = time.monotonic()
    threads = [threading.Thread(target=stream, args=(s,)) for s in range(args.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    tokens = sum(t for t, _ in results)
    per_request = sorted(t / s for t, s in results if s > 0)
    row = {"label": args.label, "workload": args.workload, "streams": args.streams,
           "requests": len(results), "tokens": tokens, "wall_s": round(wall, 2),
           "tok_s": round(tokens / wall, 2), "temperature": args.temperature,
           "median_stream_tok_s": round(per_request[len(per_request) // 2], 2)}
    print(json.dumps(row))
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
