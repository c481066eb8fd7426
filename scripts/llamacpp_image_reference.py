#!/usr/bin/env python3
"""Records what llama.cpp computes for a prompt with an image on the vision GGUF fixtures, for
the Rust tests to hold sluice to it: llama-server with the fixture's projector file (`--mmproj`),
one prompt of text, an image and text through `/completion` (`multimodal_data`), and the
next-token log-probabilities after it (the whole vocabulary, before sampling).

The images are ones neither server resizes, so both encode the same pixels whatever their
resize filters: Gemma 3's fixture takes 32x32 images (`rgb_32x32.png` of its references), and a
112x112 image is a whole number of Qwen2.5-VL's 28-pixel merged patches inside llama.cpp's pixel
bounds (written here, deterministically, to fixtures/gguf/images/).

llama.cpp's media marker (random per server, read from `/props`) becomes `img_beg`, the image's embeddings and `img_end` (mtmd.cpp:
`<start_of_image>`/`<end_of_image>` for Gemma 3, `<|vision_start|>`/`<|vision_end|>` for
Qwen2.5-VL), the text around it tokenized with special tokens and a BOS where the vocabulary
adds one; the test builds the same ids and checks the prompt length llama-server reports.

Usage: python3 scripts/llamacpp_image_reference.py (needs ../shared/peers/llama-server.sh's
build). Writes fixtures/gguf/llamacpp-image-reference.json.
"""

import base64
import json
import struct
import subprocess
import urllib.request
import zlib
from pathlib import Path

from llamacpp_reference import llama_server

ROOT = Path(__file__).resolve().parent.parent
GGUF = ROOT / "fixtures" / "gguf"
IMAGES = GGUF / "images"
BEFORE, AFTER = "Describe this image:", " What is in it?"
# A token that is a whole character ("!" in both fixture vocabularies): llama-server reports
# nothing for a sampled token that ends inside a UTF-8 sequence, so the sample is biased to it;
# the reported log-probabilities are the raw logits' (post_sampling_probs is off).
WHOLE_CHARACTER = 5


def png(width: int, height: int) -> bytes:
    """A deterministic RGB PNG with gradients and a stripe pattern, standard library only."""
    rows = []
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            row += bytes(((x * 255) // width, (y * 255) // height, ((x // 7 + y // 5) * 53) % 256))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


def distribution(server: Path, model: Path, mmproj: Path, image: bytes, vocab: int) -> dict:
    with llama_server(server, model, 512, "--mmproj", str(mmproj)) as port:
        # The server's media marker is random unless pinned; /props names it.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=10) as r:
            marker = json.load(r)["media_marker"]
        body = {
            "prompt": {"prompt_string": BEFORE + marker + AFTER,
                       "multimodal_data": [base64.b64encode(image).decode()]},
            "n_predict": 1, "n_probs": vocab, "temperature": 0, "cache_prompt": False,
            "logit_bias": [[WHOLE_CHARACTER, 1000.0]],
        }
        request = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                         data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as r:
            out = json.load(r)
        if "completion_probabilities" not in out:
            raise RuntimeError(f"{model.name}: unexpected answer {str(out)[:300]}")
        top = out["completion_probabilities"][0]["top_logprobs"]
        assert len(top) == vocab, f"{model.name}: {len(top)} of {vocab} log-probs"
        row = [None] * vocab
        for entry in top:
            row[entry["id"]] = round(entry["logprob"], 6)
        return {"prompt_tokens": out["tokens_evaluated"], "logprobs": row}


def main() -> None:
    out = subprocess.run([str(ROOT.parent / "shared/peers/llama-server.sh")], check=True,
                         capture_output=True, text=True)
    server = Path(out.stdout.strip().splitlines()[-1]) / "llama-server"
    IMAGES.mkdir(exist_ok=True)
    qwen_image = IMAGES / "rgb_112x112.png"
    qwen_image.write_bytes(png(112, 112))
    cases = {
        "gemma3-vision": ROOT / "fixtures/models/gemma3-vision/images/rgb_32x32.png",
        "qwen2_5-vl": qwen_image,
    }
    result = {"before": BEFORE, "after": AFTER, "models": {}}
    for name, image in cases.items():
        config = json.loads((ROOT / "fixtures/models" / name / "config.json").read_text())
        vocab = (config.get("text_config") or config)["vocab_size"]
        model, mmproj = GGUF / f"{name}-f16.gguf", GGUF / f"mmproj-{name}-f16.gguf"
        found = distribution(server, model, mmproj, image.read_bytes(), vocab)
        best = max(range(vocab), key=lambda t: found["logprobs"][t])
        print(f"{name}: {found['prompt_tokens']} prompt tokens, argmax {best}")
        result["models"][name] = {
            "model": model.name,
            "mmproj": mmproj.name,
            "image": str(image.relative_to(ROOT)),
            **found,
        }
    (GGUF / "llamacpp-image-reference.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
