#!/usr/bin/env python3
"""Replays coding-agent sessions against an OpenAI-compatible server and reports time to first
token per turn: what a user of Claude Code, Codex or the Agents SDK waits for on a CPU.

Every session starts with the same system prompt (instructions and tool definitions, about
--system-tokens tokens, as one agent's sessions share it) and a task of its own; each turn appends
a tool result of about --turn-tokens tokens and the assistant's tool call, then asks for the next
reply. Sessions are interleaved (s1 t1, s2 t1, s3 t1, s1 t2, ...) so that together they can
outgrow a server's prompt cache. The prompts are deterministic (seeded word lists, fixed assistant
turns), so both servers see the very same text; replies are short (--max-tokens), the model's
output is not fed back.

    python3 bench/agent_replay.py --url http://127.0.0.1:8000 --model m --label sluice \
        --sessions 3 --turns 10 --system-tokens 6000 --turn-tokens 1500 --out out.jsonl

Writes one JSON line per turn (label, session, turn, prompt_tokens, cached_tokens, ttft_s) and
prints a summary. Uses only the standard library.
"""
import argparse
import http.client
import json
import random
import sys
import time
import urllib.parse

WORDS = (
    "file path line error test build function return value string number list map type "
    "module import class method field struct trait impl crate config option result async "
    "await thread lock buffer stream request response header status client server cache "
    "token block index query parse format write read open close check assert expect match "
    "update delete insert select table column schema version commit branch merge diff patch"
).split()


def text_of(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def system_prompt(tokens_per_word, n_tokens, n_tools=24):
    rng = random.Random(1)
    tools = []
    for i in range(n_tools):
        props = {f"arg_{j}": {"type": "string", "description": text_of(rng, 12)} for j in range(4)}
        tools.append({"name": f"tool_{i}", "description": text_of(rng, 30), "parameters": props})
    head = "You are a coding agent working in a repository. Use the tools below.\n"
    body = json.dumps(tools, indent=1)
    words = int(n_tokens / tokens_per_word)
    # Pad (or cut) with guidance text to the wanted size.
    guidance = text_of(rng, max(0, words - len(body.split())))
    return head + body + "\n" + guidance + "\n"


def session_turns(session, turns, tokens_per_word, turn_tokens):
    rng = random.Random(1000 + session)
    task = f"User: task {session}: " + text_of(rng, 60) + "\n"
    steps = []
    for t in range(turns):
        result = f"Tool result {t}:\n" + text_of(rng, int(turn_tokens / tokens_per_word)) + "\n"
        call = f"Assistant: calling tool_{(session + t) % 24} with arg_0={text_of(rng, 6)}\n"
        steps.append((result, call))
    return task, steps


def stream_completion(url, model, prompt, max_tokens, timeout):
    parts = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    body = json.dumps({
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": True,
    })
    started = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    ttft, usage, timings = None, None, None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if ttft is None and chunk.get("choices"):
            ttft = time.perf_counter() - started
        usage = chunk.get("usage") or usage
        timings = chunk.get("timings") or timings
    total = time.perf_counter() - started
    conn.close()
    return ttft, total, usage, timings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="m")
    ap.add_argument("--label", required=True)
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--system-tokens", type=int, default=6000)
    ap.add_argument("--turn-tokens", type=int, default=1500)
    ap.add_argument("--tokens-per-word", type=float, default=1.0,
                    help="the tokenizer's tokens per word of this text (measure once)")
    ap.add_argument("--tools", type=int, default=24, help="tool definitions in the system prompt")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cold-probe", action="store_true",
                    help="send only session 0's last turn, behind a unique line so nothing of it "
                         "can be cached: the cold time to first token at the longest context")
    args = ap.parse_args()

    system = system_prompt(args.tokens_per_word, args.system_tokens, args.tools)
    sessions = [session_turns(s, args.turns, args.tokens_per_word, args.turn_tokens)
                for s in range(args.sessions)]
    rows = []
    if args.cold_probe:
        task, steps = sessions[0]
        nonce = f"Session {random.Random().getrandbits(64):x}.\n"
        plan = [(0, args.turns - 1, nonce + system + task + "".join(r + c for r, c in steps[:-1])
                 + steps[-1][0])]
    else:
        plan = [(s, t, system + task + "".join(r + c for r, c in steps[:t]) + steps[t][0])
                for t in range(args.turns) for s, (task, steps) in enumerate(sessions)]
    with open(args.out, "a") as out:
        for s, t, prompt in plan:
            ttft, total, usage, timings = stream_completion(
                args.url, args.model, prompt, args.max_tokens, args.timeout)
            details = (usage or {}).get("prompt_tokens_details") or {}
            cached = details.get("cached_tokens")
            if cached is None and timings:  # llama-server reports what it reused this way
                cached = timings.get("cache_n")
            row = {
                "label": args.label, "session": s, "turn": t,
                "prompt_tokens": (usage or {}).get("prompt_tokens"),
                "cached_tokens": cached, "ttft_s": round(ttft, 3), "total_s": round(total, 3),
            }
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps(row), flush=True)
    total_ttft = sum(r["ttft_s"] for r in rows)
    print(f"# {args.label}: {len(rows)} turns, summed TTFT {total_ttft:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
