#!/usr/bin/env python3
"""Writes a copy of a GGUF file with every quantized tensor re-quantized, metadata and float
tensors unchanged (general.file_type excepted), as one type or as one of llama-quantize's mixes:

  Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 MXFP4  every quantized tensor in that type (PyPI gguf's quantizers);
  Q4_K Q5_K Q6_K IQ4_NL IQ4_XS    the same, with tests/fixtures/gguf/ggml_blocks.py's writers;
  F32 BF16                        the model with plain weights;
  Q4_K_M Q5_K_M IQ4_XS_MIX        llama-quantize's mixes for a llama model (llama.cpp's
                                  llama_tensor_get_type): the tied embedding (or output.weight)
                                  Q6_K; attn_v and ffn_down Q6_K on use_more_bits layers (K_M);
                                  the rest Q4_K / Q5_K / IQ4_XS; and, for rows that are not whole
                                  256-element blocks, llama-quantize's fallbacks Q4_K -> Q5_0,
                                  Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL. For SmolLM2-135M
                                  (hidden 576) that is every attention and gate/up matrix.

Re-quantizing already quantized values adds a second rounding: the files are for checking that
every type reads right and for `switchyard bench decode`, not for quality. Deterministic (numpy's
elementwise IEEE arithmetic, no random state): the same input gives the same bytes, so
`make test` can make them (scripts/make-requantized-smollm2.sh) and compare with the SHA-256 the
expected values were recorded for.

    python3 -m pip install gguf numpy
    python3 bench/requantize_gguf.py build/model-cache/SmolLM2-135M-Instruct.Q4_1.gguf \\
        /tmp/SmolLM2-135M-Instruct.Q4_K_M.gguf Q4_K_M
"""
import os
import re
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures", "gguf"))
import ggml_blocks  # noqa: E402

FLOAT = {T.F32, T.F16, T.BF16}
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL"}
MIXES = {"Q4_K_M": ("Q4_K", True, gguf.LlamaFileType.MOSTLY_Q4_K_M),
         "Q5_K_M": ("Q5_K", True, gguf.LlamaFileType.MOSTLY_Q5_K_M),
         "IQ4_XS_MIX": ("IQ4_XS", False, gguf.LlamaFileType.MOSTLY_IQ4_XS)}


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def mix_type(kind, name, row, layers, tied):
    """llama-quantize's type for tensor `name` (rows of `row`) under mix `kind`."""
    base, more_bits, _ = MIXES[kind]
    t = base
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        t = "Q6_K"
    m = re.match(r"blk\.(\d+)\.(attn_v|ffn_down)\.weight$", name)
    if more_bits and m and use_more_bits(int(m.group(1)), layers):
        t = "Q6_K"
    if t in FALLBACK and row % 256 != 0:
        t = FALLBACK[t]
    return t


def copy_metadata(reader, writer, file_type):
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if name == "general.file_type" and file_type is not None:
            writer.add_key_value(name, int(file_type), vtype)
        elif vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                value = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                value = [field.parts[i][0].item() for i in field.data]
            writer.add_key_value(name, value, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_key_value(name, bytes(field.parts[-1]).decode("utf-8"), vtype)
        else:
            writer.add_key_value(name, field.parts[-1][0].item(), vtype)


def main():
    src, dst, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    reader = gguf.GGUFReader(src)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    layers = int(reader.fields[f"{arch}.block_count"].parts[-1][0])
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    writer = gguf.GGUFWriter(dst, arch)
    copy_metadata(reader, writer, MIXES[kind][2] if kind in MIXES else None)
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))  # rows first
        if t.tensor_type in FLOAT:
            writer.add_tensor(t.name, np.asarray(t.data).reshape(shape), raw_dtype=t.tensor_type)
            continue
        values = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        target = mix_type(kind, t.name, shape[-1], layers, tied) if kind in MIXES else kind
        writer.add_tensor(t.name, ggml_blocks.quantize(values, target), raw_dtype=T[target])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
