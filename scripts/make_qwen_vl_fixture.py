#!/usr/bin/env python3
"""Writes fixtures/models/qwen2_5-vl/: a tiny random-weight Qwen2_5_VLForConditionalGeneration
(the Qwen2.5-VL vision transformer with its patch merger, and a Qwen2-shaped text model with
multimodal RoPE), its processor files, a few test images and the reference outputs the Rust tests
compare against.

Vision: patch 14, temporal patch 2, spatial merge 2 (a merged token is 2x2 patches, 28x28 pixels),
hidden 32, 2 heads (head dim 16), intermediate 64, depth 4 with full attention in blocks 1 and 3
(`fullatt_block_indexes`) and window attention in blocks 0 and 2; `window_size` 56 pixels is a
window of 2x2 merged tokens, so every image whose merged grid is wider or taller than 2 is cut into
several windows (some of them partial). `out_hidden_size` is the text hidden size, 64.
Text: hidden 64, 2 layers, 4 heads / 2 KV heads (head dim 16), `mrope_section` [2, 3, 3] (sums to
head_dim / 2), the tokenizer of fixtures/models/qwen2 with Qwen2.5-VL's vision tokens added.

Weights are saved as bf16, as the hub's Qwen2.5-VL checkpoints are. transformers 5.24 keeps its
modules as `model.visual.*` and `model.language_model.*` but saves them under the hub's names
(`visual.*`, `model.layers.*`, `model.embed_tokens.*`, `lm_head.*`); config.json is as transformers
5 writes it (nested `text_config` / `vision_config`, `rope_parameters`). The references come from
that checkpoint loaded back in f32.

The tokenizer adds `<|vision_start|>`, `<|vision_end|>`, `<|vision_pad|>`, `<|image_pad|>`,
`<|video_pad|>` (ids 512..516, in the order of the real tokenizer's 151652..151656); config.json
names them as the real config does (`vision_start_token_id`, `vision_end_token_id`,
`image_token_id`, `video_token_id`). chat_template.jinja is Qwen2-VL's template (a default system
message, each image as `<|vision_start|><|image_pad|><|vision_end|>`).

preprocessor_config.json is written in the hub's layout (`min_pixels` / `max_pixels` and the newer
`size: {shortest_edge, longest_edge}`, the same numbers); processor_config.json is what transformers
5 saves. min_pixels = 56*56 and max_pixels = 28*28*12: the test images (30 to 120 pixels a side)
become 1 to 12 merged tokens; the 120x120 one is shrunk by max_pixels, the 30x30 one enlarged by
min_pixels.

The reference processor is transformers' default for Qwen2-VL: `Qwen2VLImageProcessor`, the
torchvision backend (the PIL one is used only without torchvision): smart_resize, then
`torchvision.transforms.v2.functional.resize(bicubic, antialias=True)` on the uint8 tensor (torch's
uint8 antialiased bicubic, int16 fixed-point weights, on every CPU), then rescale and normalise
fused as `(level - mean*255) / (std*255)` in f32, then the patch reorder. The script refuses to run
without torchvision (`pip install --no-deps torchvision` beside any torch works; PYTHONPATH is fine).

reference.json holds, per image: its resized size, `image_grid_thw`, the resized uint8 image
(`resized_levels`, [3, H, W], checked to give the processor's `pixel_values` bit for bit through
the normalisation and reorder above), the first row of `pixel_values` exactly (the f32 values,
to check the normalisation's arithmetic), the PIL backend's largest difference in levels (for the
record), and `model.get_image_features(pixel_values, image_grid_thw).pooler_output`
([tokens, 64]) computed one image at a time. For the language model, `prompt` (one image) and
`two_images`: the text (chat template applied, before expansion), image file names, input_ids
(expanded by the processor), mm_token_type_ids, image_grid_thw, `position_ids` ([3, seq], from
`get_rope_index`), `rope_deltas`, the logits at every position (5 decimals) and the greedy
continuation (GREEDY_TOKENS tokens, each the argmax of a full forward pass over the prompt and the
tokens so far).

Usage: python3 scripts/make_qwen_vl_fixture.py   (CPU only, deterministic, seconds)
"""

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

try:
    import torchvision  # noqa: F401
except ImportError:
    sys.exit("torchvision is needed: the reference is transformers' default (torchvision) processor")

from transformers import (
    PreTrainedTokenizerFast,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLImageProcessor,
    Qwen2VLImageProcessorPil,
    Qwen2VLVideoProcessor,
)
from transformers.image_utils import SizeDict

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "models"
OUT = ROOT / "qwen2_5-vl"
TEXT_FIXTURE = ROOT / "qwen2"
PATCH, MERGE, TEMPORAL = 14, 2, 2
MIN_PIXELS, MAX_PIXELS = 56 * 56, 28 * 28 * 12
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
SEED = 2500
GREEDY_TOKENS = 8

CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def pattern(width, height, channels, seed):
    """Smooth gradients and rings with a little seeded noise: edges for the resize to blur (and
    the bicubic filter to overshoot), noise so no two neighbours are equal, values over 0..255."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    planes = []
    for c in range(channels):
        ring = np.sin(np.hypot(x - width * 0.4, y - height * 0.6) * (0.5 + 0.2 * c))
        ramp = (x / max(width - 1, 1)) * (1 - c / 3) + (y / max(height - 1, 1)) * (c / 3)
        value = 127.5 + 90 * ring * (1 - ramp) + 60 * (ramp - 0.5) + rng.normal(0, 12, (height, width))
        planes.append(value)
    array = np.clip(np.rint(np.stack(planes, axis=-1)), 0, 255).astype(np.uint8)
    return array if channels > 1 else array[..., 0]


def write_images(folder):
    """The test images by file name; the reference reads each file back, as a server gets it."""
    folder.mkdir(parents=True)
    images = {}

    def save(name, image, **options):
        image.save(folder / name, **options)
        images[name] = folder / name

    save("rgb_120x90.png", Image.fromarray(pattern(120, 90, 3, 1), "RGB"))
    save("rgb_40x100.png", Image.fromarray(pattern(40, 100, 3, 2), "RGB"))
    save("rgb_120x120.png", Image.fromarray(pattern(120, 120, 3, 3), "RGB"))
    save("gray_30x30.png", Image.fromarray(pattern(30, 30, 1, 4), "L"))
    save("photo_64x48.jpg", Image.fromarray(pattern(64, 48, 3, 5), "RGB"), quality=95, subsampling=0)
    save("rgb_77x53.png", Image.fromarray(pattern(77, 53, 3, 6), "RGB"))
    return images


def build_tokenizer():
    tokenizer = PreTrainedTokenizerFast.from_pretrained(TEXT_FIXTURE)
    # The text fixture's own extra special tokens stay listed beside the new ones.
    extra = list(tokenizer.extra_special_tokens) + VISION_TOKENS
    tokenizer.add_special_tokens({"additional_special_tokens": extra})
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_config(tokenizer):
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in VISION_TOKENS}
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
        bos_token_id=0,
        eos_token_id=3,
        pad_token_id=4,
        tie_word_embeddings=False,
    )
    vision = dict(
        depth=4,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        in_channels=3,
        patch_size=PATCH,
        spatial_merge_size=MERGE,
        temporal_patch_size=TEMPORAL,
        window_size=2 * MERGE * PATCH,
        out_hidden_size=64,
        fullatt_block_indexes=[1, 3],
        hidden_act="silu",
    )
    return Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def init_weights(model, seed):
    """Random weights that keep activations O(1): RMS norm weights near one, biases small,
    matrices scaled by their input width. Rounded to bf16 so the saved weights are these."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ("norm" in name or "ln_q" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def preprocessor_json(processor):
    """The hub's preprocessor_config.json layout (Qwen/Qwen2.5-VL-*-Instruct)."""
    p = processor.image_processor
    return {
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL,
        "merge_size": MERGE,
        "image_mean": list(p.image_mean),
        "image_std": list(p.image_std),
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "do_resize": True,
        "do_convert_rgb": True,
        "resample": 3,
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
    }


def processor_steps(image_processor, image):
    """The processor's resize (uint8 levels), then its normalisation and reorder, checked equal
    to what the processor itself returns."""
    out = image_processor(image, return_tensors="pt")
    tensor = torch.from_numpy(np.asarray(image.convert("RGB"))).permute(2, 0, 1).contiguous()[None]
    size = SizeDict(shortest_edge=MIN_PIXELS, longest_edge=MAX_PIXELS)
    resized = image_processor.resize(tensor, size=size, resample=image_processor.resample, factor=PATCH * MERGE)
    normalised = image_processor.rescale_and_normalize(
        resized, True, image_processor.rescale_factor, True, image_processor.image_mean, image_processor.image_std
    )
    patches, grid_h, grid_w = image_processor.patchify(normalised, PATCH, MERGE, TEMPORAL)
    assert torch.equal(patches[0], out["pixel_values"]), "resize + normalise + patchify != processor"
    assert out["image_grid_thw"][0].tolist() == [1, grid_h, grid_w]
    return resized[0], out["pixel_values"], out["image_grid_thw"]


def pil_level_diff(pil_pixels, pixels, image_processor):
    """The PIL backend's largest difference from the torchvision one, in uint8 levels (each
    patch row is [channel, temporal, row, column], channel-major)."""
    std = torch.tensor(image_processor.image_std).repeat_interleave(TEMPORAL * PATCH * PATCH)
    return int(torch.round(((pil_pixels - pixels).abs() * std * 255).max()))


def prompt_reference(model, processor, images, content_text, names):
    messages = [
        {
            "role": "user",
            "content": [*({"type": "image"} for _ in names), {"type": "text", "text": content_text}],
        }
    ]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    pictures = []
    for name in names:
        with Image.open(images[name]) as image:
            image.load()
            pictures.append(image)
    inputs = processor(text=[text], images=pictures, return_tensors="pt")
    ids, types = inputs["input_ids"], inputs["mm_token_type_ids"]
    grid = inputs["image_grid_thw"]
    with torch.no_grad():
        position_ids, deltas = model.model.get_rope_index(
            ids, mm_token_type_ids=types, image_grid_thw=grid, attention_mask=torch.ones_like(ids)
        )

    def forward(ids, types):
        model.model.rope_deltas = None
        with torch.no_grad():
            return model(
                input_ids=ids,
                pixel_values=inputs["pixel_values"],
                image_grid_thw=grid,
                mm_token_type_ids=types,
                attention_mask=torch.ones_like(ids),
                use_cache=False,
            ).logits[0]

    logits = forward(ids, types)
    greedy, next_logits = [], logits[-1]
    for _ in range(GREEDY_TOKENS):
        token = int(torch.argmax(next_logits))
        greedy.append(token)
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        types = torch.cat([types, torch.zeros((1, 1), dtype=types.dtype)], dim=1)
        next_logits = forward(ids, types)[-1]
    return {
        "text": text,
        "images": names,
        "input_ids": inputs["input_ids"][0].tolist(),
        "mm_token_type_ids": inputs["mm_token_type_ids"][0].tolist(),
        "image_grid_thw": grid.tolist(),
        "position_ids": position_ids[:, 0].tolist(),
        "rope_deltas": int(deltas[0, 0]),
        "logits": [[round(float(x), 5) for x in row] for row in logits],
        "greedy_tokens": greedy,
    }


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    images = write_images(OUT / "images")

    tokenizer = build_tokenizer()
    config = tiny_config(tokenizer)
    torch.manual_seed(SEED)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    init_weights(model, SEED)

    image_processor = Qwen2VLImageProcessor(
        min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=PATCH, merge_size=MERGE, temporal_patch_size=TEMPORAL
    )
    # The processor needs a video processor too; it is not used.
    video_processor = Qwen2VLVideoProcessor(
        patch_size=PATCH, merge_size=MERGE, temporal_patch_size=TEMPORAL
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    pil_processor = Qwen2VLImageProcessorPil(
        min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=PATCH, merge_size=MERGE, temporal_patch_size=TEMPORAL
    )
    model.to(torch.bfloat16).save_pretrained(OUT)
    processor.save_pretrained(OUT)
    (OUT / "preprocessor_config.json").write_text(json.dumps(preprocessor_json(processor), indent=2) + "\n")
    # The references come from the saved checkpoint loaded in f32, as a user loads it.
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(OUT, dtype=torch.float32).eval()

    reference = {
        "patch_size": PATCH,
        "merge_size": MERGE,
        "temporal_patch_size": TEMPORAL,
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
        "images": {},
    }
    for name, path in images.items():
        with Image.open(path) as image:
            image.load()
            mode = image.mode
            levels, pixels, grid = processor_steps(processor.image_processor, image)
            pil_pixels = pil_processor(image, return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            features = model.get_image_features(pixels, image_grid_thw=grid).pooler_output[0]
        t, h, w = grid[0].tolist()
        assert features.shape[0] == t * h * w // MERGE**2
        reference["images"][name] = {
            "mode": mode,
            "resized_height": levels.shape[1],
            "resized_width": levels.shape[2],
            "image_grid_thw": [t, h, w],
            "resized_levels": levels.flatten().tolist(),
            "pixel_values_shape": list(pixels.shape),
            "pixel_values_first_row": [float(v) for v in pixels[0]],
            "pil_backend_max_level_diff": pil_level_diff(pil_pixels, pixels, processor.image_processor),
            "features_shape": list(features.shape),
            "features": [round(float(v), 7) for v in features.flatten()],
        }
        print(f"{name}: grid {[t, h, w]}, {features.shape[0]} tokens, pil diff {reference['images'][name]['pil_backend_max_level_diff']} levels")

    prompts = {
        "prompt": ("Describe this picture.", ["rgb_120x90.png"]),
        "two_images": ("Which is brighter?", ["rgb_40x100.png", "rgb_77x53.png"]),
    }
    for key, (text, names) in prompts.items():
        reference[key] = prompt_reference(model, processor, images, text, names)
        print(f"{key}: {len(reference[key]['input_ids'])} tokens, greedy {reference[key]['greedy_tokens']}")
    (OUT / "reference.json").write_text(json.dumps(reference) + "\n")
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
