"""bfloat16 as kvlm stores weights and as vdpbf16ps reads activations, for the numpy references
(gpt2_reference.py, llama_reference.py): one definition, so both fixtures round alike."""

import numpy as np


def to_bf16_bits(a):
    """float32 -> bf16 bits, round to nearest even (as kvlm's converter and loader do)."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits):
    """bf16 bits -> the float64 values they hold."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def midpoint_margin(x):
    """min |x - m| / |x| over x's nonzero values, m the midpoint between the two bf16 values
    around x (a float32 number: the bf16 bits of |x| truncated, then 0x8000)."""
    a = np.abs(x[x != 0])
    bits = a.astype(np.float32).view(np.uint32)
    mid = ((bits >> 16 << 16) | 0x8000).astype(np.uint32).view(np.float32)
    return float(np.min(np.abs(a - mid) / a, initial=np.inf))


def keep(x):  # activations in full precision: the plain reference
    return x


class Bf16Activations:
    """x as vdpbf16ps reads it: float32 (kvlm's activations), then bf16 to nearest even, a
    denormal to a zero of its sign (VCVTNEPS2BF16); returned as float64.

    It also tracks the smallest relative distance of an input to a bf16 rounding midpoint: kvlm's
    float32 activation differs from this float64 one by a few float32 roundings, so an input
    within that of a midpoint could round the other way in kvlm, and one such flip moves the
    logits by up to ~1e-2 (flipping every input within 1e-5 of a midpoint moves them 0.02 on the
    tiny GPT-2, 0.013 on the tiny Llama): the fixtures record the margin and insist on more
    than 1e-6."""

    def __init__(self):
        self.min_margin = np.inf

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        self.min_margin = min(self.min_margin, midpoint_margin(x))
        f = x.astype(np.float32)
        f = np.where(np.abs(f) < np.finfo(np.float32).tiny, np.float32(0) * np.sign(f), f)
        return from_bf16_bits(to_bf16_bits(f))
