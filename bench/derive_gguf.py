#!/usr/bin/env python3
"""Derives a GGUF file from another with the same tensor bytes, except where asked: a draft model
made of a target's first layers, or a target whose later layers are damped. Together they give
speculative decoding benchmarks a controlled acceptance rate on random weights.

    python3 bench/derive_gguf.py IN.gguf DRAFT.gguf --layers L
    python3 bench/derive_gguf.py IN.gguf TARGET.gguf --damp-from L --damp A
    python3 bench/derive_gguf.py mmproj-f16.gguf mmproj-bf16.gguf --bf16

`--layers L` keeps the embeddings, the first L layers, the final norm and the output head (the
very bytes of IN, so the draft's first L layers compute exactly what the target's do).
`--damp-from L --damp A` multiplies the residual branches of layers L and later by A: their
output projections (`attn_output`, `ffn_down`), or the norms after them where the layers have
such norms (Gemma's `post_attention_norm`, `post_ffw_norm`), which would undo a scaled
projection. At A = 0 those layers add nothing and the target computes exactly what the
L-layer draft does: every draft token is accepted. As A grows toward 1 they change more of its
choices. The scaling is applied to the quantized blocks' scales (d, and dmin where the type has
one), so the file keeps its types and the servers run the same kernels on it.
`--bf16` stores every f16 tensor as bf16 (rounded to nearest even): a projector file on which
both servers multiply in bf16.
"""
import argparse
import re

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType as Q

# Bytes per block, and the byte offsets of the f16 scales that multiply every value of a block.
SCALES = {
    Q.Q4_0: (18, [0]),
    Q.Q5_0: (22, [0]),
    Q.Q8_0: (34, [0]),
    Q.Q4_K: (144, [0, 2]),  # d, dmin: w = d * sc * q - dmin * m
    Q.Q5_K: (176, [0, 2]),
    Q.Q6_K: (210, [208]),  # ql, qh, scales, then d
}

LAYER = re.compile(r"^blk\.(\d+)\.")
BRANCH_OUTPUTS = ("attn_output.weight", "ffn_down.weight")
POST_NORMS = ("post_attention_norm.weight", "post_ffw_norm.weight")


def scaled(tensor, factor):
    """The tensor's bytes with every value multiplied by `factor`."""
    data = np.array(tensor.data)  # a copy of the memory-mapped bytes or values
    if tensor.tensor_type in (Q.F32, Q.F16):
        return (data * factor).astype(data.dtype)
    if tensor.tensor_type not in SCALES:
        raise SystemExit(f"{tensor.name}: cannot scale type {tensor.tensor_type.name}")
    size, offsets = SCALES[tensor.tensor_type]
    blocks = data.reshape(-1, size)
    for off in offsets:
        d = blocks[:, off:off + 2].copy().view(np.float16)
        blocks[:, off:off + 2] = (d.astype(np.float32) * factor).astype(np.float16).view(np.uint8)
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--layers", type=int, help="keep the first L layers only")
    parser.add_argument("--damp-from", type=int, help="first layer whose residual branches are damped")
    parser.add_argument("--damp", type=float, default=1.0, help="factor of the damped branches")
    parser.add_argument("--bf16", action="store_true", help="store f16 tensors as bf16")
    args = parser.parse_args()

    reader = GGUFReader(args.input, "r")
    arch = reader.fields["general.architecture"].contents()
    count_field = reader.fields.get(f"{arch}.block_count")
    layers = int(count_field.contents()) if count_field else None
    keep_layers = args.layers if args.layers is not None else layers
    if args.layers is not None and not (layers and 0 < keep_layers <= layers):
        parser.error(f"--layers must be in 1..{layers}")

    writer = GGUFWriter(args.output, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == f"{arch}.block_count" and keep_layers is not None:
            writer.add_uint32(name, keep_layers)
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub_type)

    def layer(tensor):
        m = LAYER.match(tensor.name)
        return int(m.group(1)) if m else None

    kept = [t for t in reader.tensors
            if layer(t) is None or keep_layers is None or layer(t) < keep_layers]

    post_norms = any(t.name.endswith(POST_NORMS) for t in reader.tensors)
    branch_ends = POST_NORMS if post_norms else BRANCH_OUTPUTS

    def damped(tensor):
        i = layer(tensor)
        return (args.damp_from is not None and i is not None and i >= args.damp_from
                and tensor.name.endswith(branch_ends))

    def as_bf16(tensor):
        return args.bf16 and tensor.tensor_type == Q.F16

    def bf16_bits(tensor):
        bits = np.asarray(tensor.data, dtype=np.float32).view(np.uint32)
        rounded = bits + 0x7FFF + ((bits >> 16) & 1)  # to nearest even (no NaN in weights)
        return (rounded >> 16).astype(np.uint16)

    for t in kept:
        if as_bf16(t):
            writer.add_tensor_info(t.name, t.data.shape, np.dtype(np.uint16), t.data.nbytes, Q.BF16)
        else:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    count = 0
    for t in kept:
        if damped(t):
            writer.write_tensor_data(scaled(t, args.damp))
            count += 1
        elif as_bf16(t):
            writer.write_tensor_data(bf16_bits(t))
        else:
            writer.write_tensor_data(t.data)
    writer.close()
    converted = sum(1 for t in kept if as_bf16(t))
    print(f"{args.output}: {keep_layers} of {layers} layers, {count} tensors scaled by {args.damp}, "
          f"{converted} f16 tensors stored as bf16")


if __name__ == "__main__":
    main()
