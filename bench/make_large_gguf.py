#!/usr/bin/env python3
"""Writes a random-weight GGUF file with the shapes of Llama-3.1-8B (32 layers, hidden 4096,
32 query / 8 key-value heads, MLP 14336, vocabulary 128256, untied output), in f16, streamed tensor
by tensor so that neither memory nor time grows with the model beyond one tensor at a time.

    bench/python bench/make_large_gguf.py OUT.gguf [--layers 32] [--seed 0] [--draft-of 32]

`--draft-of N --layers L` writes a draft model for the N-layer file of the same seed: its
embeddings, first L layers and output head are that file's very tensors (the same draws, the
layers after L drawn and dropped), so the draft guesses the target's tokens as often as L of its N
layers decide them: the knob for speculative decoding's acceptance rate.

Then `llama-quantize OUT.gguf OUT.q4_k_m.gguf Q4_K_M` makes the file both servers are measured on.
The tokenizer is the benchmark's byte-level BPE (bench/make_random_model.py: trained on the standard
library's docstrings, padded with filler words so every id decodes to visible text), written as
llama.cpp's converter writes a `gpt2` vocabulary; the chat template is ChatML. The weights are
scaled as in make_random_model.py so activations stay O(1); the text is meaningless, only the
speed and memory of serving such a file are of interest (never commit the output).
"""
import argparse
import math
import os
import sys

import numpy as np
from gguf import GGUFWriter, TokenType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_random_model import CHATML_TEMPLATE, SPECIAL_TOKENS, BOS_ID, EOS_ID, PAD_ID, build_tokenizer  # noqa: E402

SHAPE = dict(hidden=4096, ffn=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256,
             rope_theta=500000.0, eps=1e-5, context=131072)


def tokenizer_fields(writer, vocab_size):
    tokenizer = build_tokenizer(vocab_size)
    spec = tokenizer.to_str()
    import json

    model = json.loads(spec)["model"]
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in by_id]
    special = set(SPECIAL_TOKENS)
    types = [TokenType.CONTROL if t in special else TokenType.NORMAL for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_pad_token_id(PAD_ID)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)


def tensor_plan(layers, scale_layers=None):
    """(name, numpy shape [rows, cols], init std or None for ones) in file order; the residual
    branches are scaled for a model of `scale_layers` layers (default: `layers`)."""
    h, f, hd = SHAPE["hidden"], SHAPE["ffn"], SHAPE["head_dim"]
    q, kv = SHAPE["heads"] * hd, SHAPE["kv_heads"] * hd
    residual = 1.0 / math.sqrt(2 * (scale_layers or layers))
    plan = [("token_embd.weight", (SHAPE["vocab"], h), 0.02)]
    for i in range(layers):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (h,), None),
            (p + "attn_q.weight", (q, h), 1 / math.sqrt(h)),
            (p + "attn_k.weight", (kv, h), 1 / math.sqrt(h)),
            (p + "attn_v.weight", (kv, h), 1 / math.sqrt(h)),
            (p + "attn_output.weight", (h, q), residual / math.sqrt(q)),
            (p + "ffn_norm.weight", (h,), None),
            (p + "ffn_gate.weight", (f, h), 1 / math.sqrt(h)),
            (p + "ffn_up.weight", (f, h), 1 / math.sqrt(h)),
            (p + "ffn_down.weight", (h, f), residual / math.sqrt(f)),
        ]
    plan += [("output_norm.weight", (h,), None), ("output.weight", (SHAPE["vocab"], h), 1 / math.sqrt(h))]
    return plan


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draft-of", type=int, help="the target's layer count (see above)")
    args = parser.parse_args()
    target = args.draft_of or args.layers
    if target < args.layers:
        parser.error("--draft-of must be at least --layers")

    writer = GGUFWriter(args.out, "llama")
    writer.add_name("random-llama-3.1-8b-shape")
    writer.add_block_count(args.layers)
    writer.add_context_length(SHAPE["context"])
    writer.add_embedding_length(SHAPE["hidden"])
    writer.add_feed_forward_length(SHAPE["ffn"])
    writer.add_head_count(SHAPE["heads"])
    writer.add_head_count_kv(SHAPE["kv_heads"])
    writer.add_rope_freq_base(SHAPE["rope_theta"])
    writer.add_layer_norm_rms_eps(SHAPE["eps"])
    writer.add_rope_dimension_count(SHAPE["head_dim"])
    writer.add_vocab_size(SHAPE["vocab"])
    writer.add_file_type(1)  # mostly f16
    tokenizer_fields(writer, SHAPE["vocab"])

    # The target's plan, in its draw order; a draft keeps the tensors of its own layers.
    plan = tensor_plan(target)
    kept = {name for name, _, _ in tensor_plan(args.layers, target)}
    write_tensors(writer, plan, args.seed, args.out, kept)


def write_tensors(writer, plan, seed, out, kept=None):
    """Writes the header and `plan`'s tensors (f16 normal draws scaled by std, or f32 ones for
    norms), one tensor at a time with a bounded f32 scratch, and closes `writer`. With `kept`,
    only those tensors are written; the others are drawn all the same, so every kept tensor is
    the one the full plan writes."""
    kept = kept if kept is not None else {name for name, _, _ in plan}
    for name, shape, std in plan:
        if name not in kept:
            continue
        dtype = np.float32 if std is None else np.float16
        writer.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    total = 0
    for name, shape, std in plan:
        if std is None:
            data = np.ones(shape, dtype=np.float32)
        else:
            data = np.empty(shape, dtype=np.float16)
            flat = data.reshape(-1, shape[-1])
            for start in range(0, flat.shape[0], 1024):
                rows = rng.standard_normal((min(1024, flat.shape[0] - start), shape[-1]), dtype=np.float32)
                flat[start:start + rows.shape[0]] = rows * std
        if name not in kept:
            continue
        writer.write_tensor_data(data)
        total += data.size
    writer.close()
    print(f"{out}: {total / 1e9:.2f}B parameters, {os.path.getsize(out) / 2**30:.1f} GiB", file=sys.stderr)


if __name__ == "__main__":
    main()
