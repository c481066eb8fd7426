#!/usr/bin/env python3
"""Writes the GGUF fixtures under fixtures/gguf/ from the Hugging Face fixtures.

- `<fixture>-f16.gguf` for every fixture in fixtures/models (and `llama-f32.gguf`), converted
  with llama.cpp's own converter (../shared/peers/to-gguf.py): the Rust tests check that sluice
  gives the same logits from these as from the safetensors directories.
- `llama-split-0000N-of-00003.gguf`: the llama fixture in f16 written as a split set (the
  converter's `--split-max-tensors`), which must load as one model equal to `llama-f16.gguf`.
- `qwen2-q256`, a Qwen2-shaped fixture whose rows are multiples of 256 (so every K-quant
  applies), written like the others by make_fixtures.py (with reference.json), then converted
  to GGUF f16 and quantized by llama-quantize to every type sluice loads.
- `qwen3-moe-q256`, a Qwen3-MoE fixture shaped the same way (hidden and expert width 256, every
  layer sparse, as llama.cpp's `qwen3moe` requires: the `qwen3-moe` fixture's dense layer has no
  GGUF name), converted to f16 (stacked `ffn_*_exps` tensors) and quantized to MOE_QUANT_TYPES.
- `gemma3-p6` quantized to Q8_0 and Q4_K_M (its rows fall back to legacy types).
- The converter cannot express `qwen3-moe`'s dense layer 1, so that fixture is skipped.

Usage: python3 scripts/make_gguf_fixtures.py [--skip-model] [--force]  (needs torch, transformers, gguf, sentencepiece and
the llama.cpp build of ../shared/peers/llama-server.sh for llama-quantize)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen3MoeConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "fixtures" / "models"
OUT = ROOT / "fixtures" / "gguf"
PEERS = ROOT.parent / "shared" / "peers"
QUANT_MODEL = "qwen2-q256"
# llama-quantize presets: each one's mix of tensor types is what users' files hold.
QUANT_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"]
MOE_QUANT_MODEL = "qwen3-moe-q256"
MOE_QUANT_TYPES = ["Q8_0", "Q4_K_M"]
# Every fixture llama-quantize writes, and the presets. Gemma 3's rows (64, 128) are not whole
# K-quant super-blocks: its Q4_K_M file holds llama-quantize's fallbacks (q5_0, q5_1, q8_0), as
# users' files of such shapes do. (llama.cpp cannot load the phi3 fixture's GPT-2-style
# vocabulary, so there is no llama.cpp band to hold a quantized phi3 file to.)
QUANTIZED = {
    QUANT_MODEL: QUANT_TYPES,
    MOE_QUANT_MODEL: MOE_QUANT_TYPES,
    "gemma3-p6": ["Q8_0", "Q4_K_M"],
}
# mlp_only_layers: GGUF's qwen3moe has no dense layers. gemma3: its sliding pattern 3 and
# query_pre_attn_scalar 24 have no GGUF keys (llama.cpp assumes 6 and head_dim); gemma3-p6 is
# the convertible one.
UNCONVERTIBLE = {"qwen3-moe", "gemma3"}
# Multimodal fixtures: their language model and projector files come from make_mmproj_fixtures.py.
MULTIMODAL = {"gemma3-vision", "qwen2_5-vl"}


def llama_bin() -> Path:
    out = subprocess.run([str(PEERS / "llama-server.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def convert(model_dir: Path, out: Path, outtype: str, *extra: str) -> None:
    """Runs llama.cpp's converter on a copy whose tokenizer the converter's AutoTokenizer reads as
    the plain tokenizer.json: Qwen2's tokenizer class otherwise adds an `<|endoftext|>` unknown
    token past the vocabulary."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / model_dir.name
        shutil.copytree(model_dir, copy)
        cfg_path = copy / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        # The Phi-3 converter reads a SentencePiece tokenizer.model unless the class is GPT-2's.
        phi3 = json.loads((copy / "config.json").read_text()).get("model_type") == "phi3"
        cfg["tokenizer_class"] = "GPT2Tokenizer" if phi3 else "TokenizersBackend"
        cfg.setdefault("unk_token", cfg.get("pad_token"))
        cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
        subprocess.run(
            [sys.executable, str(PEERS / "to-gguf.py"), str(copy), str(out), "--outtype", outtype, *extra],
            check=True,
            capture_output=True,
        )
    if out.exists():
        print(f"{out.name}: {out.stat().st_size} bytes")


def write_quant_model() -> None:
    tokenizer = make_fixtures.train_tokenizer()
    over = dict(
        tie_word_embeddings=False,
        hidden_size=256,
        intermediate_size=256,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    make_fixtures.write_fixture(
        QUANT_MODEL, Qwen2Config, over, torch.float16, "5.x", None, tokenizer=tokenizer, seed=2000
    )


def write_moe_quant_model() -> None:
    tokenizer = make_fixtures.train_tokenizer()
    over = dict(
        tie_word_embeddings=False,
        hidden_size=256,
        intermediate_size=256,
        moe_intermediate_size=256,
        num_experts=4,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        mlp_only_layers=[],
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
    )
    make_fixtures.write_fixture(
        MOE_QUANT_MODEL, Qwen3MoeConfig, over, torch.bfloat16, "4.x", None, tokenizer=tokenizer, seed=3000
    )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if "--skip-model" not in sys.argv:
        write_quant_model()
        write_moe_quant_model()
    for name in sorted(p.name for p in MODELS.iterdir()):
        out = OUT / f"{name}-f16.gguf"
        if name in UNCONVERTIBLE or name in MULTIMODAL:
            continue
        if name in (QUANT_MODEL, MOE_QUANT_MODEL) or "--force" in sys.argv or not out.exists():
            convert(MODELS / name, out, "f16")
    if "--force" in sys.argv or not (OUT / "llama-f32.gguf").exists():
        convert(MODELS / "llama", OUT / "llama-f32.gguf", "f32")
    if "--force" in sys.argv or not list(OUT.glob("llama-split-*.gguf")):
        convert(MODELS / "llama", OUT / "llama-split.gguf", "f16", "--split-max-tensors", "8")
        print(", ".join(sorted(p.name for p in OUT.glob("llama-split-*.gguf"))))
    for name in QUANTIZED:
        quantize_fixture(name)


def quantize_fixture(name: str) -> None:
    """`<name>-<type>.gguf` for each of the fixture's presets, from its f16 GGUF."""
    quantize = llama_bin() / "llama-quantize"
    base = OUT / f"{name}-f16.gguf"
    for qtype in QUANTIZED[name]:
        out = OUT / f"{name}-{qtype.lower()}.gguf"
        subprocess.run([str(quantize), str(base), str(out), qtype], check=True, capture_output=True)
        print(f"{out.name}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
