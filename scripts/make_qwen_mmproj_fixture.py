#!/usr/bin/env python3
"""Writes `fixtures/gguf/mmproj-qwen2_5-vl-{f16,q8_0}.gguf`: llama.cpp's projector files for
fixtures/models/qwen2_5-vl (`convert_hf_to_gguf.py --mmproj`, `clip.projector_type =
qwen2.5vl_merger`), converted by its own converter. The fixture already stores the hub's names
(`visual.*`), the layout the converter maps, so it converts as it is.

What the converter does with it (see crates/model/src/vision/qwen2_5_vl/mmproj.rs): `qkv` split
into `attn_q/k/v`, the Conv3d split by frame into `v.patch_embd.weight` and `.weight.1`,
`fullatt_block_indexes` [1, 3] written as `n_wa_pattern` 2, no window size (llama.cpp assumes 112
pixels where the checkpoint says 56, so the tests compare the file against the checkpoint loaded
with a 112-pixel window). The f16 file keeps norms and biases in f32; the q8_0 file holds the
blocks' and merger's matrices in q8_0.

Usage: /work/bench-venv/bin/python scripts/make_qwen_mmproj_fixture.py
(the llama.cpp source that ../shared/peers/llama-server.sh unpacks; ../shared/peers/to-gguf.py
runs the converter)
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "fixtures" / "models" / "qwen2_5-vl"
OUT = ROOT / "fixtures" / "gguf"
PEERS = ROOT.parent / "shared" / "peers"
if not PEERS.exists():
    PEERS = Path("/work/shared/peers")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for outtype in ["f16", "q8_0"]:
        out = OUT / f"mmproj-qwen2_5-vl-{outtype}.gguf"
        subprocess.run(
            [sys.executable, str(PEERS / "to-gguf.py"), str(MODEL), str(out), "--outtype", outtype, "--mmproj"],
            check=True,
            capture_output=True,
        )
        print(f"{out.relative_to(ROOT)}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
