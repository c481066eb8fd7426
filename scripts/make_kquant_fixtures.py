#!/usr/bin/env python3
"""Writes fixture blocks for the dequantization tests of the quantized types.

For each K-quant and 32-weight block type: fixtures/quants/<type>.blocks holds a few random but valid blocks
(random level and scale bytes, finite f16 super-block scales), and fixtures/quants/<type>.f32
the little-endian f32 values the `gguf` package's reference dequantizer makes of them.

    python scripts/make_kquant_fixtures.py   # needs `pip install gguf numpy`
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

BLOCKS = 3
# (type, weights per block, bytes per block, byte offsets of the f16 scales)
TYPES = [
    (T.Q2_K, 256, 84, [80, 82]),
    (T.Q3_K, 256, 110, [108]),
    (T.Q4_K, 256, 144, [0, 2]),
    (T.Q5_K, 256, 176, [0, 2]),
    (T.Q6_K, 256, 210, [208]),
    (T.Q8_0, 32, 34, [0]),
    (T.Q4_0, 32, 18, [0]),
    (T.Q4_1, 32, 20, [0, 2]),
    (T.Q5_0, 32, 22, [0]),
    (T.Q5_1, 32, 24, [0, 2]),
]


def main() -> None:
    out = Path(__file__).resolve().parent.parent / "fixtures" / "quants"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(13)
    for qtype, weights, size, f16_offsets in TYPES:
        blocks = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
        for offset in f16_offsets:
            scales = (rng.standard_normal(BLOCKS) * 0.01).astype(np.float16)
            blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(BLOCKS, 2)
        values = dequantize(blocks.reshape(-1), qtype).astype("<f4")
        assert values.size == BLOCKS * weights and np.isfinite(values).all()
        name = qtype.name.lower()
        (out / f"{name}.blocks").write_bytes(blocks.tobytes())
        (out / f"{name}.f32").write_bytes(values.tobytes())
        print(f"{name}: {BLOCKS} blocks, {blocks.nbytes + values.nbytes} bytes")


if __name__ == "__main__":
    main()
