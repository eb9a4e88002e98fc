#!/usr/bin/env python3
"""Perplexity reference for `kvlm perplexity` (numpy, float64), on the tiny GPT-2 fixture that
gpt2_reference.py writes (tests/golden/tiny_gpt2_f32), with the windows eval/perplexity.h
defines:
  * default (llama-perplexity): floor(N / ctx) windows [k ctx, (k + 1) ctx); offsets
    ctx // 2 + 1 .. ctx - 1 of each scored, each from the window's tokens before it;
  * stride S (Hugging Face): windows of up to ctx tokens at 0, S, 2S, ... until one reaches the
    end; each scores the tokens past the previous window's end (the first: offsets 1..).
Every window is one full causal pass from position 0.

Regenerate (from the repository root; needs python3-numpy; gpt2_reference.py's folders must
exist, they are in the repository):
    python3 tests/reference/perplexity_reference.py tests/golden
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

N_TOKENS = 100
CASES = [dict(ctx=16, stride=0), dict(ctx=48, stride=0), dict(ctx=24, stride=8),
         dict(ctx=48, stride=48)]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(info["shape"]).astype(
            np.float64)
    return out


def windows(n, ctx, stride):
    if stride == 0:
        return [(k * ctx, ctx, ctx // 2 + 1) for k in range(n // ctx)]
    out, prev_end, first = [], 0, 0
    while True:
        end = min(first + ctx, n)
        ft = max(prev_end, first + 1) - first
        if ft < end - first:
            out.append((first, end - first, ft))
        prev_end = end
        if end == n:
            return out
        first += stride


def log_softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def perplexity(tokens, params, ctx, stride):
    nll, count = 0.0, 0
    for first, length, ft in windows(len(tokens), ctx, stride):
        w = np.array(tokens[first:first + length])[None]
        mask = ((1 - np.tri(length)) * -1e10)[None, None]
        logits = ref.gpt2(w, np.arange(length)[None], mask, **params,
                          n_head=ref.CONFIG["n_head"], eps=ref.CONFIG["layer_norm_epsilon"])[0]
        lp = log_softmax(logits)
        for t in range(ft, length):
            nll -= lp[t - 1, w[0, t]]
            count += 1
    return float(np.exp(nll / count)), count


def main(out_dir):
    folder = os.path.join(out_dir, "tiny_gpt2_f32")
    params = ref.to_params(read_safetensors(os.path.join(folder, "model.safetensors")))
    rng = np.random.default_rng(20261201)
    tokens = [int(t) for t in rng.integers(0, ref.CONFIG["vocab_size"], N_TOKENS)]
    fixture = {"command": "python3 tests/reference/perplexity_reference.py tests/golden",
               "model": "tiny_gpt2_f32", "tolerance": 1e-6, "tokens": tokens, "cases": []}
    for case in CASES:
        ppl, count = perplexity(tokens, params, case["ctx"], case["stride"])
        fixture["cases"].append(dict(case, ppl=ppl, scored=count))
    with open(os.path.join(out_dir, "tiny_gpt2_perplexity.json"), "w") as f:
        json.dump(fixture, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden")
