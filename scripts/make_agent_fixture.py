#!/usr/bin/env python3
"""Writes fixtures/models/llama-agent: the llama-tools fixture (Hermes tool template, random
weights) changed so that real agent CLIs (Claude Code, Codex, opencode) can run whole sessions
against it in the test suite: a context of 131072 tokens (their system prompts and tool lists
are tens of thousands of tokens), and an answer of a few tokens (a random model otherwise writes
until a 32,000-token `max_tokens` runs out, minutes per request at a long context).

The short answers come from the weights, not from the server: residual dimension 0 carries a
constant (every token's embedding holds C there, and no layer writes to it), so after the final
norm it is always positive, and only the end-of-sequence token reads it in the (untied) output
head, with weight K. End-of-sequence then has a large logit at every position, while every other
token keeps its random one. C and K are chosen so that it is drawn within a few tokens at
temperature 1 (the script prints the measured chance on a few prompts).

Usage: python3 scripts/make_agent_fixture.py   (needs numpy, safetensors, torch, transformers)
"""

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "fixtures" / "models" / "llama-tools"
OUT = ROOT / "fixtures" / "models" / "llama-agent"
C, K, DIM = 20.0, 1.8, 0


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    config = json.loads((SOURCE / "config.json").read_text())
    config["max_position_embeddings"] = 131072
    config["tie_word_embeddings"] = False
    (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in ["chat_template.jinja", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json"]:
        shutil.copyfile(SOURCE / name, OUT / name)
    weights = {k: v.copy() for k, v in load_file(SOURCE / "model.safetensors").items()}
    embed = weights["model.embed_tokens.weight"]
    head = embed.copy()
    embed[:, DIM] = C
    for key, w in weights.items():
        if key.endswith("o_proj.weight") or key.endswith("down_proj.weight"):
            w[DIM, :] = 0.0
    weights["model.norm.weight"][DIM] = 1.0
    head[:, DIM] = 0.0
    eos = config["eos_token_id"]
    head[eos, DIM] = K
    weights["lm_head.weight"] = head
    save_file(weights, OUT / "model.safetensors", metadata={"format": "pt"})

    # The chance of end-of-sequence at each position of a few prompts, at temperature 1.
    model = AutoModelForCausalLM.from_pretrained(OUT, dtype=torch.float32)
    rng = np.random.default_rng(0)
    for length in (5, 50, 500):
        ids = torch.tensor([rng.integers(5, 512, size=length).tolist()])
        with torch.no_grad():
            probs = model(ids).logits[0].softmax(-1)[:, eos]
        print(f"prompt of {length}: P(eos) min {probs.min():.2f} mean {probs.mean():.2f}")


if __name__ == "__main__":
    main()
