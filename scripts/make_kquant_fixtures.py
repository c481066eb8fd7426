#!/usr/bin/env python3
"""Writes fixture blocks for the K-quant dequantization tests.

For each K-quant type: fixtures/quants/<type>.blocks holds a few random but valid blocks
(random level and scale bytes, finite f16 super-block scales), and fixtures/quants/<type>.f32
the little-endian f32 values the `gguf` package's reference dequantizer makes of them.

    python scripts/make_kquant_fixtures.py   # needs `pip install gguf numpy`
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

BLOCKS = 3
# (type, bytes per block, byte offsets of the f16 super-block scales)
TYPES = [
    (T.Q2_K, 84, [80, 82]),
    (T.Q3_K, 110, [108]),
    (T.Q4_K, 144, [0, 2]),
    (T.Q5_K, 176, [0, 2]),
    (T.Q6_K, 210, [208]),
]


def main() -> None:
    out = Path(__file__).resolve().parent.parent / "fixtures" / "quants"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(13)
    for qtype, size, f16_offsets in TYPES:
        blocks = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
        for offset in f16_offsets:
            scales = (rng.standard_normal(BLOCKS) * 0.01).astype(np.float16)
            blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(BLOCKS, 2)
        values = dequantize(blocks.reshape(-1), qtype).astype("<f4")
        assert values.size == BLOCKS * 256 and np.isfinite(values).all()
        name = qtype.name.lower()
        (out / f"{name}.blocks").write_bytes(blocks.tobytes())
        (out / f"{name}.f32").write_bytes(values.tobytes())
        print(f"{name}: {BLOCKS} blocks, {blocks.nbytes + values.nbytes} bytes")


if __name__ == "__main__":
    main()
