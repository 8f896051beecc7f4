#!/usr/bin/env python3
"""Writes a gpt-oss-20b-shaped checkpoint for `switchyard bench decode`: gpt-oss-20b's config
(examples/models/gpt-oss-20b) with fewer layers and a smaller vocabulary, random bf16 weights
and MXFP4 experts (random nibbles under E8M0 scales 2^-7 … 2^-3, as trained experts have), and a
byte-level tokenizer. Every per-layer shape is the real model's (hidden 2880, 64/8 heads of 64,
32 experts of 2880, top-4), so a decode step per layer costs what it costs in gpt-oss-20b. Not
for quality: the weights are noise. Not run by the build.

    python3 -m pip install numpy safetensors
    python3 bench/make_gpt_oss_shape.py /tmp/gpt-oss-shape 2
    switchyard bench decode /tmp/gpt-oss-shape --depths 0 --prompt-len 64
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures", "tokenizer"))
import byte_tokenizer  # noqa: E402


def main():
    out, layers = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
    vocab = 8192
    with open(os.path.join(HERE, "..", "examples", "models", "gpt-oss-20b", "config.json")) as f:
        config = json.load(f)
    config.update(num_hidden_layers=layers, vocab_size=vocab,
                  layer_types=config["layer_types"][:layers], eos_token_id=0, pad_token_id=1)
    H, I, E = config["hidden_size"], config["intermediate_size"], config["num_local_experts"]
    Hq, Hkv, D = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    rng = np.random.default_rng(0)

    def bf16(*shape, scale=0.02):
        x = (rng.standard_normal(shape, dtype=np.float32) * scale).view(np.uint32)
        return (x >> 16).astype(np.uint16)  # bf16 bits (truncated: noise either way)

    def mxfp4(e, rows, k):
        blocks = rng.integers(0, 256, size=(e, rows, k // 32, 16), dtype=np.uint8)
        scales = rng.integers(120, 125, size=(e, rows, k // 32), dtype=np.uint8)
        return blocks, scales

    t = {"model.embed_tokens.weight": bf16(vocab, H), "lm_head.weight": bf16(vocab, H),
         "model.norm.weight": bf16(H, scale=1.0)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = bf16(H, scale=1.0)
        t[p + "post_attention_layernorm.weight"] = bf16(H, scale=1.0)
        for name, rows, cols in (("q", Hq * D, H), ("k", Hkv * D, H), ("v", Hkv * D, H),
                                 ("o", H, Hq * D)):
            t[p + f"self_attn.{name}_proj.weight"] = bf16(rows, cols)
            t[p + f"self_attn.{name}_proj.bias"] = bf16(rows)
        t[p + "self_attn.sinks"] = bf16(Hq, scale=1.0)
        t[p + "mlp.router.weight"] = bf16(E, H)
        t[p + "mlp.router.bias"] = bf16(E)
        e = p + "mlp.experts."
        t[e + "gate_up_proj_blocks"], t[e + "gate_up_proj_scales"] = mxfp4(E, 2 * I, H)
        t[e + "down_proj_blocks"], t[e + "down_proj_scales"] = mxfp4(E, H, I)
        t[e + "gate_up_proj_bias"] = bf16(E, 2 * I)
        t[e + "down_proj_bias"] = bf16(E, H)
    os.makedirs(out, exist_ok=True)
    # numpy has no bf16: the bits go in as uint16 and their dtype is renamed (patch_bf16).
    save_file(t, os.path.join(out, "model.safetensors"))
    patch_bf16(os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    byte_tokenizer.write(out, 256)


def patch_bf16(path):
    """safetensors.numpy writes uint16 arrays as U16: rename them BF16 (the same bytes) and pad the
    rewritten header with spaces to 8 bytes, as the format allows."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    for k, v in header.items():
        if k != "__metadata__" and v["dtype"] == "U16":
            v["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.write(data)


if __name__ == "__main__":
    main()
