#!/usr/bin/env python3
"""Independent Llama reference for kvlm's tests (numpy, float64), written from the published
Llama math, in both of its common spellings:

  * llama2.c's model.py: RoPE rotates the pairs (2i, 2i+1) of each head (apply_rotary_emb over
    complex numbers), weights as stored in a llama2.c model.bin;
  * Hugging Face's LlamaForCausalLM: RoPE rotates the halves (i, i + D/2) (rotate_half), with
    q_proj / k_proj rows permuted as convert_llama_weights_to_hf.py permutes them.

Both use RMSNorm (x / sqrt(mean(x^2) + eps) * weight), grouped-query attention (query head h
reads key/value head h // (H / G), i.e. repeat_kv), SwiGLU (down(silu(gate x) * up x)), and a
final norm before the output head (the embedding when tied). The script makes tiny models with
seeded random weights, writes them as real files (a llama2.c model.bin in the legacy version-0
layout and Hugging Face folders), computes every prompt's last-position logits and greedy
continuations from exactly the stored (rounded) weights, and checks that the two spellings agree
on the same model before writing the fixture. kvlm's C++ tests load those files and must agree
within 1e-4.

A BF16 model gets a second entry, "bf16_dot": the same math with every matmul's input
activations rounded to bf16 first (round to nearest even from their float32 value, a denormal to
zero), then multiplied in float64. That is what kvlm's AVX-512 BF16 kernel (vdpbf16ps,
src/ops/matmul_bf16dot.h) does to each input of a BF16-weight matrix, the output head included;
the C++ test holds that path to this entry within 1e-4, and the widening kernels (fp32 inputs) to
the plain entry.

Regenerate (from the repository root; needs numpy, which Debian's python3-numpy provides to
/usr/bin/python3):
    /usr/bin/python3 tests/reference/llama_reference.py tests/golden
"""
import json
import os
import struct
import sys

import numpy as np

from bf16 import Bf16Activations, from_bf16_bits, keep, to_bf16_bits

PROMPTS = [[7, 3, 19, 1, 25, 8, 11, 4, 2, 15], [9, 2], [1, 6, 4, 22], [37]]
N_NEW = 10

# A: GQA (4 query heads over 2 KV heads), head_dim 6 (three rotary pairs), tied output head,
# llama2.c's constants (eps 1e-5, theta 10000); written both as model.bin and as an HF folder.
# B: MQA (one KV head), untied head, theta 500000, eps 1e-6, BF16 storage; HF folder only.
MODELS = {
    "tiny_llama_gqa": dict(dim=24, hidden_dim=40, n_layers=2, n_heads=4, n_kv_heads=2,
                           vocab_size=48, seq_len=32, tied=True, theta=10000.0, eps=1e-5,
                           dtype="F32", seed=20261129, llama2c=True),
    "tiny_llama_mqa_untied": dict(dim=16, hidden_dim=36, n_layers=2, n_heads=2, n_kv_heads=1,
                                  vocab_size=40, seq_len=24, tied=False, theta=500000.0,
                                  eps=1e-6, dtype="BF16", seed=7, llama2c=False),
}


# ---------------------------------------------------------------- shared pieces
def rmsnorm(x, w, eps):  # [T, C] -> [T, C]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def inv_freq(head_dim, theta):  # [D/2]
    return 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def attention(q, k, v, n_heads, n_kv_heads):  # q [T, H, D], k, v [T, G, D] -> [T, H*D]
    T, _, D = q.shape
    group = n_heads // n_kv_heads
    k = np.repeat(k, group, axis=1)  # repeat_kv: head h reads KV head h // group
    v = np.repeat(v, group, axis=1)
    scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)  # [H, T, T]
    scores = scores + np.triu(np.full((T, T), -np.inf), k=1)
    out = np.einsum("hts,shd->thd", softmax(scores), v)
    return out.reshape(T, n_heads * D)


def transformer(tokens, p, cfg, rope, round_x):
    """Logits [T, V]. p holds [out, in] matrices; rope(x [T, heads, D]) rotates in place;
    round_x(x) is what each matmul reads of its input x (keep, or Bf16Activations())."""
    H, G, C = cfg["n_heads"], cfg["n_kv_heads"], cfg["dim"]
    D = C // H
    x = p["embed"][tokens]
    for L in p["layers"]:
        h = round_x(rmsnorm(x, L["attn_norm"], cfg["eps"]))
        q = (h @ L["wq"].T).reshape(-1, H, D)
        k = (h @ L["wk"].T).reshape(-1, G, D)
        v = (h @ L["wv"].T).reshape(-1, G, D)
        x = x + round_x(attention(rope(q), rope(k), v, H, G)) @ L["wo"].T
        h = round_x(rmsnorm(x, L["ffn_norm"], cfg["eps"]))
        x = x + round_x(silu(h @ L["w1"].T) * (h @ L["w3"].T)) @ L["w2"].T
    return round_x(rmsnorm(x, p["final_norm"], cfg["eps"])) @ p["lm_head"].T


# ---------------------------------------------------------------- the two RoPE spellings
def rope_pairs(cfg):  # llama2.c model.py: (x0 + i x1) * e^(i pos f)
    D = cfg["dim"] // cfg["n_heads"]
    f = inv_freq(D, cfg["theta"])

    def apply(x):  # [T, heads, D]
        angle = np.arange(x.shape[0])[:, None] * f[None, :]  # [T, D/2]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out
    return apply


def rope_halves(cfg):  # Hugging Face: x * cos + rotate_half(x) * sin, cos = cat(cos, cos)
    D = cfg["dim"] // cfg["n_heads"]
    f = inv_freq(D, cfg["theta"])

    def apply(x):
        angle = np.arange(x.shape[0])[:, None] * f[None, :]
        emb = np.concatenate([angle, angle], axis=-1)[:, None, :]  # [T, 1, D]
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        rotated = np.concatenate([-x2, x1], axis=-1)
        return x * np.cos(emb) + rotated * np.sin(emb)
    return apply


def hf_permute(w, n_heads):  # convert_llama_weights_to_hf.py's permute, for [out, in] or [out]
    dim1 = w.shape[0]
    rest = w.shape[1:]
    return w.reshape(n_heads, dim1 // n_heads // 2, 2, *rest).swapaxes(1, 2).reshape(dim1, *rest)


# ---------------------------------------------------------------- weights and storage
def random_params(cfg):
    rng = np.random.default_rng(cfg["seed"])
    C, F, V = cfg["dim"], cfg["hidden_dim"], cfg["vocab_size"]
    D = C // cfg["n_heads"]
    Q, KV = cfg["n_heads"] * D, cfg["n_kv_heads"] * D
    s = 1 / np.sqrt(C)
    p = {"embed": rng.normal(0, 0.5, (V, C)), "layers": []}
    for _ in range(cfg["n_layers"]):
        p["layers"].append({
            "attn_norm": 1 + rng.normal(0, 0.1, C),
            "wq": rng.normal(0, 2 * s, (Q, C)),
            "wk": rng.normal(0, 2 * s, (KV, C)),
            "wv": rng.normal(0, s, (KV, C)),
            "wo": rng.normal(0, 3 * s, (C, Q)),
            "ffn_norm": 1 + rng.normal(0, 0.1, C),
            "w1": rng.normal(0, s, (F, C)),
            "w2": rng.normal(0, 3 / np.sqrt(F), (C, F)),
            "w3": rng.normal(0, s, (F, C)),
        })
    p["final_norm"] = 1 + rng.normal(0, 0.1, C)
    p["lm_head"] = p["embed"] if cfg["tied"] else rng.normal(0, s, (V, C))
    return p


def round_to(a, dtype):
    """The values a loader reads back after storing `a` as dtype (float64)."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.astype(np.float64)
    return from_bf16_bits(to_bf16_bits(a))


def stored_bytes(a, dtype):
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.tobytes()
    return to_bf16_bits(a).tobytes()


def rounded_params(p, dtype):
    r = {k: round_to(v, dtype) for k, v in p.items() if k != "layers"}
    r["layers"] = [{k: round_to(v, dtype) for k, v in L.items()} for L in p["layers"]]
    if p["lm_head"] is p["embed"]:
        r["lm_head"] = r["embed"]
    return r


def write_llama2c(path, p, cfg):
    """llama2.c export.py legacy_export (version 0)."""
    D = cfg["dim"] // cfg["n_heads"]
    vocab = cfg["vocab_size"] if cfg["tied"] else -cfg["vocab_size"]
    f32 = lambda a: np.asarray(a, dtype=np.float32).tobytes()
    with open(path, "wb") as out:
        out.write(struct.pack("<7i", cfg["dim"], cfg["hidden_dim"], cfg["n_layers"],
                              cfg["n_heads"], cfg["n_kv_heads"], vocab, cfg["seq_len"]))
        out.write(f32(p["embed"]))
        for name in ["attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"]:
            for L in p["layers"]:
                out.write(f32(L[name]))
        out.write(f32(p["final_norm"]))
        angle = np.outer(np.arange(cfg["seq_len"]), inv_freq(D, cfg["theta"]))
        out.write(f32(np.cos(angle)))  # freq_cis_real, unused by run.c and kvlm
        out.write(f32(np.sin(angle)))  # freq_cis_imag
        if not cfg["tied"]:
            out.write(f32(p["lm_head"]))


def hf_tensors(p, cfg):
    """Hugging Face names -> arrays, q/k permuted as Hugging Face stores them."""
    t = {"model.embed_tokens.weight": p["embed"], "model.norm.weight": p["final_norm"]}
    for l, L in enumerate(p["layers"]):
        h = f"model.layers.{l}."
        t[h + "input_layernorm.weight"] = L["attn_norm"]
        t[h + "self_attn.q_proj.weight"] = hf_permute(L["wq"], cfg["n_heads"])
        t[h + "self_attn.k_proj.weight"] = hf_permute(L["wk"], cfg["n_kv_heads"])
        t[h + "self_attn.v_proj.weight"] = L["wv"]
        t[h + "self_attn.o_proj.weight"] = L["wo"]
        t[h + "post_attention_layernorm.weight"] = L["ffn_norm"]
        t[h + "mlp.gate_proj.weight"] = L["w1"]
        t[h + "mlp.up_proj.weight"] = L["w3"]
        t[h + "mlp.down_proj.weight"] = L["w2"]
    if not cfg["tied"]:
        t["lm_head.weight"] = p["lm_head"]
    return t


def hf_params(t, cfg):
    """Reads Hugging Face tensors back into transformer()'s layout, q/k left permuted."""
    p = {"embed": t["model.embed_tokens.weight"], "final_norm": t["model.norm.weight"],
         "layers": []}
    for l in range(cfg["n_layers"]):
        g = lambda n: t[f"model.layers.{l}.{n}"]
        p["layers"].append({
            "attn_norm": g("input_layernorm.weight"), "wq": g("self_attn.q_proj.weight"),
            "wk": g("self_attn.k_proj.weight"), "wv": g("self_attn.v_proj.weight"),
            "wo": g("self_attn.o_proj.weight"), "ffn_norm": g("post_attention_layernorm.weight"),
            "w1": g("mlp.gate_proj.weight"), "w3": g("mlp.up_proj.weight"),
            "w2": g("mlp.down_proj.weight")})
    p["lm_head"] = t["lm_head.weight"] if "lm_head.weight" in t else p["embed"]
    return p


def write_safetensors(path, tensors, dtype):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        blob = stored_bytes(a, dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(a)),
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


def hf_config(cfg):
    D = cfg["dim"] // cfg["n_heads"]
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
            "vocab_size": cfg["vocab_size"], "hidden_size": cfg["dim"],
            "intermediate_size": cfg["hidden_dim"], "num_hidden_layers": cfg["n_layers"],
            "num_attention_heads": cfg["n_heads"], "num_key_value_heads": cfg["n_kv_heads"],
            "head_dim": D, "max_position_embeddings": cfg["seq_len"],
            "rms_norm_eps": cfg["eps"], "rope_theta": cfg["theta"], "rope_scaling": None,
            "tie_word_embeddings": cfg["tied"], "attention_bias": False,
            "bos_token_id": 1, "eos_token_id": 2,
            "torch_dtype": {"F32": "float32", "BF16": "bfloat16"}[cfg["dtype"]]}


# ---------------------------------------------------------------- fixture
def last_logits(p, cfg, rope, round_x=keep):
    return [transformer(np.array(prompt), p, cfg, rope, round_x)[-1] for prompt in PROMPTS]


def greedy(p, cfg, rope, round_x=keep):
    """Greedy continuations, and the smallest gap between the best and second-best logit met on
    the way (a gap near float32 rounding would make the comparison a coin toss)."""
    out, min_gap = [], np.inf
    for prompt in PROMPTS:
        seq, new = list(prompt), []
        for _ in range(N_NEW):
            logits = transformer(np.array(seq), p, cfg, rope, round_x)[-1]
            top2 = np.sort(logits)[-2:]
            min_gap = min(min_gap, top2[1] - top2[0])
            tok = int(np.argmax(logits))
            new.append(tok)
            seq.append(tok)
        out.append(new)
    return out, float(min_gap)


def main(out_dir):
    fixture = {"command": "/usr/bin/python3 tests/reference/llama_reference.py tests/golden",
               "tolerance": 1e-4, "prompts": PROMPTS, "n_new": N_NEW, "models": {}}
    for name, cfg in MODELS.items():
        params = rounded_params(random_params(cfg), cfg["dtype"])
        tensors = hf_tensors(params, cfg)
        folder = os.path.join(out_dir, name + "_hf")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(hf_config(cfg), f, indent=2)
            f.write("\n")
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors, cfg["dtype"])
        # Both spellings of the math on the same model must agree (this checks the permutation
        # and the two RoPE layouts against each other) before either is used as the reference.
        pairs = last_logits(params, cfg, rope_pairs(cfg))
        halves = last_logits(hf_params(tensors, cfg), cfg, rope_halves(cfg))
        gap = max(np.max(np.abs(a - b)) for a, b in zip(pairs, halves))
        assert gap < 1e-9, f"{name}: llama2.c and Hugging Face spellings differ by {gap}"
        continuations, min_gap = greedy(params, cfg, rope_pairs(cfg))
        assert min_gap > 1e-3, f"{name}: a greedy step has a near-tie ({min_gap}); reseed"
        entry = {"last_logits": [[float(v) for v in row] for row in halves],
                 "greedy": continuations, "greedy_min_top2_gap": min_gap}
        if cfg["dtype"] == "BF16":  # every matrix is BF16, so every matmul input is rounded
            pairs = last_logits(params, cfg, rope_pairs(cfg), Bf16Activations())
            rounding = Bf16Activations()
            halves = last_logits(hf_params(tensors, cfg), cfg, rope_halves(cfg), rounding)
            gap = max(np.max(np.abs(a - b)) for a, b in zip(pairs, halves))
            assert gap < 1e-9, f"{name} bf16_dot: the two spellings differ by {gap}"
            assert rounding.min_margin > 1e-6, f"{name}: an input is {rounding.min_margin} " \
                "from a bf16 rounding point: kvlm's float32 value could round the other way; reseed"
            continuations, min_gap = greedy(params, cfg, rope_pairs(cfg), Bf16Activations())
            assert min_gap > 1e-3, f"{name} bf16_dot: a greedy step has a near-tie ({min_gap})"
            entry["bf16_dot"] = {"last_logits": [[float(v) for v in row] for row in halves],
                                 "greedy": continuations, "greedy_min_top2_gap": min_gap,
                                 "min_rounding_margin": rounding.min_margin}
        fixture["models"][name + "_hf"] = entry
        if cfg["llama2c"]:
            write_llama2c(os.path.join(out_dir, name + ".bin"), params, cfg)
            fixture["models"][name + ".bin"] = entry
    with open(os.path.join(out_dir, "tiny_llama_reference.json"), "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden")
