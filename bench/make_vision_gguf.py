#!/usr/bin/env python3
"""Writes a random-weight Gemma-3-4B-shaped vision model as the two files llama.cpp serves it
from: the language model (`general.architecture = gemma3`) and its projector
(`mmproj-*.gguf`, `clip` with projector type `gemma3`), in f16, streamed tensor by tensor.

    bench/python bench/make_vision_gguf.py OUT_DIR [--layers 34] [--vision-layers 27] [--seed 0]
    llama-quantize OUT_DIR/gemma3-4b-vision.f16.gguf OUT_DIR/gemma3-4b-vision.q4_k_m.gguf Q4_K_M

Shapes are the published Gemma 3 4B's: text hidden 2560, 34 layers (every 6th global, the rest
seeing 1024 positions), 8 query / 4 key-value heads of 256, GELU-tanh MLP of 10240, vocabulary
262208; SigLIP-so400m vision tower (896 px images in 14 px patches: 4096 patches, hidden 1152, 27
layers of 16 heads, MLP 4304) and the projector pooling 4x4 patches into 256 image tokens. The
global layers' linear RoPE scaling (factor 8) is left out: with random weights it changes no cost.

The tokenizer is the benchmarks' byte-level BPE (bench/make_random_model.py) with Gemma 3's image
markers `<start_of_image>`, `<end_of_image>` and `<image_soft_token>` as control tokens (ids 3, 4,
5), so both servers find them by their text; the chat template is ChatML (both servers put an
image part's marker into the message text before rendering). Weights are scaled as in
make_random_model.py so activations stay O(1); only the speed of serving such files is of
interest (never commit the output).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
from gguf import GGUFWriter, TokenType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_random_model import BOS_ID, CHATML_TEMPLATE, EOS_ID, PAD_ID, SPECIAL_TOKENS, build_tokenizer  # noqa: E402

IMAGE_TOKENS = ["<start_of_image>", "<end_of_image>", "<image_soft_token>"]
TEXT = dict(hidden=2560, ffn=10240, heads=8, kv_heads=4, head_dim=256, vocab=262208,
            window=1024, context=131072, rope_theta=1_000_000.0, rope_local=10_000.0, eps=1e-6)
# The projector's tensors llama.cpp's converter writes in f32 (its CPU graph adds the position
# embeddings in f32 and refuses an f16 operand).
F32_MATRICES = {"v.patch_embd.weight", "v.position_embd.weight"}
VISION = dict(hidden=1152, ffn=4304, heads=16, image=896, patch=14, tokens_per_side=16, eps=1e-6)


def add_tokenizer(writer, vocab, specials, template):
    """The benchmarks' byte-level BPE of `vocab` tokens, `specials` as control tokens, and
    `template` as the chat template."""
    model = json.loads(build_tokenizer(vocab, specials).to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([TokenType.CONTROL if t in specials else TokenType.NORMAL for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_pad_token_id(PAD_ID)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_chat_template(template)


def text_file(path, layers, seed):
    writer = GGUFWriter(path, "gemma3")
    writer.add_name("random-gemma-3-4b-shape")
    writer.add_block_count(layers)
    writer.add_context_length(TEXT["context"])
    writer.add_embedding_length(TEXT["hidden"])
    writer.add_feed_forward_length(TEXT["ffn"])
    writer.add_head_count(TEXT["heads"])
    writer.add_head_count_kv(TEXT["kv_heads"])
    writer.add_key_length(TEXT["head_dim"])
    writer.add_value_length(TEXT["head_dim"])
    writer.add_rope_freq_base(TEXT["rope_theta"])
    writer.add_float32("gemma3.rope.freq_base_swa", TEXT["rope_local"])
    writer.add_layer_norm_rms_eps(TEXT["eps"])
    writer.add_sliding_window(TEXT["window"])
    writer.add_file_type(1)  # mostly f16

    add_tokenizer(writer, TEXT["vocab"], SPECIAL_TOKENS + IMAGE_TOKENS, CHATML_TEMPLATE)

    h, f, hd = TEXT["hidden"], TEXT["ffn"], TEXT["head_dim"]
    q, kv = TEXT["heads"] * hd, TEXT["kv_heads"] * hd
    residual = 1.0 / math.sqrt(2 * layers)
    # (name, numpy shape [rows, cols], std; None: a norm of ones, a number: a norm of that value).
    # Norm weights hold Gemma's `1 + w`, as llama.cpp's converter writes them.
    plan = [("token_embd.weight", (TEXT["vocab"], h), 0.02)]
    for i in range(layers):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (h,), None),
            (p + "attn_q.weight", (q, h), 1 / math.sqrt(h)),
            (p + "attn_k.weight", (kv, h), 1 / math.sqrt(h)),
            (p + "attn_v.weight", (kv, h), 1 / math.sqrt(h)),
            (p + "attn_q_norm.weight", (hd,), None),
            (p + "attn_k_norm.weight", (hd,), None),
            (p + "attn_output.weight", (h, q), 1 / math.sqrt(q)),
            (p + "post_attention_norm.weight", (h,), residual),
            (p + "ffn_norm.weight", (h,), None),
            (p + "ffn_gate.weight", (f, h), 1 / math.sqrt(h)),
            (p + "ffn_up.weight", (f, h), 1 / math.sqrt(h)),
            (p + "ffn_down.weight", (h, f), 1 / math.sqrt(f)),
            (p + "post_ffw_norm.weight", (h,), residual),
        ]
    plan.append(("output_norm.weight", (h,), None))
    write(writer, plan, seed, path)


def projector_file(path, layers, seed):
    writer = GGUFWriter(path, "clip")
    writer.add_type("mmproj")
    writer.add_name("random-gemma-3-4b-shape vision")
    writer.add_file_type(1)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "gemma3")
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.projection_dim", TEXT["hidden"])
    writer.add_uint32("clip.vision.image_size", VISION["image"])
    writer.add_uint32("clip.vision.patch_size", VISION["patch"])
    writer.add_uint32("clip.vision.embedding_length", VISION["hidden"])
    writer.add_uint32("clip.vision.feed_forward_length", VISION["ffn"])
    writer.add_uint32("clip.vision.block_count", layers)
    writer.add_uint32("clip.vision.attention.head_count", VISION["heads"])
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", VISION["eps"])
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    patches_per_side = VISION["image"] // VISION["patch"]
    writer.add_uint32("clip.vision.projector.scale_factor", patches_per_side // VISION["tokens_per_side"])

    v, f, p = VISION["hidden"], VISION["ffn"], VISION["patch"]
    residual = 1.0 / math.sqrt(2 * layers)
    zeros = 0.0  # biases: norms "of value 0"
    plan = [
        ("mm.input_projection.weight", (v, TEXT["hidden"]), 1 / math.sqrt(v)),
        ("mm.soft_emb_norm.weight", (v,), None),
        ("v.patch_embd.weight", (v, 3, p, p), 1 / math.sqrt(3 * p * p)),
        ("v.patch_embd.bias", (v,), zeros),
        ("v.position_embd.weight", (patches_per_side**2, v), 0.02),
    ]
    for i in range(layers):
        b = f"v.blk.{i}."
        plan += [
            (b + "ln1.weight", (v,), None), (b + "ln1.bias", (v,), zeros),
            (b + "attn_q.weight", (v, v), 1 / math.sqrt(v)), (b + "attn_q.bias", (v,), zeros),
            (b + "attn_k.weight", (v, v), 1 / math.sqrt(v)), (b + "attn_k.bias", (v,), zeros),
            (b + "attn_v.weight", (v, v), 1 / math.sqrt(v)), (b + "attn_v.bias", (v,), zeros),
            (b + "attn_out.weight", (v, v), residual / math.sqrt(v)), (b + "attn_out.bias", (v,), zeros),
            (b + "ln2.weight", (v,), None), (b + "ln2.bias", (v,), zeros),
            (b + "ffn_up.weight", (f, v), 1 / math.sqrt(v)), (b + "ffn_up.bias", (f,), zeros),
            (b + "ffn_down.weight", (v, f), residual / math.sqrt(f)), (b + "ffn_down.bias", (v,), zeros),
        ]
    plan += [("v.post_ln.weight", (v,), None), ("v.post_ln.bias", (v,), zeros)]
    write(writer, plan, seed + 1, path)


def write(writer, plan, seed, path, f32_matrices=F32_MATRICES):
    """Writes the header and `plan`'s tensors, one at a time: a one-dimensional entry is an f32
    constant (its number, or one for `None`), any other a normal draw scaled by its std, in f16
    except the tensors llama.cpp's converter keeps in f32 (`f32_matrices`)."""
    constants = {name: (1.0 if std is None else std) for name, shape, std in plan if len(shape) == 1}
    for name, shape, std in plan:
        dtype = np.float32 if name in constants or name in f32_matrices else np.float16
        writer.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for name, shape, std in plan:
        if name in constants:
            data = np.full(shape, constants[name], dtype=np.float32)
        else:
            data = np.empty(shape, dtype=np.float32 if name in f32_matrices else np.float16)
            flat = data.reshape(-1, shape[-1])
            for start in range(0, flat.shape[0], 1024):
                rows = rng.standard_normal((min(1024, flat.shape[0] - start), shape[-1]), dtype=np.float32)
                flat[start:start + rows.shape[0]] = rows * std
        writer.write_tensor_data(data)
    writer.close()
    print(f"{path}: {os.path.getsize(path) / 2**30:.2f} GiB", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=34)
    parser.add_argument("--vision-layers", type=int, default=27)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projector-only", action="store_true", help="write only the mmproj file")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if not args.projector_only:
        text_file(os.path.join(args.out_dir, "gemma3-4b-vision.f16.gguf"), args.layers, args.seed)
    projector_file(os.path.join(args.out_dir, "mmproj-gemma3-4b-vision-f16.gguf"), args.vision_layers, args.seed)


if __name__ == "__main__":
    main()
