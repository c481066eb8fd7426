#!/usr/bin/env python3
"""Writes the GGUF conversion of fixtures/models/gemma3-vision with llama.cpp's own converter:

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

Usage: /work/bench-venv/bin/python scripts/make_mmproj_fixtures.py
(needs torch, transformers, safetensors and the llama.cpp source that ../shared/peers/
llama-server.sh unpacks; ../shared/peers/to-gguf.py runs the converter)
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "fixtures" / "models" / "gemma3-vision"
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


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = hub_layout_copy(Path(tmp))
        convert(copy, OUT / "gemma3-vision-f16.gguf", "f16")
        for outtype in ["f16", "q8_0"]:
            convert(copy, OUT / f"mmproj-gemma3-vision-{outtype}.gguf", outtype, "--mmproj")


if __name__ == "__main__":
    main()
