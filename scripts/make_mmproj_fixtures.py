#!/usr/bin/env python3
"""Writes the GGUF conversion of the multimodal fixtures with llama.cpp's own converter, as users
get them: the language model and, with `--mmproj`, the image encoder's projector file.

fixtures/models/gemma3-vision:

- `fixtures/gguf/gemma3-vision-f16.gguf`: the language model (`gemma3` architecture), as users
  run it with llama-server beside an mmproj file. It is not the checkpoint's text model: the
  fixture's sliding pattern 2 and `query_pre_attn_scalar` 24 have no GGUF keys (llama.cpp
  assumes a pattern of 6 and `head_dim`), the reason fixtures/models/gemma3 is not converted
  either. Serving tests compare it against the fixture directory with its config saying what
  the GGUF means (both layers sliding, `query_pre_attn_scalar` 16).
- `fixtures/gguf/mmproj-gemma3-vision-{f16,q8_0}.gguf`: the vision tower and projector
  (`--mmproj`, `clip.projector_type = gemma3`). The converter keeps some tensors in a fixed type
  whatever the outtype: the patch and position embeddings in f32 (q8_0) or f16/f32 (f16),
  `mm.input_projection` in f16, norms and biases in f32; the q8_0 file holds the encoder
  layers' matrices in q8_0. The converter offers no K types, and llama-quantize does not
  quantize mmproj files.

The fixture stores its vision tower as transformers 5 saves it (`vision_tower.*`), a layout the
converter's name map does not know; the hub's checkpoints say `vision_tower.vision_model.*`.
The conversion runs on a temporary copy whose tensors are renamed to the hub's layout (values
untouched), which is what users convert.

fixtures/models/qwen2_5-vl (hub layout already: `model.*`, `visual.*`, `lm_head.weight`):

- `fixtures/gguf/qwen2_5-vl-{f16,q8_0}.gguf`: the language model, `general.architecture =
  qwen2vl`, the M-RoPE split as `qwen2vl.rope.dimension_sections` (the config's three runs
  padded with a 0 to four), Q/K rows as the checkpoint has them (no permutation), no
  `vocab_size` key. bf16 weights are exact in f16 but some subnormals (off by at most 3e-8, in
  `output`, `ffn_down`); the q8_0 file is llama-quantize's Q8_0 of the
  f16 one (norms and biases stay f32), as gemma3-p6's is.
- its projector files `mmproj-qwen2_5-vl-{f16,q8_0}.gguf` are made by
  scripts/make_qwen_mmproj_fixture.py (`clip.projector_type = qwen2.5vl_merger`; see
  docs/model.md for their keys and tensor names).

Usage: /work/bench-venv/bin/python scripts/make_mmproj_fixtures.py
(needs torch, transformers, safetensors, the llama.cpp source and `llama-quantize` that
../shared/peers/llama-server.sh unpacks and builds; ../shared/peers/to-gguf.py runs the
converter)
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "fixtures" / "models" / "gemma3-vision"
QWEN_VL = ROOT / "fixtures" / "models" / "qwen2_5-vl"
OUT = ROOT / "fixtures" / "gguf"
PEERS = ROOT.parent / "shared" / "peers"
if not PEERS.exists():
    PEERS = Path("/work/shared/peers")


def hub_layout_copy(tmp: Path) -> Path:
    """A copy of the fixture with `vision_tower.` renamed to `vision_tower.vision_model.`."""
    copy = tmp / MODEL.name
    shutil.copytree(MODEL, copy)
    tensors = load_file(copy / "model.safetensors")
    renamed = {}
    for name, t in tensors.items():
        if name.startswith("vision_tower.") and not name.startswith("vision_tower.vision_model."):
            name = "vision_tower.vision_model." + name.removeprefix("vision_tower.")
        renamed[name] = t.contiguous()
    save_file(renamed, copy / "model.safetensors", metadata={"format": "pt"})
    return copy


def convert(model_dir: Path, out: Path, outtype: str, *extra: str) -> None:
    subprocess.run(
        [sys.executable, str(PEERS / "to-gguf.py"), str(model_dir), str(out), "--outtype", outtype, *extra],
        check=True,
        capture_output=True,
    )
    print(f"{out.relative_to(ROOT)}: {out.stat().st_size} bytes")


def quantize(base: Path, out: Path, qtype: str) -> None:
    """llama-quantize's `qtype` preset of `base`."""
    bins = subprocess.run([str(PEERS / "llama-server.sh")], check=True, capture_output=True, text=True)
    quantize = Path(bins.stdout.strip().splitlines()[-1]) / "llama-quantize"
    subprocess.run([str(quantize), str(base), str(out), qtype], check=True, capture_output=True)
    print(f"{out.relative_to(ROOT)}: {out.stat().st_size} bytes")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = hub_layout_copy(Path(tmp))
        convert(copy, OUT / "gemma3-vision-f16.gguf", "f16")
        for outtype in ["f16", "q8_0"]:
            convert(copy, OUT / f"mmproj-gemma3-vision-{outtype}.gguf", outtype, "--mmproj")
    convert(QWEN_VL, OUT / "qwen2_5-vl-f16.gguf", "f16")
    quantize(OUT / "qwen2_5-vl-f16.gguf", OUT / "qwen2_5-vl-q8_0.gguf", "Q8_0")


if __name__ == "__main__":
    main()
