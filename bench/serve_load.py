#!/usr/bin/env python3
"""Load benchmark of `switchyard serve`: aggregate generated tokens/s, and p50/p99 time to first
token (TTFT) and inter-token latency (ITL), at 1, 4, 8 and 16 concurrent streaming clients.

    build/test-venv/bin/python bench/serve_load.py MODEL [--clients 1,4,8,16]
        [--requests 4] [--max-tokens 64] [--parallel 16] [--serve-args "--max-batch-tokens 64"]
        [--url http://127.0.0.1:PORT] [--json-schema FILE]

It starts `switchyard serve MODEL --port 0 --parallel P` on 127.0.0.1 (or measures a running
server of any kind with --url, e.g. llama-server, for a comparison in the same conditions), then
for each client count C runs C clients, each sending --requests streaming chat requests one
after the other (every prompt different; greedy; ignore_eos, so each generates --max-tokens).

Measured as vLLM's benchmark_serving does: TTFT from sending a request to its first content
chunk; ITL between consecutive content chunks of a stream; aggregate tokens/s = every token the
level generated over the level's wall time. The clients are one asyncio process on httpx2
(the async HTTP client the openai package brings; build/test-venv has it), not a thread per
stream, because they share the server's cores; the client's own CPU time is reported beside each
level as a share of the wall time: what the measurement takes from the server.
--json-schema FILE sends every request with response_format json_schema (the schema in FILE):
the same load held to a grammar, to compare with the unconstrained run (the answers end when the
value is whole, so the levels count the tokens actually generated).
Needs the venv of scripts/setup-test-venv.sh. Not run by the build.
"""

import argparse
import asyncio
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import httpx2


def percentile(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


TOPICS = ["a lighthouse", "the moon", "a red bicycle", "winter", "a lost key", "the sea",
          "a small robot", "an old library", "a volcano", "a garden", "the desert", "a river"]


RESPONSE_FORMAT = None  # --json-schema: the response_format every request sends


async def one_request(client, url, model, prompt, max_tokens, out):
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    if RESPONSE_FORMAT:
        body["response_format"] = RESPONSE_FORMAT
    start = time.perf_counter()
    last = None
    tokens = 0
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {await r.aread()}")
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if not chunk.get("choices") or not chunk["choices"][0]["delta"].get("content"):
                continue
            now = time.perf_counter()
            if last is None:
                out["ttft"].append(now - start)
            else:
                out["itl"].append(now - last)
            last = now
    out["tokens"] += tokens


async def level(url, model, clients, requests, max_tokens):
    out = {"ttft": [], "itl": [], "tokens": 0}
    limits = httpx2.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx2.AsyncClient(timeout=600, limits=limits) as client:
        async def worker(c):
            for i in range(requests):
                topic = TOPICS[(c * requests + i) % len(TOPICS)]
                prompt = f"Client {c}, request {i}: write a short story about {topic}."
                await one_request(client, url, model, prompt, max_tokens, out)

        await one_request(client, url, model, "Warm up.", 8, {"ttft": [], "itl": [],
                                                               "tokens": 0})
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(c) for c in range(clients)))
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    return {"clients": clients, "requests": clients * requests, "tokens": out["tokens"],
            "wall_s": wall, "tokens_per_s": out["tokens"] / wall,
            "ttft_p50_ms": 1e3 * percentile(out["ttft"], 0.5),
            "ttft_p99_ms": 1e3 * percentile(out["ttft"], 0.99),
            "itl_p50_ms": 1e3 * percentile(out["itl"], 0.5),
            "itl_p99_ms": 1e3 * percentile(out["itl"], 0.99),
            "client_cpu_share": cpu / wall}


def start_server(switchyard, model, parallel, context, extra):
    log = tempfile.TemporaryFile()  # the server's standard error: its access log
    proc = subprocess.Popen([switchyard, "serve", model, "--port", "0", "--parallel",
                             str(parallel), "--context", str(context), *extra],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    for line in proc.stdout:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if m:
            return proc, m.group(1)
    log.seek(0)
    raise RuntimeError("switchyard serve did not start: " + log.read().decode())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default="build/model-cache/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--switchyard", default="build/bin/switchyard")
    ap.add_argument("--clients", default="1,4,8,16")
    ap.add_argument("--requests", type=int, default=4, help="requests per client, in a row")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--url", help="measure this running server instead of starting one")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--json-schema", help="a JSON Schema file: every request is held to it")
    ap.add_argument("--serve-args", default="", help="more `switchyard serve` flags, one string")
    a = ap.parse_args()
    proc = None
    url = a.url
    if not url:
        proc, url = start_server(a.switchyard, a.model, a.parallel, a.context,
                                 shlex.split(a.serve_args))
    try:
        model = httpx2.get(url + "/v1/models").json()["data"][0]["id"]
        rows = [asyncio.run(level(url, model, int(c), a.requests, a.max_tokens))
                for c in a.clients.split(",")]
    finally:
        if proc:
            proc.terminate()
            proc.wait()
    base = rows[0]
    for r in rows:
        r["speedup"] = r["tokens_per_s"] / base["tokens_per_s"]
        r["itl_p99_over_1_client_p50"] = r["itl_p99_ms"] / base["itl_p50_ms"]
    if a.json:
        print(json.dumps({"model": os.path.basename(a.model), "url": url, "levels": rows},
                         indent=2))
        return
    print(f"{'clients':>7} {'tok/s':>8} {'x 1':>5} {'TTFT p50':>9} {'p99':>8} "
          f"{'ITL p50':>8} {'p99':>8} {'p99/1-p50':>9} {'client CPU':>10}")
    for r in rows:
        print(f"{r['clients']:>7} {r['tokens_per_s']:>8.1f} {r['speedup']:>5.2f} "
              f"{r['ttft_p50_ms']:>7.1f}ms {r['ttft_p99_ms']:>6.1f}ms {r['itl_p50_ms']:>6.1f}ms "
              f"{r['itl_p99_ms']:>6.1f}ms {r['itl_p99_over_1_client_p50']:>9.2f} "
              f"{100 * r['client_cpu_share']:>9.0f}%")


if __name__ == "__main__":
    sys.exit(main())
