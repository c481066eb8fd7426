#!/usr/bin/env python3
"""Records what llama.cpp computes on the quantized GGUF fixtures, for the Rust tests to hold
sluice to the same band: for every prefix of the qwen2-q256 reference prompt, llama-server's
next-token log-probabilities (all 512 tokens, before sampling), summarised per file as the KL
divergence from the transformers f32 reference (mean and max over positions) and the argmax
with its margin over the runner-up.

Usage: python3 scripts/llamacpp_reference.py [--model NAME]
(needs ../shared/peers/llama-server.sh's build). Writes fixtures/gguf/llamacpp-reference.json
for qwen2-q256 (the default), fixtures/gguf/llamacpp-reference-NAME.json for another fixture
(qwen3-moe-q256: stacked experts in Q8_0 and Q4_K_M; gemma3-p6 in Q8_0 and Q4_K_M).
"""

import contextlib
import json
import math
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GGUF = ROOT / "fixtures" / "gguf"
MODEL = "qwen2-q256"
FIRST_POSITION = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, body: dict) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/completion",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def log_softmax(row):
    m = max(row)
    z = math.log(sum(math.exp(v - m) for v in row)) + m
    return [v - z for v in row]


def kl(p_log, q_log):
    return sum(math.exp(p) * (p - q) for p, q in zip(p_log, q_log))


@contextlib.contextmanager
def llama_server(server: Path, model: Path, ctx: int, *extra: str):
    """A llama-server on `model` (one slot, two threads, `extra` flags), its port once healthy;
    stopped on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [str(server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
         "-c", str(ctx), "-np", "1", "-t", "2", "--no-webui", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait()


def distributions(server: Path, model: Path, prompt: list, vocab: int, ctx: int) -> list:
    with llama_server(server, model, ctx) as port:
        rows = []
        for end in range(FIRST_POSITION, len(prompt) + 1):
            # The reported log-probabilities are the raw logits' (post_sampling_probs is off);
            # the bias only makes the sampled token a whole character ("!"), since llama-server
            # reports nothing for a token that ends inside a UTF-8 sequence.
            out = post(port, {"prompt": prompt[:end], "n_predict": 1, "n_probs": vocab,
                              "temperature": 0, "cache_prompt": False,
                              "logit_bias": [[5, 1000.0]]})
            if "completion_probabilities" not in out:
                raise RuntimeError(f"{model.name}: unexpected answer {str(out)[:300]}")
            top = out["completion_probabilities"][0]["top_logprobs"]
            row = [-1e30] * vocab
            for entry in top:
                row[entry["id"]] = entry["logprob"]
            assert len(top) == vocab, f"{model.name}: {len(top)} of {vocab} log-probs"
            rows.append(row)
        return rows


def main() -> None:
    out = subprocess.run([str(ROOT.parent / "shared/peers/llama-server.sh")], check=True,
                         capture_output=True, text=True)
    server = Path(out.stdout.strip().splitlines()[-1]) / "llama-server"
    model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else MODEL
    ref = json.loads((ROOT / "fixtures/models" / model / "reference.json").read_text())
    config = json.loads((ROOT / "fixtures/models" / model / "config.json").read_text())
    # LongRoPE: llama.cpp picks the long factors when its context exceeds the original one
    # (transformers by the sequence's own length), so a fixture whose prompt fits the original
    # context is served with that context.
    ctx = config.get("original_max_position_embeddings") or 512
    prompt, logits = ref["prompt_ids"], ref["prompt_logits"]
    vocab = len(logits[0])
    # Row i of the reference is the distribution after prompt[:i + 1].
    reference = [log_softmax(logits[end - 1]) for end in range(FIRST_POSITION, len(prompt) + 1)]
    result = {"model": model, "first_position": FIRST_POSITION, "files": {}}
    for path in sorted(GGUF.glob(f"{model}-*.gguf")):
        rows = distributions(server, path, prompt, vocab, ctx)
        kls = [kl(p, q) for p, q in zip(reference, rows)]
        argmax, margin = [], []
        for row in rows:
            order = sorted(range(vocab), key=lambda t: -row[t])
            argmax.append(order[0])
            margin.append(round(row[order[0]] - row[order[1]], 6))
        result["files"][path.name] = {
            "mean_kl": sum(kls) / len(kls),
            "max_kl": max(kls),
            "argmax": argmax,
            "margin": margin,
        }
        print(f"{path.name}: mean KL {sum(kls) / len(kls):.3e}, max {max(kls):.3e}")
    name = "llamacpp-reference.json" if model == MODEL else f"llamacpp-reference-{model}.json"
    (GGUF / name).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
