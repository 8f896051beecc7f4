#!/usr/bin/env python3
"""Writes a copy of a GGUF file with every quantized tensor re-quantized to another type (Q8_0,
Q4_0, Q4_1, Q5_0 or Q5_1: the ones PyPI gguf can quantize; or F32 / BF16: the model with plain weights),
metadata and float tensors unchanged. For
benchmarks of one model in several weight types (`switchyard bench decode`), not for quality:
re-quantizing already quantized values adds the second rounding. Not run by the build.

    python3 -m pip install gguf numpy
    python3 bench/requantize_gguf.py build/model-cache/SmolLM2-135M-Instruct.Q4_1.gguf \
        /tmp/SmolLM2-135M-Instruct.Q8_0.gguf Q8_0
"""
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

FLOAT = {T.F32, T.F16, T.BF16}


def main():
    src, dst, kind = sys.argv[1], sys.argv[2], T[sys.argv[3]]
    reader = gguf.GGUFReader(src)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
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
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))  # rows first
        if t.tensor_type in FLOAT:
            writer.add_tensor(t.name, np.asarray(t.data).reshape(shape), raw_dtype=t.tensor_type)
            continue
        values = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        writer.add_tensor(t.name, quantize(values, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
