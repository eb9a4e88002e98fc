#!/usr/bin/env python3
"""Independent GPT-2 reference for kvlm's tests (numpy, float64), written from the published
GPT-2 math the way picoGPT's gpt2.py reads, with the seed's batching semantics: left padding,
an attention mask, position ids max(cumsum(mask) - 1, 0), pad keys masked with -1e10.

It makes a tiny GPT-2 with seeded random weights, writes it as a real Hugging Face folder
(config.json + model.safetensors) in F32, F16 and BF16 storage, and records the reference's
last-position logits and greedy continuations computed from exactly the stored (rounded)
weights. kvlm's C++ tests load those folders and must agree within 1e-4.

The BF16 model gets a second entry, "bf16_dot": the same math with every matmul's input
activations rounded to bf16 first (round to nearest even from their float32 value, a denormal to
zero), then multiplied in float64. That is what kvlm's AVX-512 BF16 kernel (vdpbf16ps,
src/ops/matmul_bf16dot.h) does to each input of a BF16-weight matrix, the output head included;
the C++ test holds that path to this entry within 1e-4, and the widening kernels (fp32 inputs) to
the plain entry.

Regenerate (from the repository root; needs python3-numpy):
    python3 tests/reference/gpt2_reference.py tests/golden
"""
import json
import os
import struct
import sys

import numpy as np

from bf16 import Bf16Activations, from_bf16_bits, keep, to_bf16_bits

CONFIG = dict(vocab_size=96, n_positions=48, n_embd=32, n_layer=2, n_head=4,
              layer_norm_epsilon=1e-5)
PROMPTS = [[7, 3, 19, 1, 25, 8, 11, 4, 2, 15], [9, 2], [1, 6, 4, 22], [95]]
N_NEW = 12


# ---------------------------------------------------------------- the model (picoGPT style)
def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(var + eps) + b


def linear(x, w, b, round_x):  # [.., m] @ [m, n] + [n] -> [.., n]
    return round_x(x) @ w + b


def mha(x, c_attn, c_proj, n_head, mask):  # [B, T, C] -> [B, T, C]
    B, T, C = x.shape
    qkv = linear(x, **c_attn)                                  # [B, T, 3C]
    q, k, v = np.split(qkv, 3, axis=-1)                        # 3 x [B, T, C]
    split = lambda a: a.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)                     # [B, H, T, D]
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(C // n_head) + mask  # [B, H, T, T]
    out = softmax(scores) @ v                                  # [B, H, T, D]
    out = out.transpose(0, 2, 1, 3).reshape(B, T, C)
    return linear(out, **c_proj)


def block(x, mlp, attn, ln_1, ln_2, n_head, mask, eps):
    x = x + mha(layer_norm(x, **ln_1, eps=eps), **attn, n_head=n_head, mask=mask)
    h = gelu(linear(layer_norm(x, **ln_2, eps=eps), **mlp["c_fc"]))
    return x + linear(h, **mlp["c_proj"])


def gpt2(input_ids, pos_ids, mask, wte, wpe, blocks, ln_f, round_x, n_head, eps):
    x = wte[input_ids] + wpe[pos_ids]                          # [B, T, C]
    for b in blocks:
        x = block(x, **b, n_head=n_head, mask=mask, eps=eps)
    return round_x(layer_norm(x, **ln_f, eps=eps)) @ wte.T     # [B, T, V]


def pad_batch(prompts):
    T = max(len(p) for p in prompts)
    ids = np.zeros((len(prompts), T), dtype=np.int64)
    mask = np.zeros((len(prompts), T), dtype=np.int64)
    for i, p in enumerate(prompts):
        ids[i, T - len(p):] = p
        mask[i, T - len(p):] = 1
    return ids, mask


def last_logits(prompts, params, n_head, eps):
    ids, attention_mask = pad_batch(prompts)
    T = ids.shape[1]
    pos_ids = np.clip(np.cumsum(attention_mask, axis=-1) - 1, 0, None)
    causal = (1 - np.tri(T)) * -1e10
    key_pad = (1 - attention_mask)[:, None, None, :] * 1e10
    mask = causal[None, None] - key_pad
    return gpt2(ids, pos_ids, mask, **params, n_head=n_head, eps=eps)[:, -1]


def greedy(prompts, params, n_head, eps, n_new):
    seqs = [list(p) for p in prompts]
    out = [[] for _ in prompts]
    for _ in range(n_new):
        logits = last_logits(seqs, params, n_head, eps)
        for i, row in enumerate(logits):
            tok = int(np.argmax(row))
            out[i].append(tok)
            seqs[i].append(tok)
    return out


# ---------------------------------------------------------------- storage
def stored(a, dtype):
    """(bytes as stored, the float64 values a loader reads back)."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.tobytes(), a.astype(np.float64)
    if dtype == "F16":
        h = a.astype(np.float16)
        return h.tobytes(), h.astype(np.float64)
    bits = to_bf16_bits(a)
    return bits.tobytes(), from_bf16_bits(bits)


def write_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def random_weights(rng):
    C, V, P, L = CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"], CONFIG["n_layer"]
    w = {"wte.weight": rng.normal(0, 0.3, (V, C)), "wpe.weight": rng.normal(0, 0.1, (P, C))}
    for l in range(L):
        h = f"h.{l}."
        w[h + "ln_1.weight"] = 1 + rng.normal(0, 0.1, C)
        w[h + "ln_1.bias"] = rng.normal(0, 0.1, C)
        w[h + "attn.c_attn.weight"] = rng.normal(0, 0.3, (C, 3 * C))
        w[h + "attn.c_attn.bias"] = rng.normal(0, 0.1, 3 * C)
        w[h + "attn.c_proj.weight"] = rng.normal(0, 0.2, (C, C))
        w[h + "attn.c_proj.bias"] = rng.normal(0, 0.1, C)
        w[h + "ln_2.weight"] = 1 + rng.normal(0, 0.1, C)
        w[h + "ln_2.bias"] = rng.normal(0, 0.1, C)
        w[h + "mlp.c_fc.weight"] = rng.normal(0, 0.2, (C, 4 * C))
        w[h + "mlp.c_fc.bias"] = rng.normal(0, 0.1, 4 * C)
        w[h + "mlp.c_proj.weight"] = rng.normal(0, 0.1, (4 * C, C))
        w[h + "mlp.c_proj.bias"] = rng.normal(0, 0.1, C)
    w["ln_f.weight"] = 1 + rng.normal(0, 0.1, C)
    w["ln_f.bias"] = rng.normal(0, 0.1, C)
    return w


def to_params(values, round_x):
    blocks = []
    for l in range(CONFIG["n_layer"]):
        g = lambda n: values[f"h.{l}.{n}"]
        blocks.append({
            "ln_1": {"g": g("ln_1.weight"), "b": g("ln_1.bias")},
            "ln_2": {"g": g("ln_2.weight"), "b": g("ln_2.bias")},
            "attn": {"c_attn": linear_params(g, "attn.c_attn", round_x),
                     "c_proj": linear_params(g, "attn.c_proj", round_x)},
            "mlp": {"c_fc": linear_params(g, "mlp.c_fc", round_x),
                    "c_proj": linear_params(g, "mlp.c_proj", round_x)},
        })
    return {"wte": values["wte.weight"], "wpe": values["wpe.weight"], "blocks": blocks,
            "ln_f": {"g": values["ln_f.weight"], "b": values["ln_f.bias"]}, "round_x": round_x}


def linear_params(g, name, round_x):
    return {"w": g(name + ".weight"), "b": g(name + ".bias"), "round_x": round_x}


def reference_entry(values, round_x):
    params, eps = to_params(values, round_x), CONFIG["layer_norm_epsilon"]
    alone = [last_logits([p], params, CONFIG["n_head"], eps)[0] for p in PROMPTS]
    entry = {}
    if isinstance(round_x, Bf16Activations):
        # Measured on the prompts alone, as kvlm runs them (pad rows are never computed there).
        entry["min_rounding_margin"] = round_x.min_margin
        assert round_x.min_margin > 1e-6, f"an input is {round_x.min_margin} from a bf16 " \
            "rounding point: kvlm's float32 value could round the other way; reseed"
    logits = last_logits(PROMPTS, params, CONFIG["n_head"], eps)
    # Padding must not matter: the batched rows equal each prompt run alone.
    assert max(np.max(np.abs(logits[i] - alone[i])) for i in range(len(PROMPTS))) < 1e-9
    return {"last_logits": [[float(v) for v in row] for row in logits],
            "greedy": greedy(PROMPTS, params, CONFIG["n_head"], eps, N_NEW), **entry}


def main(out_dir):
    weights = random_weights(np.random.default_rng(20261129))
    fixture = {"command": "python3 tests/reference/gpt2_reference.py tests/golden",
               "tolerance": 1e-4, "prompts": PROMPTS, "n_new": N_NEW, "models": {}}
    for dtype in ["F32", "F16", "BF16"]:
        folder = os.path.join(out_dir, "tiny_gpt2_" + dtype.lower())
        os.makedirs(folder, exist_ok=True)
        config = dict(model_type="gpt2", activation_function="gelu_new", **CONFIG)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        tensors, values = [], {}
        for name, a in weights.items():
            blob, values[name] = stored(a, dtype)
            tensors.append(("transformer." + name if dtype == "BF16" else name, dtype,
                            np.shape(a), blob))
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        entry = {"dtype": dtype, **reference_entry(values, keep)}
        if dtype == "BF16":  # every matrix is BF16, so every matmul input is rounded
            entry["bf16_dot"] = reference_entry(values, Bf16Activations())
        fixture["models"][os.path.basename(folder)] = entry
    with open(os.path.join(out_dir, "tiny_gpt2_reference.json"), "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden")
