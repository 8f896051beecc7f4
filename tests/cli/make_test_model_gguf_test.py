#!/usr/bin/env python3
"""`switchyard make-test-model --format gguf` against PyPI gguf (0.19.0), a reader and a name map
no one here wrote, and against llama.cpp's converter's rules for a llama checkpoint:

- the file reads with gguf.GGUFReader;
- every tensor of the folder form (model.safetensors, same seed) is in it under the name
  gguf's TensorNameMap gives for llama, with GGUF's reversed dims, holding the same values:
  attn_q / attn_k rows permuted by convert_hf_to_gguf.py's LlamaModel.permute, the norms
  widened to f32 in a bf16 model;
- the llama.* hyper-parameters llama.cpp reads (named by gguf.Keys) are config.json's;
- the vocabulary is tokenizer.json's, in id order, padded to vocab_size with [PAD<id>] tokens
  of type UNUSED, and the merges are tokenizer.json's.

    make_test_model_gguf_test.py SWITCHYARD
Not a timed test; runs the tiny shape in f32 and bf16.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import gguf
import numpy as np


def read_safetensors(path):
    """name -> numpy array (F32 as float32, BF16 as its raw uint16), from the format's layout."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        dtype = {"F32": np.float32, "BF16": np.uint16}[t["dtype"]]
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(t["shape"])
    return out


def permute(weights, n_head, n_head_kv):
    """convert_hf_to_gguf.py, LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def field(reader, key):
    f = reader.fields.get(key)
    assert f is not None, f"missing metadata {key}"
    return f.contents()


def check(switchyard, dtype, tmp):
    folder, gdir = tmp / f"folder-{dtype}", tmp / f"gguf-{dtype}"
    for out, fmt in ((folder, "safetensors"), (gdir, "gguf")):
        subprocess.run([switchyard, "make-test-model", str(out), "--dtype", dtype, "--seed", "7",
                        "--format", fmt], check=True, capture_output=True)
    config = json.loads((folder / "config.json").read_text())
    tok = json.loads((folder / "tokenizer.json").read_text())
    hf = read_safetensors(folder / "model.safetensors")
    reader = gguf.GGUFReader(str(gdir / "model.gguf"))

    n_head, n_kv = config["num_attention_heads"], config["num_key_value_heads"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == len(hf), (sorted(tensors), sorted(hf))
    for hf_name, value in hf.items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name in tensors, f"{hf_name} -> {name} not in the file"
        t = tensors[name]
        assert [int(d) for d in t.shape] == list(reversed(value.shape)), (name, t.shape)
        want = value
        if hf_name.endswith("q_proj.weight"):
            want = permute(value, n_head, n_head)
        elif hf_name.endswith("k_proj.weight"):
            want = permute(value, n_head, n_kv)
        if value.ndim == 1 and value.dtype == np.uint16:  # a bf16 norm, widened
            assert t.tensor_type == gguf.GGMLQuantizationType.F32, name
            want = (value.astype(np.uint32) << 16).view(np.float32)
        elif value.dtype == np.uint16:
            assert t.tensor_type == gguf.GGMLQuantizationType.BF16, name
        else:
            assert t.tensor_type == gguf.GGMLQuantizationType.F32, name
        got = np.frombuffer(t.data.tobytes(), dtype=want.dtype).reshape(want.shape)
        assert np.array_equal(got, want), f"{name}: values differ from {hf_name}"

    K = gguf.Keys.LLM
    arch = "llama"
    assert field(reader, gguf.Keys.General.ARCHITECTURE) == arch
    expect = {
        K.VOCAB_SIZE: config["vocab_size"],
        K.CONTEXT_LENGTH: config["max_position_embeddings"],
        K.EMBEDDING_LENGTH: config["hidden_size"],
        K.BLOCK_COUNT: config["num_hidden_layers"],
        K.FEED_FORWARD_LENGTH: config["intermediate_size"],
        gguf.Keys.Attention.HEAD_COUNT: n_head,
        gguf.Keys.Attention.HEAD_COUNT_KV: n_kv,
        gguf.Keys.Attention.KEY_LENGTH: config["head_dim"],
        gguf.Keys.Attention.VALUE_LENGTH: config["head_dim"],
        gguf.Keys.Rope.DIMENSION_COUNT: config["head_dim"],
    }
    for key, value in expect.items():
        assert field(reader, key.format(arch=arch)) == value, key
    for key, value in ((gguf.Keys.Attention.LAYERNORM_RMS_EPS, config["rms_norm_eps"]),
                       (gguf.Keys.Rope.FREQ_BASE, config["rope_theta"])):
        assert np.isclose(field(reader, key.format(arch=arch)), value, rtol=1e-6), key

    T = gguf.Keys.Tokenizer
    assert field(reader, T.MODEL) == "gpt2"
    tokens = field(reader, T.LIST)
    types = field(reader, T.TOKEN_TYPE)
    assert len(tokens) == len(types) == config["vocab_size"]
    by_id = {i: s for s, i in tok["model"]["vocab"].items()}
    by_id.update({a["id"]: a["content"] for a in tok["added_tokens"]})
    for i in range(config["vocab_size"]):
        if i in by_id:
            assert tokens[i] == by_id[i], (i, tokens[i], by_id[i])
            special = any(a["id"] == i and a["special"] for a in tok["added_tokens"])
            want_type = gguf.TokenType.CONTROL if special else gguf.TokenType.NORMAL
        else:
            assert tokens[i] == f"[PAD{i}]", (i, tokens[i])
            want_type = gguf.TokenType.UNUSED
        assert types[i] == want_type, (i, types[i])
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    assert field(reader, T.MERGES) == merges
    print(f"{dtype}: {len(tensors)} tensors and the llama metadata match PyPI gguf's reading")


def main():
    switchyard = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("f32", "bf16"):
            check(switchyard, dtype, pathlib.Path(tmp))


if __name__ == "__main__":
    main()
