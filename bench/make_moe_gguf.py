#!/usr/bin/env python3
"""Writes a random-weight `qwen3moe` GGUF file with the per-layer shape of Qwen3-30B-A3B (hidden
2048, 32 query / 4 key-value heads of 128, q/k norms, 128 experts of width 768 with 8 used per
token, untied output), with fewer layers, in f16, streamed tensor by tensor.

    bench/python bench/make_moe_gguf.py OUT.gguf [--layers 4] [--seed 0]

Then `llama-quantize OUT.gguf OUT.q4_k_m.gguf Q4_K_M` makes the file both servers are measured on.
Each layer holds ~623M parameters (~0.36 GB in Q4_K_M, 1.25 GB in f16); the full model has 48,
so the figures of a shallower file are extrapolated per layer. Tokenizer, chat template and
weight scaling as in make_large_gguf.py (meaningless text; never commit the output).
"""
import argparse
import math
import os
import sys

from gguf import GGUFWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_large_gguf import tokenizer_fields, write_tensors  # noqa: E402

SHAPE = dict(hidden=2048, heads=32, kv_heads=4, head_dim=128, experts=128, used=8, expert_ffn=768,
             vocab=151936, rope_theta=1000000.0, eps=1e-6, context=40960)


def tensor_plan(layers):
    """(name, numpy shape, init std or None for ones) in file order."""
    h, hd, e, f = SHAPE["hidden"], SHAPE["head_dim"], SHAPE["experts"], SHAPE["expert_ffn"]
    q, kv = SHAPE["heads"] * hd, SHAPE["kv_heads"] * hd
    residual = 1.0 / math.sqrt(2 * layers)
    plan = [("token_embd.weight", (SHAPE["vocab"], h), 0.02)]
    for i in range(layers):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (h,), None),
            (p + "attn_q.weight", (q, h), 1 / math.sqrt(h)),
            (p + "attn_k.weight", (kv, h), 1 / math.sqrt(h)),
            (p + "attn_v.weight", (kv, h), 1 / math.sqrt(h)),
            (p + "attn_q_norm.weight", (hd,), None),
            (p + "attn_k_norm.weight", (hd,), None),
            (p + "attn_output.weight", (h, q), residual / math.sqrt(q)),
            (p + "ffn_norm.weight", (h,), None),
            (p + "ffn_gate_inp.weight", (e, h), 1 / math.sqrt(h)),
            (p + "ffn_gate_exps.weight", (e, f, h), 1 / math.sqrt(h)),
            (p + "ffn_up_exps.weight", (e, f, h), 1 / math.sqrt(h)),
            (p + "ffn_down_exps.weight", (e, h, f), residual / math.sqrt(f)),
        ]
    plan += [("output_norm.weight", (h,), None), ("output.weight", (SHAPE["vocab"], h), 1 / math.sqrt(h))]
    return plan


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    writer = GGUFWriter(args.out, "qwen3moe")
    writer.add_name("random-qwen3-30b-a3b-shape")
    writer.add_block_count(args.layers)
    writer.add_context_length(SHAPE["context"])
    writer.add_embedding_length(SHAPE["hidden"])
    writer.add_feed_forward_length(6144)
    writer.add_head_count(SHAPE["heads"])
    writer.add_head_count_kv(SHAPE["kv_heads"])
    writer.add_key_length(SHAPE["head_dim"])
    writer.add_value_length(SHAPE["head_dim"])
    writer.add_rope_freq_base(SHAPE["rope_theta"])
    writer.add_layer_norm_rms_eps(SHAPE["eps"])
    writer.add_expert_count(SHAPE["experts"])
    writer.add_expert_used_count(SHAPE["used"])
    writer.add_expert_feed_forward_length(SHAPE["expert_ffn"])
    writer.add_vocab_size(SHAPE["vocab"])
    writer.add_file_type(1)  # mostly f16
    tokenizer_fields(writer, SHAPE["vocab"])

    write_tensors(writer, tensor_plan(args.layers), args.seed, args.out)


if __name__ == "__main__":
    main()
