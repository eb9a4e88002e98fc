// 8-bit activations for the block weight types (Q8_0, Q5_0, Q4_0, Q6_K, Q4_K): the activation
// quantizer, the scalar reference, and the run-time choice of kernel (numerics: matmul_q8act.h; the
// SIMD kernels are in matmul_q8act_x86.cpp).
#include "ops/matmul_q8act.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/dispatch.h"
#include "ops/matmul_q8act_kernels.h"
#include "ops/quant.h"
#include "ops/stealable_shares.h"
#include "ops/thread_team.h"

namespace kvlm {

namespace {

// Up to this many rows a call is decode (batched), whose weights are read once a step.
constexpr int kDecodeRows = 8;

// The activation block each weight type's kernel reads.
size_t activation_block(DType type) {
  switch (type) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
      return 32;
    case DType::kQ4_K:
    case DType::kQ6_K:
      return 256;
    default:
      return 0;
  }
}

// Offset subtracted from each weight's unsigned code (Q4_0: 8, Q5_0: 16, Q6_K: 32; Q8_0: 128,
// its int8 weights read as the unsigned bytes w + 128 by vpdpbusd), folded into off4.
int32_t weight_offset(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return 128;
    case DType::kQ4_0:
      return 8;
    case DType::kQ5_0:
      return 16;
    case DType::kQ6_K:
      return 32;
    default:
      return 0;
  }
}

// The scalar quantizer, the definition every SIMD one matches (q8act::RowQuantizer's contract:
// q [n], d [n / block], off4 [n / 4] when offset != 0, sum32 [n / 32] when not null).
void quantize_activation_row_scalar(int8_t* q, float* d, int32_t* off4, int32_t* sum32,
                                    const float* x, size_t n, size_t block, int32_t offset) {
  for (size_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    float amax = 0.0f;
    for (size_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    d[b] = scale;
    for (size_t i = 0; i < block; ++i) {
      float v = std::nearbyint(xb[i] * inverse);  // ties to even (the default rounding mode)
      // |x * id| rounds to at most 127; infinities and NaNs (garbage in) stay in range.
      v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
      q[b * block + i] = static_cast<int8_t>(v == v ? v : 0.0f);
    }
  }
  if (offset != 0)
    for (size_t k = 0; k < n / 4; ++k)
      off4[k] = -offset * (q[4 * k] + q[4 * k + 1] + q[4 * k + 2] + q[4 * k + 3]);
  if (sum32 != nullptr)
    for (size_t k = 0; k < n / 32; ++k) {
      int32_t sum = 0;
      for (size_t i = 0; i < 32; ++i) sum += q[32 * k + i];
      sum32[k] = sum;
    }
}

// The SIMD kernel or quantizer this CPU and the active SIMD target run: AVX512-VNNI's on the
// AVX-512 targets; AVX2's on the AVX2 and AVX-512 targets (a pinned AVX2 target runs it, so the
// tests reach it on an AVX-512 machine too); null where neither runs (or is built).
template <class Fn>
Fn simd_choice(Fn avx512_vnni, Fn avx2) {
  const int64_t target = active_simd_target_id();
  if (simd_target_is_avx512(target) && q8act::cpu_has_avx512_vnni() && avx512_vnni != nullptr)
    return avx512_vnni;
  const bool avx2_target = simd_target_is_avx512(target) || active_simd_target() == "AVX2";
  if (avx2_target && q8act::cpu_has_avx2() && avx2 != nullptr) return avx2;
  return nullptr;
}

q8act::RowQuantizer row_quantizer() {
  const q8act::RowQuantizer simd =
      simd_choice(q8act::avx512_row_quantizer(), q8act::avx2_row_quantizer());
  return simd != nullptr ? simd : quantize_activation_row_scalar;
}

// The buffers behind a Q8Rows, kept per calling thread and grown as needed: matmul_forward
// takes no scratch, and decode calls it hundreds of times per token.
struct ActivationScratch {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> off4;
  std::vector<int32_t> sum32;
};

Q8Rows quantize_activations(ActivationScratch& s, const float* x, size_t n_rows, size_t n_in,
                            DType type, q8act::RowQuantizer quantize_row, int n_threads) {
  const size_t block = activation_block(type);
  const int32_t offset = weight_offset(type);
  const bool sums = type == DType::kQ4_K;
  s.q.resize(std::max<size_t>(s.q.size(), n_rows * n_in));
  s.d.resize(std::max<size_t>(s.d.size(), n_rows * (n_in / block)));
  s.off4.resize(std::max<size_t>(s.off4.size(), n_rows * (n_in / 4)));
  if (sums) s.sum32.resize(std::max<size_t>(s.sum32.size(), n_rows * (n_in / 32)));
  int8_t* q = s.q.data();
  float* d = s.d.data();
  int32_t* off4 = s.off4.data();
  int32_t* sum32 = s.sum32.data();
  const int threads = n_rows * n_in >= (1u << 16) ? n_threads : 1;
  parallel_for(threads, size_t{n_rows}, [&](size_t r) {
    quantize_row(q + r * n_in, d + r * (n_in / block), off4 + r * (n_in / 4),
                 sums ? sum32 + r * (n_in / 32) : nullptr, x + r * n_in, n_in, block, offset);
  });
  return Q8Rows{q, d, off4, sums ? sum32 : nullptr, n_in, block};
}

// matmul.h's kOutIn reduction of 16 lanes.
float sum_lanes16(float* s) {
  for (int l = 0; l < 8; ++l) s[l] += s[l + 8];
  for (int l = 0; l < 4; ++l) s[l] += s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] += s[l + 2];
  return s[0] + s[1];
}

// Weight i (0..31) of a 32-value block: Q8_0's int8; Q4_0's nibble - 8; Q5_0's
// (nibble | fifth bit << 4) - 16.
template <class Block>
int block32_weight(const Block& blk, int i) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    return blk.q[i];
  } else {
    const int nibble = i < 16 ? blk.qs[i] & 0x0F : blk.qs[i - 16] >> 4;
    if constexpr (std::is_same_v<Block, BlockQ5_0>) {
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      return (nibble | (((qh >> i) & 1) << 4)) - 16;
    }
    return nibble - 8;
  }
}

// One output of a row of 32-value blocks (Q4_0, Q5_0, Q8_0) against one quantized activation
// row (matmul_q8act.h's order).
template <class Block>
float dot_block32(const uint8_t* w, const int8_t* q, const float* d, size_t n_in) {
  float s[16] = {};
  for (size_t b = 0; b < n_in / 32; ++b) {
    Block blk;
    std::memcpy(&blk, w + b * sizeof(Block), sizeof(blk));
    const float scale = f16_to_f32_fast(blk.d) * d[b];
    const int8_t* qb = q + b * 32;
    for (int p = 0; p < 8; ++p) {
      int32_t part = 0;
      for (int i = 4 * p; i < 4 * p + 4; ++i) part += block32_weight(blk, i) * qb[i];
      float& lane = s[8 * (b % 2) + p];
      lane = std::fma(scale, static_cast<float>(part), lane);
    }
  }
  return sum_lanes16(s);
}

// matmul.h's kOutIn reduction from its 8-lane step.
float sum_lanes8(float* s) {
  for (int l = 0; l < 4; ++l) s[l] += s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] += s[l + 2];
  return s[0] + s[1];
}

// One output of a Q4_K row against one quantized activation row (row r: q, d, sum32 at r).
float dot_q4_k(const uint8_t* w, const Q8Rows& x, size_t r) {
  const size_t nb = x.n_in / 256;
  const int8_t* q = x.q + r * x.n_in;
  float s[8] = {};
  for (size_t b = 0; b < nb; ++b) {
    BlockQ4_K blk;
    std::memcpy(&blk, w + b * sizeof(BlockQ4_K), sizeof(blk));
    const float dy = x.d[r * nb + b];
    const float dd = f16_to_f32_fast(blk.d) * dy, dm = -(f16_to_f32_fast(blk.dmin) * dy);
    int32_t lanes[8] = {}, mins[8];
    for (int j = 0; j < 8; ++j) {  // sub-block j: values 32j .. 32j + 31
      uint8_t sc, m;
      q4_k_scale_min(j, blk.scales, &sc, &m);
      mins[j] = m * x.sum32[r * (x.n_in / 32) + 8 * b + j];
      for (int i = 0; i < 32; ++i) {
        const uint8_t byte = blk.qs[32 * (j / 2) + i];
        const int nibble = j % 2 ? byte >> 4 : byte & 0x0F;
        lanes[i / 4] += sc * nibble * q[256 * b + 32 * j + i];
      }
    }
    for (int k = 0; k < 8; ++k) {
      s[k] = std::fma(dd, static_cast<float>(lanes[k]), s[k]);
      s[k] = std::fma(dm, static_cast<float>(mins[k]), s[k]);
    }
  }
  return sum_lanes8(s);
}

// One output of a Q6_K row against one quantized activation row.
float dot_q6_k(const uint8_t* w, const Q8Rows& x, size_t r) {
  const size_t nb = x.n_in / 256;
  const int8_t* q = x.q + r * x.n_in;
  float s[8] = {};
  for (size_t b = 0; b < nb; ++b) {
    BlockQ6_K blk;
    std::memcpy(&blk, w + b * sizeof(BlockQ6_K), sizeof(blk));
    const float dd = f16_to_f32_fast(blk.d) * x.d[r * nb + b];
    int32_t lanes[8] = {};
    for (int i = 0; i < 256; ++i) {
      // Value i = 128n + 32quarter + l: ql[64n + 32(quarter % 2) + l], nibble quarter / 2, and
      // bits 2quarter.. of qh[32n + l] (dequantize_block_q6_k's layout).
      const int n = i / 128, quarter = i % 128 / 32, l = i % 32;
      const uint8_t low = blk.ql[64 * n + 32 * (quarter % 2) + l];
      const int nibble = quarter / 2 ? low >> 4 : low & 0x0F;
      const int q6 = nibble | (((blk.qh[32 * n + l] >> (2 * quarter)) & 3) << 4);
      lanes[i / 4 % 8] += blk.scales[i / 16] * (q6 - 32) * q[256 * b + i];
    }
    for (int k = 0; k < 8; ++k) s[k] = std::fma(dd, static_cast<float>(lanes[k]), s[k]);
  }
  return sum_lanes8(s);
}

size_t row_bytes_of(const WeightMatrix& w) {
  return dtype_bytes(w.dtype, static_cast<size_t>(w.n_in));
}

q8act::Kernel simd_kernel(DType type) {
  return simd_choice(q8act::avx512_vnni_kernel(type), q8act::avx2_kernel(type));
}

// The scalar reference as a kernel over outputs [o_begin, o_end), for targets without one.
template <class Block>
float dot_block32_row(const uint8_t* w, const Q8Rows& x, size_t r) {
  return dot_block32<Block>(w, x.q + r * x.n_in, x.d + r * (x.n_in / 32), x.n_in);
}

template <float (*kDot)(const uint8_t*, const Q8Rows&, size_t)>
void reference_kernel(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes,
                      const float* bias, size_t n_rows, size_t n_out, size_t o_begin,
                      size_t o_end) {
  for (size_t r = 0; r < n_rows; ++r)
    for (size_t o = o_begin; o < o_end; ++o) {
      const float dot = kDot(w + o * row_bytes, x, r);
      out[r * n_out + o] = bias ? dot + bias[o] : dot;
    }
}

q8act::Kernel reference_kernel_for(DType type) {
  switch (type) {
    case DType::kQ4_K:
      return reference_kernel<dot_q4_k>;
    case DType::kQ6_K:
      return reference_kernel<dot_q6_k>;
    case DType::kQ5_0:
      return reference_kernel<dot_block32_row<BlockQ5_0>>;
    case DType::kQ8_0:
      return reference_kernel<dot_block32_row<BlockQ8_0>>;
    default:
      return reference_kernel<dot_block32_row<BlockQ4_0>>;
  }
}

}  // namespace

bool q8act_kernel_handles(DType type) {
  return activation_block(type) != 0;
}

void matmul_q8act_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows) {
  if (n_rows <= 0 || w.n_out <= 0 || !q8act_kernel_handles(w.dtype)) return;
  ActivationScratch scratch;
  const Q8Rows rows =
      quantize_activations(scratch, x, n_rows, w.n_in, w.dtype, quantize_activation_row_scalar, 1);
  reference_kernel_for(w.dtype)(out, rows, static_cast<const uint8_t*>(w.data), row_bytes_of(w),
                                bias, n_rows, w.n_out, 0, w.n_out);
}

void matmul_q8act_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                          int n_rows, const Parallel& par) {
  if (n_rows <= 0 || w.n_out <= 0 || !q8act_kernel_handles(w.dtype)) return;
  static thread_local ActivationScratch scratch;
  const int n_threads = std::max(par.n_threads, 1);
  const Q8Rows rows =
      quantize_activations(scratch, x, n_rows, w.n_in, w.dtype, row_quantizer(), n_threads);
  q8act::Kernel kernel = simd_kernel(w.dtype);
  if (kernel == nullptr) kernel = reference_kernel_for(w.dtype);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = row_bytes_of(w), n_out = w.n_out;
  // Slices of 16 outputs (whole tiles of every kernel).
  constexpr size_t kSlice = 16;
  const size_t n_slices = (n_out + kSlice - 1) / kSlice;
  const int threads = static_cast<int>(std::min<size_t>(n_threads, n_slices));
  auto run_slices = [&](size_t s0, size_t s1) {
    kernel(out, rows, data, row_bytes, bias, n_rows, n_out, s0 * kSlice,
           std::min(n_out, s1 * kSlice));
  };
  if (n_rows > kDecodeRows) {  // prefill: even halves, each walked row chunk by row chunk
    run_team(threads, [&](int t, int nt) {
      const auto [s0, s1] = static_share(n_slices, t, nt);
      if (s0 < s1) run_slices(s0, s1);
    });
    return;
  }
  // Decode: each thread reads its share of the slices front to back, about 64 KB of weights a
  // claim, and one whose share is done takes over half of the other's rest, as the strips do
  // (ops/stealable_shares.h), so a core slowed for a while does not hold the other. On the Zen 5
  // VM it measured the same as even halves (docs/performance.md, thirtieth session).
  const size_t grain = std::max<size_t>(1, (size_t{64} << 10) / (kSlice * row_bytes));
  StealableShares shares(n_slices, threads);
  run_team(threads, [&](int t, int) {
    for (auto [s0, s1] = shares.claim(t, grain); s0 < s1; std::tie(s0, s1) = shares.claim(t, grain))
      run_slices(s0, s1);
  });
}

void quantize_activation_row(DType type, const float* x, size_t n, int8_t* q, float* d,
                             int32_t* off4, int32_t* sum32) {
  row_quantizer()(q, d, off4, type == DType::kQ4_K ? sum32 : nullptr, x, n, activation_block(type),
                  weight_offset(type));
}

void quantize_activation_row_reference(DType type, const float* x, size_t n, int8_t* q, float* d,
                                       int32_t* off4, int32_t* sum32) {
  quantize_activation_row_scalar(q, d, off4, type == DType::kQ4_K ? sum32 : nullptr, x, n,
                                 activation_block(type), weight_offset(type));
}

}  // namespace kvlm
