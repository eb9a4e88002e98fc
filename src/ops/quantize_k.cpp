// ggml's reference K-quant quantizers (quantize_row_q4_K_ref, quantize_row_q6_K_ref in
// ggml-quants.c), reimplemented so kvlm writes the bytes llama.cpp's `llama-quantize` writes
// without an importance matrix. Bit-exactness needs ggml's arithmetic step for step: the same
// fp32 operations in the same order (this file, like ggml-base, is compiled without fma
// contraction: CMakeLists.txt sets -ffp-contract=off), ggml's rounding trick (nearest_int:
// ties to even, not std::lround's ties away) and its scale searches with their exact
// tie-breaking. tests/ops/quantize_k_test.cpp checks blocks computed by hand and bytes written
// by ggml itself (tests/golden/ggml_kquants.bin).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/quant.h"

namespace kvlm {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: a group this small is zero

// Round to nearest, ties to even, through the float adder (ggml's nearest_int): adding
// 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// ggml's make_qkx2_quants with Q4_K's arguments (nmax 15, weighted squared error, a search
// over 21 candidate scales (nmax - 1 + 0.1 is) / (max - min)): the scale and min (returned
// negated, as ggml does) of an affine fit x ~ scale * L + min with L in [0, 15], and the L.
float fit_affine(const float* x, const float* w, int n, uint8_t* L, float* neg_min) {
  constexpr int nmax = 15;
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t candidate[32];
  for (int is = 0; is <= 20; ++is) {
    iscale = (-1.0f + 0.1f * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      candidate[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * candidate[i] + this_min - x[i];
        error += w[i] * (diff * diff);
      }
      if (error < best_error) {
        std::copy(candidate, candidate + n, L);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// ggml's make_qx_quants with Q6_K's arguments (nmax 32, weights x^2, no early return): a
// symmetric fit x ~ scale * l with l in [-32, 31] (stored in L as l + 32), trying 19 scales
// -(32 + 0.1 is) / max around the one that maps the largest magnitude to -32.
float fit_symmetric(const float* x, int n, int8_t* L) {
  constexpr int nmax = 32;
  float max = 0, amax = 0;  // max: the value of largest magnitude, with its sign
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto level = [](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale * x[i]) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_block_q4_k(BlockQ4_K* y, const float* x) {
  uint8_t L[kQKBlock];
  float scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {  // sub-blocks of 32, each weighted by rms + |x|
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    float weights[32];
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_affine(xs, weights, 32, L + 32 * j, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // The eight scales and mins as 6-bit multiples of d and dmin, packed as q4_k_scale_min
  // unpacks them. A negative level wraps through uint8_t before the clamp, as in ggml.
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const auto ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const auto lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y->scales[j] = ls;
      y->scales[j + 4] = lm;
    } else {
      y->scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      y->scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      y->scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  y->d = f32_to_f16(max_scale / 63.f);
  y->dmin = f32_to_f16(max_min / 63.f);
  // Re-quantize against the scales as stored (a sub-block whose scale rounds to 0 keeps the
  // levels of its fit, as in ggml).
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4_k_scale_min(j, y->scales, &sc, &m);
    const float d = f16_to_f32(y->d) * sc;
    if (d == 0) continue;
    const float dm = f16_to_f32(y->dmin) * m;
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] =
          static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, 15));
  }
  for (int c = 0; c < 4; ++c)  // each 64 values: 32 bytes, low nibbles first
    for (int l = 0; l < 32; ++l)
      y->qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + l + 32] << 4));
}

void quantize_block_q6_k(BlockQ6_K* y, const float* x) {
  int8_t L[kQKBlock];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = fit_symmetric(x + 16 * ib, 16, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, sizeof(*y));
    return;
  }
  const float iscale = -128.f / max_scale;
  y->d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < 16; ++ib)
    y->scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(y->d) * y->scales[j];
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  // Each 128 values: 4 low bits in ql (values l and l+64 share a byte, as do l+32 and l+96),
  // 2 high bits of all four in qh[l].
  for (int h = 0; h < 2; ++h) {
    const int8_t* q = L + 128 * h;
    uint8_t* ql = y->ql + 64 * h;
    uint8_t* qh = y->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) |
                                   ((q[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_row_q4_k(void* dst, const float* src, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t b = 0; b < n / kQKBlock; ++b) {
    BlockQ4_K y{};
    quantize_block_q4_k(&y, src + b * kQKBlock);
    std::memcpy(out + b * sizeof(y), &y, sizeof(y));
  }
}

void quantize_row_q6_k(void* dst, const float* src, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t b = 0; b < n / kQKBlock; ++b) {
    BlockQ6_K y{};
    quantize_block_q6_k(&y, src + b * kQKBlock);
    std::memcpy(out + b * sizeof(y), &y, sizeof(y));
  }
}

}  // namespace kvlm
