#!/usr/bin/env python3
"""Writes a random-weight Qwen2.5-VL-3B-shaped model as the two files llama.cpp serves it from:
the language model (`general.architecture = qwen2vl`, multimodal RoPE) and its projector
(`mmproj-*.gguf`, `clip` with projector type `qwen2.5vl_merger`), in f16, streamed tensor by
tensor, with the keys and tensor names llama.cpp's converter writes (those of
fixtures/gguf/*qwen2_5-vl*.gguf, which it made).

    bench/python bench/make_qwen_vl_gguf.py OUT_DIR [--layers 36] [--vision-layers 32] [--seed 0]
    llama-quantize OUT_DIR/qwen2.5-vl-3b.f16.gguf OUT_DIR/qwen2.5-vl-3b.q4_k_m.gguf Q4_K_M

Shapes are the published Qwen2.5-VL-3B-Instruct's: text hidden 2048, 36 layers, 16 query / 2
key-value heads of 128 with q/k/v biases, SiLU MLP of 11008, vocabulary 151936, tied embeddings,
M-RoPE sections 16/24/24, theta 1e6; vision transformer of 32 blocks (hidden 1280, 16 heads,
SwiGLU MLP of 3420 with biases, RMS norms), 14-pixel patches over two frames, windows of 112
pixels with full attention in every 8th block (7, 15, 23, 31), and the merger (2x2 patches, MLP
5120 -> 5120 -> 2048). An image of 640x640 pixels is resized to 644x644: 2,116 patches, 529
image tokens.

The tokenizer is the benchmarks' byte-level BPE (bench/make_random_model.py) with Qwen's vision
tokens as control tokens, and the chat template is Qwen2-VL's (an image part becomes
`<|vision_start|><|image_pad|><|vision_end|>`). Weights are scaled as in make_vision_gguf.py so
activations stay O(1); only the speed of serving such files is of interest (never commit the
output).
"""
import argparse
import math
import os
import sys

from gguf import GGUFWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_random_model import SPECIAL_TOKENS  # noqa: E402
from make_vision_gguf import add_tokenizer, write  # noqa: E402

VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
TEXT = dict(hidden=2048, ffn=11008, heads=16, kv_heads=2, head_dim=128, vocab=151936,
            context=128000, rope_theta=1_000_000.0, sections=[16, 24, 24, 0], eps=1e-6)
VISION = dict(hidden=1280, ffn=3420, heads=16, patch=14, merge=2, image=560, wa_pattern=8, eps=1e-6)
# Qwen2-VL's chat template (as the fixture's GGUF carries it).
TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture "
    "{{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video "
    "{{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def text_file(path, layers, seed):
    writer = GGUFWriter(path, "qwen2vl")
    writer.add_name("random-qwen2.5-vl-3b-shape")
    writer.add_block_count(layers)
    writer.add_context_length(TEXT["context"])
    writer.add_embedding_length(TEXT["hidden"])
    writer.add_feed_forward_length(TEXT["ffn"])
    writer.add_head_count(TEXT["heads"])
    writer.add_head_count_kv(TEXT["kv_heads"])
    writer.add_array("qwen2vl.rope.dimension_sections", TEXT["sections"])
    writer.add_rope_freq_base(TEXT["rope_theta"])
    writer.add_layer_norm_rms_eps(TEXT["eps"])
    writer.add_file_type(1)  # mostly f16

    add_tokenizer(writer, TEXT["vocab"], SPECIAL_TOKENS + VISION_TOKENS, TEMPLATE)

    h, f, hd = TEXT["hidden"], TEXT["ffn"], TEXT["head_dim"]
    q, kv = TEXT["heads"] * hd, TEXT["kv_heads"] * hd
    residual = 1.0 / math.sqrt(2 * layers)
    zeros = 0.0
    # (name, numpy shape [rows, cols], std; None: a norm of ones, a number: a constant vector).
    plan = [("token_embd.weight", (TEXT["vocab"], h), 0.02)]
    for i in range(layers):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (h,), None),
            (p + "attn_q.weight", (q, h), 1 / math.sqrt(h)), (p + "attn_q.bias", (q,), zeros),
            (p + "attn_k.weight", (kv, h), 1 / math.sqrt(h)), (p + "attn_k.bias", (kv,), zeros),
            (p + "attn_v.weight", (kv, h), 1 / math.sqrt(h)), (p + "attn_v.bias", (kv,), zeros),
            (p + "attn_output.weight", (h, q), residual / math.sqrt(q)),
            (p + "ffn_norm.weight", (h,), None),
            (p + "ffn_gate.weight", (f, h), 1 / math.sqrt(h)),
            (p + "ffn_up.weight", (f, h), 1 / math.sqrt(h)),
            (p + "ffn_down.weight", (h, f), residual / math.sqrt(f)),
        ]
    plan.append(("output_norm.weight", (h,), None))
    write(writer, plan, seed, path, f32_matrices=set())


def projector_file(path, layers, seed):
    writer = GGUFWriter(path, "clip")
    writer.add_type("mmproj")
    writer.add_name("random-qwen2.5-vl-3b-shape vision")
    writer.add_file_type(1)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_uint32("clip.vision.projection_dim", TEXT["hidden"])
    writer.add_uint32("clip.vision.image_size", VISION["image"])
    writer.add_uint32("clip.vision.patch_size", VISION["patch"])
    writer.add_uint32("clip.vision.embedding_length", VISION["hidden"])
    writer.add_uint32("clip.vision.feed_forward_length", VISION["ffn"])
    writer.add_uint32("clip.vision.block_count", layers)
    writer.add_uint32("clip.vision.attention.head_count", VISION["heads"])
    writer.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    writer.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])
    writer.add_string("clip.projector_type", "qwen2.5vl_merger")
    writer.add_bool("clip.use_silu", True)
    writer.add_uint32("clip.vision.n_wa_pattern", VISION["wa_pattern"])
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", VISION["eps"])

    v, f, p = VISION["hidden"], VISION["ffn"], VISION["patch"]
    merged = v * VISION["merge"] ** 2
    residual = 1.0 / math.sqrt(2 * layers)
    zeros = 0.0
    # The Conv3d kernel's two frames, each [hidden, 3, 14, 14]; each frame sees the same image.
    frame = 1 / math.sqrt(2 * 3 * p * p)
    plan = [
        ("v.patch_embd.weight", (v, 3, p, p), frame),
        ("v.patch_embd.weight.1", (v, 3, p, p), frame),
    ]
    for i in range(layers):
        b = f"v.blk.{i}."
        plan += [
            (b + "ln1.weight", (v,), None),
            (b + "attn_q.weight", (v, v), 1 / math.sqrt(v)), (b + "attn_q.bias", (v,), zeros),
            (b + "attn_k.weight", (v, v), 1 / math.sqrt(v)), (b + "attn_k.bias", (v,), zeros),
            (b + "attn_v.weight", (v, v), 1 / math.sqrt(v)), (b + "attn_v.bias", (v,), zeros),
            (b + "attn_out.weight", (v, v), residual / math.sqrt(v)), (b + "attn_out.bias", (v,), zeros),
            (b + "ln2.weight", (v,), None),
            (b + "ffn_gate.weight", (f, v), 1 / math.sqrt(v)), (b + "ffn_gate.bias", (f,), zeros),
            (b + "ffn_up.weight", (f, v), 1 / math.sqrt(v)), (b + "ffn_up.bias", (f,), zeros),
            (b + "ffn_down.weight", (v, f), residual / math.sqrt(f)), (b + "ffn_down.bias", (v,), zeros),
        ]
    plan += [
        ("v.post_ln.weight", (v,), None),
        ("mm.0.weight", (merged, merged), 1 / math.sqrt(merged)), ("mm.0.bias", (merged,), zeros),
        ("mm.2.weight", (TEXT["hidden"], merged), 1 / math.sqrt(merged)),
        ("mm.2.bias", (TEXT["hidden"],), zeros),
    ]
    write(writer, plan, seed + 1, path, f32_matrices=set())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--vision-layers", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projector-only", action="store_true", help="write only the mmproj file")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if not args.projector_only:
        text_file(os.path.join(args.out_dir, "qwen2.5-vl-3b.f16.gguf"), args.layers, args.seed)
    projector_file(os.path.join(args.out_dir, "mmproj-qwen2.5-vl-3b-f16.gguf"), args.vision_layers, args.seed)


if __name__ == "__main__":
    main()
