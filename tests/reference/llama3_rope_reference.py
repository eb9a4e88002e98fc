#!/usr/bin/env python3
"""Llama 3.1 rope scaling in float64, the independent reference for kvlm's frequencies.

Writes tests/golden/llama3_rope_reference.json:
    python3 tests/reference/llama3_rope_reference.py tests/golden

For each config: `inv_freq`, Hugging Face's _compute_llama3_parameters (transformers'
modeling_rope_utils.py) on base ** (-2i / dim), and `freq_factors`, the per-frequency divisors
llama.cpp's convert_hf_to_gguf.py writes as rope_freqs.weight. Both formulas are restated here
from their definitions, in plain Python floats (no numpy needed).
"""
import json
import math
import os
import sys

CONFIGS = [
    # Llama 3.1 8B / 70B: head_dim 128, rope_theta 500000.
    {"name": "llama-3.1-8b", "head_dim": 128, "rope_theta": 500000.0, "factor": 8.0,
     "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    # Llama 3.2 1B / 3B: factor 32, head_dim 64.
    {"name": "llama-3.2-1b", "head_dim": 64, "rope_theta": 500000.0, "factor": 32.0,
     "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    # A small model's shape with the band in its middle (the test's tiny Llama).
    {"name": "tiny", "head_dim": 16, "rope_theta": 10000.0, "factor": 4.0,
     "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
]


def reference(c):
    dim = c["head_dim"]
    old = c["original_max_position_embeddings"]
    low_wavelen = old / c["low_freq_factor"]
    high_wavelen = old / c["high_freq_factor"]
    inv_freq, factors = [], []
    for i in range(0, dim, 2):
        f = 1.0 / (c["rope_theta"] ** (i / dim))
        wavelen = 2 * math.pi / f
        smooth = (old / wavelen - c["low_freq_factor"]) / (c["high_freq_factor"] - c["low_freq_factor"])
        if wavelen < high_wavelen:        # high frequencies: kept
            inv_freq.append(f)
            factors.append(1.0)
        elif wavelen > low_wavelen:       # low frequencies: slowed by `factor`
            inv_freq.append(f / c["factor"])
            factors.append(c["factor"])
        else:                             # the band between: blended
            inv_freq.append((1 - smooth) * f / c["factor"] + smooth * f)
            factors.append(1 / ((1 - smooth) / c["factor"] + smooth))
    return {**c, "inv_freq": inv_freq, "freq_factors": factors}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    path = os.path.join(out_dir, "llama3_rope_reference.json")
    with open(path, "w") as f:
        json.dump({"command": "python3 tests/reference/llama3_rope_reference.py tests/golden",
                   "configs": [reference(c) for c in CONFIGS]}, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
