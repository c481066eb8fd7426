#!/usr/bin/env python3
"""Writes fixtures/models/gemma3-vision/: a tiny random-weight Gemma3ForConditionalGeneration
(SigLIP vision tower, multimodal projector, Gemma 3 text model), its processor files, a set of
test images and the reference outputs the Rust tests compare against.

Dimensions: images are resized to 32x32 and cut into 4x4 patches (an 8x8 grid of 64 patches);
the projector averages 2x2 patches into 16 image tokens (`mm_tokens_per_image`), so its pooling
is exercised. The vision tower has hidden 32, 2 layers, 2 heads; the text model is the shape of
fixtures/models/gemma3 (hidden 64) with 2 layers. Weights are saved as bf16, as the hub's Gemma 3
checkpoints are, and rounded to bf16 before the reference runs in f32.

The tokenizer is fixtures/models/gemma3's with `<start_of_image>`, `<end_of_image>` and
`<image_soft_token>` added (ids 512, 513, 514), named in tokenizer_config.json the way the real
Gemma 3 tokenizer names them (boi_token, eoi_token, image_token).

Images (fixtures/models/gemma3-vision/images/): PNG (RGB, RGBA with every alpha level, grayscale,
one already 32x32), JPEG (4:4:4 and 4:2:0 chroma), WebP (lossless) and GIF (palette with a
transparent index), and two stored sideways with an EXIF orientation (WebP 6, JPEG 3); sizes
differ and none but one is square, so the resize both shrinks and enlarges. Every image is turned
upright by its EXIF orientation before the processor (`ImageOps.exif_transpose`, as transformers'
`load_image` does for URLs, paths and base64; the processor itself does not).

The reference processor is transformers' default for Gemma 3: `Gemma3ImageProcessor`, the
torchvision backend (the PIL backend is used only when torchvision is missing). Its bilinear
resize runs on uint8 tensors (torch's antialiased bilinear interpolate, which on AVX2/AVX512 and
arm64 CPUs works in uint8 with int16 fixed-point weights); the script refuses to run without
torchvision. torchvision's Python code is all it uses, so `pip install --no-deps torchvision`
beside any torch works (`PYTHONPATH` to it is fine).

reference.json holds, per image: the processor's `pixel_values` ([3, 32, 32], f32) stored as the
uint8 levels they were normalised from (`pixel_values = (level - 127.5) / 127.5` in f32, checked
to give the processor's values bit for bit; the JSON stays small), the PIL backend's largest difference from it in uint8 levels (for the
record), and `model.get_image_features(pixel_values).pooler_output` ([16, 64]) computed one image
at a time. It also holds prompts with images expanded as the processor expands them
(`<start_of_image>` + 16 soft tokens + `<end_of_image>`): `prompt` with one image, `two_images`
with two different ones; for each its text, image file names, ids, token_type_ids, the logits at
every position (5 decimals, with the bidirectional attention transformers gives each image's
soft tokens) and the greedy continuation (`greedy_tokens`, GREEDY_TOKENS of them, each the
argmax of a full forward pass over the prompt and the tokens so far, image tokens bidirectional).

Usage: python3 scripts/make_vision_fixtures.py   (CPU only, deterministic, seconds)
"""

import io
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps

try:
    import torchvision  # noqa: F401
except ImportError:
    sys.exit("torchvision is needed: the reference is transformers' default (torchvision) processor")

from transformers import (
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Gemma3ImageProcessor,
    Gemma3ImageProcessorPil,
    Gemma3Processor,
    PreTrainedTokenizerFast,
)

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "models"
OUT = ROOT / "gemma3-vision"
TEXT_FIXTURE = ROOT / "gemma3"
IMAGE_SIZE = 32
PATCH_SIZE = 4
MM_TOKENS = 16
BOI, EOI, SOFT = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
SEED = 3300
GREEDY_TOKENS = 8


def pattern(width, height, channels, seed):
    """Smooth gradients and rings with a little seeded noise: edges for the resize to blur, noise
    so no two neighbours are equal, values over the whole 0..255 range."""
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
    """The test images, by file name. Each is written, then the file's bytes are what the
    reference processes (read back with PIL), as a server would receive them."""
    folder.mkdir(parents=True)
    images = {}

    def save(name, image, **options):
        path = folder / name
        image.save(path, **options)
        images[name] = path

    save("rgb_48x20.png", Image.fromarray(pattern(48, 20, 3, 1), "RGB"))
    rgba = pattern(40, 30, 4, 2)
    # Every alpha level appears, 0 and 255 included.
    rgba[..., 3] = (np.arange(40 * 30) % 256).reshape(30, 40).astype(np.uint8)
    save("rgba_40x30.png", Image.fromarray(rgba, "RGBA"))
    save("gray_23x37.png", Image.fromarray(pattern(23, 37, 1, 3), "L"))
    save("rgb_32x32.png", Image.fromarray(pattern(32, 32, 3, 4), "RGB"))
    photo = Image.fromarray(pattern(64, 40, 3, 5), "RGB")
    save("photo444_64x40.jpg", photo, quality=95, subsampling=0)
    save("photo420_40x64.jpg", photo.transpose(Image.Transpose.ROTATE_90), quality=90, subsampling=2)
    save("lossless_33x50.webp", Image.fromarray(pattern(33, 50, 3, 6), "RGB"), lossless=True)
    palette = Image.fromarray(pattern(30, 26, 3, 7), "RGB").quantize(colors=64, dither=Image.Dither.NONE)
    save("palette_30x26.gif", palette, transparency=5)
    # Stored sideways with an EXIF orientation, as phone cameras write them: 6 (turn 90° clockwise
    # to view) and 3 (turn 180°).
    for name, orientation, pixels in [
        ("exif6_44x28.webp", 6, pattern(44, 28, 3, 8)),
        ("exif3_36x52.jpg", 3, pattern(36, 52, 3, 9)),
    ]:
        exif = Image.Exif()
        exif[0x0112] = orientation
        options = {"lossless": True} if name.endswith(".webp") else {"quality": 95, "subsampling": 0}
        save(name, Image.fromarray(pixels, "RGB"), exif=exif.tobytes(), **options)
    return images


def build_tokenizer():
    names = {"boi_token": BOI, "eoi_token": EOI, "image_token": SOFT}
    tokenizer = PreTrainedTokenizerFast.from_pretrained(
        TEXT_FIXTURE, model_specific_special_tokens=names
    )
    tokenizer.add_special_tokens({"additional_special_tokens": [BOI, EOI, SOFT]})
    return tokenizer


def tiny_config(tokenizer):
    text = json.loads((TEXT_FIXTURE / "config.json").read_text())
    for key in ("architectures", "transformers_version", "dtype", "_sliding_window_pattern"):
        text.pop(key, None)
    text.update(
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window_pattern=2,
        vocab_size=len(tokenizer),
    )
    vision = dict(
        model_type="siglip_vision_model",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_channels=3,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        hidden_act="gelu_pytorch_tanh",
        layer_norm_eps=1e-6,
        vision_use_head=False,
    )
    return Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=MM_TOKENS,
        boi_token_index=tokenizer.convert_tokens_to_ids(BOI),
        eoi_token_index=tokenizer.convert_tokens_to_ids(EOI),
        image_token_index=tokenizer.convert_tokens_to_ids(SOFT),
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=4,
    )


def init_weights(model, seed):
    """Random weights that keep activations O(1): norms near their identity, matrices scaled by
    the input width, position embeddings as large as the patch embeddings."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                # Gemma's RMS norms scale by 1 + w; SigLIP's LayerNorms by w.
                gemma = "language_model" in name or "mm_soft_emb_norm" in name
                p.copy_((0.0 if gemma else 1.0) + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif "position_embedding" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif "mm_input_projection_weight" in name:
                # [vision hidden, text hidden], applied as x @ W.
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[0]))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def pixel_levels(pixels):
    """The uint8 levels `pixels` were normalised from: with mean = std = 0.5 the processor computes
    (level - 127.5) / 127.5 in f32, so the levels store `pixel_values` exactly (checked)."""
    levels = torch.round(pixels * 127.5 + 127.5)
    again = (levels - torch.tensor(127.5)) / torch.tensor(127.5)
    assert torch.equal(again, pixels), "pixel_values are not (level - 127.5) / 127.5"
    return levels.to(torch.int64)


def prompt_reference(model, processor, images, text, names):
    """One prompt's ids, token types, logits at every position and greedy continuation."""
    pictures = []
    for name in names:
        with Image.open(images[name]) as image:
            image.load()
            pictures.append(image)
    inputs = processor(text=text, images=pictures, return_tensors="pt")
    ids, types = inputs["input_ids"], inputs["token_type_ids"]

    def forward(ids, types):
        with torch.no_grad():
            return model(
                input_ids=ids,
                pixel_values=inputs["pixel_values"],
                attention_mask=torch.ones_like(ids),
                token_type_ids=types,
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
        "token_type_ids": inputs["token_type_ids"][0].tolist(),
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
    model = Gemma3ForConditionalGeneration(config).eval()
    init_weights(model, SEED)

    image_processor = Gemma3ImageProcessor(
        size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    processor = Gemma3Processor(
        image_processor=image_processor, tokenizer=tokenizer, image_seq_length=MM_TOKENS
    )
    pil_processor = Gemma3ImageProcessorPil(**image_processor.to_dict())
    model.to(torch.bfloat16).save_pretrained(OUT)
    processor.save_pretrained(OUT)
    # The references come from the saved checkpoint loaded in f32, as a user loads it: casting
    # the model back would leave its non-persistent buffers (the text model's RoPE inverse
    # frequencies) rounded to bf16.
    model = Gemma3ForConditionalGeneration.from_pretrained(OUT, dtype=torch.float32).eval()

    reference = {"image_size": IMAGE_SIZE, "mm_tokens_per_image": MM_TOKENS, "images": {}}
    for name, path in images.items():
        with Image.open(path) as image:
            image.load()
            # Upright, as transformers' load_image (URLs, paths, base64) and viewers show it.
            image = ImageOps.exif_transpose(image)
            pixels = processor.image_processor(image, return_tensors="pt")["pixel_values"]
            pil_pixels = pil_processor(image, return_tensors="pt")["pixel_values"]
        levels = pixel_levels(pixels)
        with torch.no_grad():
            features = model.get_image_features(pixels).pooler_output[0]
        reference["images"][name] = {
            "mode": Image.open(path).mode,
            "pixel_values_shape": list(pixels.shape[1:]),
            "pixel_levels": levels.flatten().tolist(),
            "pil_backend_max_level_diff": int((levels - torch.round(pil_pixels * 127.5 + 127.5)).abs().max()),
            "features_shape": list(features.shape),
            "features": [round(float(v), 7) for v in features.flatten()],
        }
        print(f"{name}: pil diff {reference['images'][name]['pil_backend_max_level_diff']} levels")

    # Prompts with images, expanded as the processor expands them. Lossless images, so the Rust
    # side decodes the reference's pixels exactly.
    prompts = {
        "prompt": (f"<|bos|>The quick brown fox {BOI} looks at the lazy dog.", ["rgb_48x20.png"]),
        "two_images": (
            f"<|bos|>Compare {BOI} with {BOI} and say which.",
            ["rgb_48x20.png", "lossless_33x50.webp"],
        ),
    }
    for key, (text, names) in prompts.items():
        reference[key] = prompt_reference(model, processor, images, text, names)
        print(f"{key}: {len(reference[key]['input_ids'])} tokens, greedy {reference[key]['greedy_tokens']}")
    (OUT / "reference.json").write_text(json.dumps(reference) + "\n")
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
