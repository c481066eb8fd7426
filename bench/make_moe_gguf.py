#!/usr/bin/env python3
"""Writes a random-weight `qwen3moe` GGUF file with the shapes of Qwen3-30B-A3B (48 layers, hidden
2048, 32 query / 4 key-value heads of 128, per-head q/k norms, 128 experts of width 768 with 8 used
per token, vocabulary 151936, untied output), in f16, streamed tensor by tensor so that neither
memory nor time grows beyond one bounded chunk of one tensor at a time.

    python3 bench/make_moe_gguf.py OUT.gguf [--layers 48] [--seed 0]

Experts are stored as llama.cpp's converter stores them: one 3-D tensor per projection and layer,
`blk.N.ffn_{gate,up}_exps.weight` of numpy shape [128, 768, 2048] and `ffn_down_exps` of
[128, 2048, 768], with the router `ffn_gate_inp` [128, 2048] in f32. Then
`llama-quantize OUT.gguf OUT.q4_k_m.gguf Q4_K_M` makes the file both servers are measured on.

Size: about 623M parameters a layer (604M of them experts) plus 622M for the embedding and output
head; Q4_K_M keeps about 4.9 bits a weight, so a layer is about 0.38 GB and `--layers 14` gives a
file of about 5.7 GB (`--layers 15` about 6.1 GB), where all 48 are about 18.6 GB.

The tokenizer and chat template are make_large_gguf.py's (the benchmark's byte-level BPE, padded
to the vocabulary, ChatML); weights are scaled so activations stay O(1). The text is meaningless,
only the speed and memory of serving such a file are of interest (never commit the output).
"""
import argparse
import math
import os
import sys

import numpy as np
from gguf import GGUFWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_large_gguf import tokenizer_fields  # noqa: E402

SHAPE = dict(hidden=2048, dense_ffn=6144, expert_ffn=768, experts=128, experts_used=8, heads=32,
             kv_heads=4, head_dim=128, vocab=151936, rope_theta=1000000.0, eps=1e-6, context=40960)
# Rows of f32 scratch drawn at once, whatever the tensor.
CHUNK_ROWS = 4096


def tensor_plan(layers):
    """(name, numpy shape, init std or None for ones, numpy dtype) in file order."""
    h, hd, e, f = SHAPE["hidden"], SHAPE["head_dim"], SHAPE["experts"], SHAPE["expert_ffn"]
    q, kv = SHAPE["heads"] * hd, SHAPE["kv_heads"] * hd
    residual = 1.0 / math.sqrt(2 * layers)
    f16, f32 = np.float16, np.float32
    plan = [("token_embd.weight", (SHAPE["vocab"], h), 0.02, f16)]
    for i in range(layers):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (h,), None, f32),
            (p + "attn_q.weight", (q, h), 1 / math.sqrt(h), f16),
            (p + "attn_k.weight", (kv, h), 1 / math.sqrt(h), f16),
            (p + "attn_v.weight", (kv, h), 1 / math.sqrt(h), f16),
            (p + "attn_output.weight", (h, q), residual / math.sqrt(q), f16),
            (p + "attn_q_norm.weight", (hd,), None, f32),
            (p + "attn_k_norm.weight", (hd,), None, f32),
            (p + "ffn_norm.weight", (h,), None, f32),
            (p + "ffn_gate_inp.weight", (e, h), 1 / math.sqrt(h), f32),
            (p + "ffn_gate_exps.weight", (e, f, h), 1 / math.sqrt(h), f16),
            (p + "ffn_up_exps.weight", (e, f, h), 1 / math.sqrt(h), f16),
            # Eight experts add up per token: scale each down so their sum stays O(residual).
            (p + "ffn_down_exps.weight", (e, h, f), residual / math.sqrt(f * SHAPE["experts_used"]), f16),
        ]
    plan += [
        ("output_norm.weight", (h,), None, f32),
        ("output.weight", (SHAPE["vocab"], h), 1 / math.sqrt(h), f16),
    ]
    return plan


def write_random(writer, rng, shape, std, dtype):
    """Writes one tensor, drawn CHUNK_ROWS rows (of its last dimension) at a time."""
    data = np.empty(shape, dtype=dtype)
    if std is None:
        data[...] = 1
    else:
        rows = data.reshape(-1, shape[-1])
        for start in range(0, rows.shape[0], CHUNK_ROWS):
            n = min(CHUNK_ROWS, rows.shape[0] - start)
            rows[start:start + n] = rng.standard_normal((n, shape[-1]), dtype=np.float32) * std
    writer.write_tensor_data(data)
    return data.size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    writer = GGUFWriter(args.out, "qwen3moe")
    writer.add_name("random-qwen3-30b-a3b-shape")
    writer.add_block_count(args.layers)
    writer.add_context_length(SHAPE["context"])
    writer.add_embedding_length(SHAPE["hidden"])
    writer.add_feed_forward_length(SHAPE["dense_ffn"])
    writer.add_expert_feed_forward_length(SHAPE["expert_ffn"])
    writer.add_expert_count(SHAPE["experts"])
    writer.add_expert_used_count(SHAPE["experts_used"])
    writer.add_head_count(SHAPE["heads"])
    writer.add_head_count_kv(SHAPE["kv_heads"])
    writer.add_key_length(SHAPE["head_dim"])
    writer.add_value_length(SHAPE["head_dim"])
    writer.add_rope_freq_base(SHAPE["rope_theta"])
    writer.add_layer_norm_rms_eps(SHAPE["eps"])
    writer.add_vocab_size(SHAPE["vocab"])
    writer.add_file_type(1)  # mostly f16
    tokenizer_fields(writer, SHAPE["vocab"])

    plan = tensor_plan(args.layers)
    for name, shape, _, dtype in plan:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        writer.add_tensor_info(name, shape, np.dtype(dtype), nbytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(args.seed)
    total = sum(write_random(writer, rng, shape, std, dtype) for _, shape, std, dtype in plan)
    writer.close()
    size = os.path.getsize(args.out) / 2**30
    print(f"{args.out}: {total / 1e9:.2f}B parameters, {size:.1f} GiB", file=sys.stderr)


if __name__ == "__main__":
    main()
