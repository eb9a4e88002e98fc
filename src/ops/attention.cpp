// Attention of one query row over the cache, vectorised over head_dim, compiled per Highway
// target and dispatched at run time. K/V rows are read in the cache's storage type (f32, f16,
// bf16, q8_0, fp8) and widened to fp32 in registers by a Reader, one template instance each. Per
// head: scores q.k (four positions at a time, each a fixed reduction over D), softmax with a
// vectorised exp, then the weighted sum of values as one fma chain per element in position order.
// Every step depends only on the positions attended, never on how the cache splits them into runs
// or on which other rows are being computed, so prefill and decode give the same bits.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/prefetch.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

// Readers: a head's slice of stored rows as fp32 vectors. Load(row, c) widens the kN values at
// columns [c, c + kN) of a row, LoadN the first n < kN of them (other lanes zero). Every value
// gets the bits kv_decode_value gives it: widening is exact, and a scale is one multiply. (q8_0
// slices a multiple of kN wide skip the per-value multiply: its block scale goes on the block's
// partial dot product, or on the attention weight for V; see DotBlocks4 and WeightedValues.)
// A reader bound to one row: Load(c) / LoadN(c, n) of that row. Readers whose values need no
// per-row state use this; Q8Reader keeps the last block's scale in a register instead.
template <class R>
struct PlainRow {
  const R& rd;
  const std::byte* row;
  HWY_INLINE VF Load(size_t c) const { return rd.Load(row, c); }
  HWY_INLINE VF LoadN(size_t c, size_t n) const { return rd.LoadN(row, c, n); }
};

struct F32Reader {
  HWY_INLINE VF Load(const std::byte* row, size_t c) const {
    return hn::LoadU(DF(), reinterpret_cast<const float*>(row) + c);
  }
  HWY_INLINE VF LoadN(const std::byte* row, size_t c, size_t n) const {
    return LoadWeightsN(DF(), reinterpret_cast<const float*>(row) + c, n);
  }
  HWY_INLINE const std::byte* At(const std::byte* row, size_t c) const { return row + 4 * c; }
  static constexpr size_t kBytes = 4;
  static constexpr bool kBlockScaled = false;
  HWY_INLINE PlainRow<F32Reader> Row(const std::byte* row) const { return {*this, row}; }
};

template <typename T>  // hwy::float16_t or hwy::bfloat16_t
struct Half16Reader {
  HWY_INLINE VF Load(const std::byte* row, size_t c) const {
    return LoadWeights(DF(), reinterpret_cast<const T*>(row) + c);
  }
  HWY_INLINE VF LoadN(const std::byte* row, size_t c, size_t n) const {
    return LoadWeightsN(DF(), reinterpret_cast<const T*>(row) + c, n);
  }
  HWY_INLINE const std::byte* At(const std::byte* row, size_t c) const { return row + 2 * c; }
  static constexpr size_t kBytes = 2;
  static constexpr bool kBlockScaled = false;
  HWY_INLINE PlainRow<Half16Reader> Row(const std::byte* row) const { return {*this, row}; }
};

// q8_0: int8 values, then one fp16 scale per 32 of them (ops/kv_format.h).
struct Q8Reader {
  size_t n_values;  // per row: where the scales start
  HWY_INLINE float Scale(const std::byte* row, size_t block) const {
    uint16_t h;
    std::memcpy(&h, row + n_values + 2 * block, 2);
    // Normal halves (every scale of a row with max |x| above 127 * 2^-14) widen by moving the
    // exponent and mantissa fields: the same bits f16_to_f32 gives, without its call and branches.
    const uint32_t exponent = h & 0x7c00u;
    if (exponent == 0 || exponent == 0x7c00u) return f16_to_f32(h);
    const uint32_t bits = (static_cast<uint32_t>(h & 0x8000u) << 16) |
                          ((static_cast<uint32_t>(h & 0x7fffu) + 0x1c000u) << 13);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  HWY_INLINE VF Load(const std::byte* row, size_t c) const {
    const DF df;
    const hn::Rebind<int32_t, DF> di;
    const hn::Rebind<int8_t, DF> d8;
    const VF x = hn::ConvertTo(
        df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(row) + c)));
    const size_t first = c / kQ8BlockSize, last = (c + kN - 1) / kQ8BlockSize;
    if (first == last) return hn::Mul(x, hn::Set(df, Scale(row, first)));
    HWY_ALIGN float scales[kN];  // the vector straddles blocks: a scale per lane
    for (size_t i = 0; i < kN; ++i) scales[i] = Scale(row, (c + i) / kQ8BlockSize);
    return hn::Mul(x, hn::Load(df, scales));
  }
  HWY_INLINE VF LoadN(const std::byte* row, size_t c, size_t n) const {
    HWY_ALIGN float buffer[kN] = {};
    for (size_t i = 0; i < n; ++i)
      buffer[i] = kv_decode_value(row, n_values, c + i, KvDtype::q8_0, 0.0f);
    return hn::Load(DF(), buffer);
  }
  // The kN int8 values at [c, c + kN) widened, unscaled (exact).
  HWY_INLINE VF LoadRaw(const std::byte* row, size_t c) const {
    const DF df;
    const hn::Rebind<int32_t, DF> di;
    const hn::Rebind<int8_t, DF> d8;
    return hn::ConvertTo(
        df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(row) + c)));
  }
  HWY_INLINE const std::byte* At(const std::byte* row, size_t c) const { return row + c; }
  static constexpr size_t kBytes = 1;
  // With no vector straddling a block (a head's slice a multiple of kN wide), Dot4 and
  // WeightedValues apply a block's scale once per block (DotBlocks4, WeightedValues)
  // instead of once per value.
  static constexpr bool kBlockScaled = true;
  // One row, its current block's scale kept in a register: a head's slice reads each scale once
  // per block instead of once per vector.
  struct RowReader {
    const Q8Reader& rd;
    const std::byte* row;
    size_t block = ~size_t{0};
    VF scale = hn::Zero(DF());
    HWY_INLINE VF Load(size_t c) {
      const size_t first = c / kQ8BlockSize, last = (c + kN - 1) / kQ8BlockSize;
      if (first != last) return rd.Load(row, c);  // straddles two blocks: a scale per lane
      if (first != block) {
        block = first;
        scale = hn::Set(DF(), rd.Scale(row, first));
      }
      const DF df;
      const hn::Rebind<int32_t, DF> di;
      const hn::Rebind<int8_t, DF> d8;
      return hn::Mul(
          hn::ConvertTo(df,
                        hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(row) + c))),
          scale);
    }
    HWY_INLINE VF LoadN(size_t c, size_t n) const { return rd.LoadN(row, c, n); }
  };
  HWY_INLINE RowReader Row(const std::byte* row) const { return {*this, row}; }
};

// fp8 e4m3 with one scale for the head: the 7 magnitude bits shifted to fp32's exponent/mantissa
// boundary read as 2^-120 times the value (normal or subnormal); x 2^120 is exact, then x scale.
struct Fp8Reader {
  float scale;
  HWY_INLINE VF Load(const std::byte* row, size_t c) const {
    const DF df;
    const hn::Rebind<uint32_t, DF> du;
    const hn::Rebind<uint8_t, DF> d8;
    const auto b = hn::PromoteTo(du, hn::LoadU(d8, reinterpret_cast<const uint8_t*>(row) + c));
    const auto bits = hn::Or(hn::ShiftLeft<20>(hn::And(b, hn::Set(du, 0x7fu))),
                             hn::ShiftLeft<24>(hn::And(b, hn::Set(du, 0x80u))));
    const VF x = hn::Mul(hn::BitCast(df, bits), hn::Set(df, 0x1p120f));
    return hn::Mul(x, hn::Set(df, scale));
  }
  HWY_INLINE VF LoadN(const std::byte* row, size_t c, size_t n) const {
    HWY_ALIGN float buffer[kN] = {};
    for (size_t i = 0; i < n; ++i) buffer[i] = kv_decode_value(row, 0, c + i, KvDtype::fp8, scale);
    return hn::Load(DF(), buffer);
  }
  HWY_INLINE const std::byte* At(const std::byte* row, size_t c) const { return row + c; }
  static constexpr size_t kBytes = 1;
  static constexpr bool kBlockScaled = false;
  HWY_INLINE PlainRow<Fp8Reader> Row(const std::byte* row) const { return {*this, row}; }
};

// The lane sums of four positions' chains a0..a3 into out[0..3] (Dot4's last step).
HWY_INLINE void LaneSums4(float* HWY_RESTRICT out, VF a0, VF a1, VF a2, VF a3) {
#if HWY_TARGET == HWY_SCALAR
  // One lane: each chain is already its position's whole sum.
  out[0] = hn::GetLane(a0);
  out[1] = hn::GetLane(a1);
  out[2] = hn::GetLane(a2);
  out[3] = hn::GetLane(a3);
#else
  const DF df;
  // Per block: [x0 + x2, y0 + y2, x1 + x3, y1 + y3] for positions x, y.
  const VF p01 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
  const VF p23 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
  const hn::Repartition<uint64_t, DF> du64;
  const auto b01 = hn::BitCast(du64, p01), b23 = hn::BitCast(du64, p23);
  // Per block: the four positions' block sums.
  const VF t = hn::Add(hn::BitCast(df, hn::InterleaveLower(du64, b01, b23)),
                       hn::BitCast(df, hn::InterleaveUpper(du64, b01, b23)));
  HWY_ALIGN float blocks[kN];
  hn::Store(t, df, blocks);
  const hn::Full128<float> d4;
  auto sum = hn::Load(d4, blocks);
  for (size_t b = 4; b < kN; b += 4) sum = hn::Add(sum, hn::Load(d4, blocks + b));
  hn::StoreU(sum, d4, out);
#endif
}

// Dot4 over q8_0 rows whose head slice [c0, c0 + D) has D a multiple of kN (so, 32 being a
// multiple of kN, no vector straddles a block): per position, the slice's part of each q8_0
// block, in order, is one fma chain over the raw int8 values starting at zero, and the running
// sum takes it as a = fma(chain, block scale, a); then LaneSums4. Two vector operations per value
// (widen, fma) where scaling each value costs three.
template <class R>
HWY_INLINE void DotBlocks4(float* HWY_RESTRICT out, const float* HWY_RESTRICT q,
                           const std::byte* const* HWY_RESTRICT k, size_t c0, size_t D,
                           const R& rd) {
  const DF df;
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  for (size_t d = 0; d < D;) {
    const size_t block = (c0 + d) / kQ8BlockSize;
    const size_t end = std::min(D, (block + 1) * kQ8BlockSize - c0);
    VF p0 = hn::Zero(df), p1 = p0, p2 = p0, p3 = p0;
    for (; d < end; d += kN) {
      const VF qv = hn::LoadU(df, q + d);
      p0 = hn::MulAdd(qv, rd.LoadRaw(k[0], c0 + d), p0);
      p1 = hn::MulAdd(qv, rd.LoadRaw(k[1], c0 + d), p1);
      p2 = hn::MulAdd(qv, rd.LoadRaw(k[2], c0 + d), p2);
      p3 = hn::MulAdd(qv, rd.LoadRaw(k[3], c0 + d), p3);
    }
    a0 = hn::MulAdd(p0, hn::Set(df, rd.Scale(k[0], block)), a0);
    a1 = hn::MulAdd(p1, hn::Set(df, rd.Scale(k[1], block)), a1);
    a2 = hn::MulAdd(p2, hn::Set(df, rd.Scale(k[2], block)), a2);
    a3 = hn::MulAdd(p3, hn::Set(df, rd.Scale(k[3], block)), a3);
  }
  LaneSums4(out, a0, a1, a2, a3);
}

// q.k for four positions at once, q loaded once per vector for all four. Per position: one fma
// chain over the elements in order (full vectors, then the zero-padded partial one); then a
// transposing lane sum: within each 128-bit block lanes (0 + 2) and (1 + 3), then those two,
// then the blocks in order. Each lane of every step holds one position's own partial sums, so
// a score is the same bits whichever positions share its group (or pad it): a function of D
// and the target only. k[j] + column c0 is the head's slice of position j's row.
template <class R>
HWY_INLINE void Dot4(float* HWY_RESTRICT out, const float* HWY_RESTRICT q,
                     const std::byte* const* HWY_RESTRICT k, size_t c0, size_t D, const R& rd) {
  const DF df;
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  auto k0 = rd.Row(k[0]), k1 = rd.Row(k[1]), k2 = rd.Row(k[2]), k3 = rd.Row(k[3]);
  size_t d = 0;
  for (; d + kN <= D; d += kN) {
    const VF qv = hn::LoadU(df, q + d);
    a0 = hn::MulAdd(qv, k0.Load(c0 + d), a0);
    a1 = hn::MulAdd(qv, k1.Load(c0 + d), a1);
    a2 = hn::MulAdd(qv, k2.Load(c0 + d), a2);
    a3 = hn::MulAdd(qv, k3.Load(c0 + d), a3);
  }
  if (d < D) {
    const size_t n = D - d;
    const VF qv = LoadWeightsN(df, q + d, n);
    a0 = hn::MulAdd(qv, k0.LoadN(c0 + d, n), a0);
    a1 = hn::MulAdd(qv, k1.LoadN(c0 + d, n), a1);
    a2 = hn::MulAdd(qv, k2.LoadN(c0 + d, n), a2);
    a3 = hn::MulAdd(qv, k3.LoadN(c0 + d, n), a3);
  }
  LaneSums4(out, a0, a1, a2, a3);
}

// A head's part of a K or V row is a few cache lines, and rows sit kv_dim values apart: a new
// 4 KB page every position or two, where the hardware prefetchers stop. So each row is fetched
// kPrefetchAhead positions before its use, which hides the L2/L3 latency (measured: decode
// attention over 900 positions was bound by it). Prefetches never change a result.
constexpr int kPrefetchAhead = 6;
HWY_INLINE void PrefetchRow(const std::byte* row, size_t n_bytes) {
  for (size_t i = 0; i < n_bytes; i += 64) PrefetchToL2(row + i);
}

// s[p] = exp(s[p] - max) for p < n; returns their sum (vector partial sums in order, then
// the target's lane sum). The partial last vector is padded with -inf, whose exp is 0.
HWY_INLINE float ExpAndSum(float* HWY_RESTRICT s, size_t n, float max_score) {
  const DF df;
  const VF vmax = hn::Set(df, max_score);
  VF sum = hn::Zero(df);
  size_t p = 0;
  for (; p + kN <= n; p += kN) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + p), vmax));
    hn::StoreU(e, df, s + p);
    sum = hn::Add(sum, e);
  }
  if (p < n) {
    float buffer[kN];
    for (size_t k = 0; k < kN; ++k) buffer[k] = p + k < n ? s[p + k] : -INFINITY;
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, buffer), vmax));
    StorePartial(e, df, s + p, n - p);
    sum = hn::Add(sum, e);
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

constexpr size_t kChunk = kAttentionChunk;
static_assert(kChunk % kN == 0, "a chunk is a whole number of vectors on every target");

// The softmax denominator over n positions: ExpAndSum of each chunk of kChunk positions, the
// chunks' sums added in order from zero (what attention_combine_chunks does with a split row's).
HWY_INLINE float ExpAndSumChunks(float* HWY_RESTRICT s, size_t n, float max_score) {
  float sum = 0.0f;
  for (size_t c = 0; c < n; c += kChunk)
    sum += ExpAndSum(s + c, std::min(kChunk, n - c), max_score);
  return sum;
}

// o[0, n_cols) = sum over the chunks of kChunk positions, in order from zero, of each chunk's
// sum over its positions p in order of w[p] * v_p[column, column + n_cols): per element one fma
// chain from zero per chunk, in NV registers (n_cols <= NV * kN; kPartial: the last vector is
// n_cols % kN wide), added to the running total (on the stack) as the chunk ends. q8_0 with no
// vector straddling a block (column a multiple of kN): the chain's term is (w[p] * block scale,
// one fp32 rounding) times the raw int8 value, so a value costs a widen and an fma instead of a
// widen, a multiply and an fma.
template <int NV, bool kPartial, class R>
HWY_INLINE void WeightedValues(float* HWY_RESTRICT o, const KvRun* runs, size_t n_runs,
                               size_t row_bytes, size_t column, const float* HWY_RESTRICT w,
                               size_t n_cols, const R& rd) {
  const DF df;
  VF acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = hn::Zero(df);
  HWY_ALIGN float total[NV * kN] = {};
  size_t in_chunk = 0;  // positions of the current chunk done
  auto end_chunk = [&]() HWY_ATTR {
    for (int v = 0; v < NV; ++v) {
      hn::Store(hn::Add(hn::Load(df, total + v * kN), acc[v]), df, total + v * kN);
      acc[v] = hn::Zero(df);
    }
    in_chunk = 0;
  };
  const size_t tail = n_cols - (NV - 1) * kN;
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* row = runs[r].v;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j, row += row_bytes, ++w) {
      if (j + kPrefetchAhead < n)
        PrefetchRow(rd.At(row + kPrefetchAhead * row_bytes, column), n_cols * R::kBytes);
      bool done = false;
      if constexpr (R::kBlockScaled && !kPartial) {
        if (column % kN == 0) {  // no vector straddles a block
          size_t block = ~size_t{0};
          VF ws = hn::Zero(df);
          for (int v = 0; v < NV; ++v) {
            const size_t c = column + v * kN;
            if (c / kQ8BlockSize != block) {
              block = c / kQ8BlockSize;
              ws = hn::Set(df, *w * rd.Scale(row, block));
            }
            acc[v] = hn::MulAdd(ws, rd.LoadRaw(row, c), acc[v]);
          }
          done = true;
        }
      }
      if (!done) {
        const VF vw = hn::Set(df, *w);
        auto values = rd.Row(row);
        for (int v = 0; v < NV; ++v) {
          const VF x = kPartial && v == NV - 1 ? values.LoadN(column + v * kN, tail)
                                               : values.Load(column + v * kN);
          acc[v] = hn::MulAdd(vw, x, acc[v]);
        }
      }
      if (++in_chunk == kChunk) end_chunk();
    }
  }
  if (in_chunk > 0) end_chunk();
  for (int v = 0; v < NV; ++v) {
    if (kPartial && v == NV - 1) {
      StorePartial(hn::Load(df, total + v * kN), df, o + v * kN, tail);
    } else {
      hn::StoreU(hn::Load(df, total + v * kN), df, o + v * kN);
    }
  }
}

constexpr int kValueVecs = 8;  // vectors of one head's output kept in registers at a time

// One head's weighted sum of values over columns [0, D), kValueVecs vectors at a time.
template <class R>
void WeightedValuesHead(float* o, const KvRun* runs, size_t n_runs, size_t row_bytes,
                        size_t kv_offset, const float* w, size_t D, const R& rd) {
  for (size_t d0 = 0; d0 < D; d0 += kValueVecs * kN) {
    const size_t n = std::min(kValueVecs * kN, D - d0);
    const size_t nv = (n + kN - 1) / kN;
    const bool partial = n % kN != 0;
#define KVLM_WEIGHTED_VALUES(NV)                                                            \
  case NV:                                                                                  \
    if (partial) {                                                                          \
      WeightedValues<NV, true>(o + d0, runs, n_runs, row_bytes, kv_offset + d0, w, n, rd);  \
    } else {                                                                                \
      WeightedValues<NV, false>(o + d0, runs, n_runs, row_bytes, kv_offset + d0, w, n, rd); \
    }                                                                                       \
    break;
    switch (nv) {
      KVLM_WEIGHTED_VALUES(1)
      KVLM_WEIGHTED_VALUES(2)
      KVLM_WEIGHTED_VALUES(3)
      KVLM_WEIGHTED_VALUES(4)
      KVLM_WEIGHTED_VALUES(5)
      KVLM_WEIGHTED_VALUES(6)
      KVLM_WEIGHTED_VALUES(7)
      KVLM_WEIGHTED_VALUES(8)
    }
#undef KVLM_WEIGHTED_VALUES
  }
}
static_assert(kValueVecs == 8, "WeightedValuesHead's switch covers 1..8 vectors");

// One query head over all positions: keys read by rk, values by rv.
template <class R>
void AttendHead(float* HWY_RESTRICT oh, const float* HWY_RESTRICT qh, const KvRun* runs,
                size_t n_runs, size_t row_bytes, size_t kv_offset, float* scratch, size_t D,
                float scale, const R& rk, const R& rv) {
  const DF df;
  // Scores q.k / sqrt(D), four positions at a time across run boundaries, and their maximum
  // for a stable softmax.
  float max_score = -INFINITY;
  size_t p = 0;
  const bool blocks = R::kBlockScaled && D % kN == 0;  // q8_0: scales applied per block
  const std::byte* k_rows[4];
  int n_group = 0;
  auto score_group = [&]() HWY_ATTR {
    for (int j = n_group; j < 4; ++j) k_rows[j] = k_rows[n_group - 1];  // padding, discarded
    float dots[4];
    if constexpr (R::kBlockScaled) {
      if (blocks) {
        DotBlocks4(dots, qh, k_rows, kv_offset, D, rk);
      } else {
        Dot4(dots, qh, k_rows, kv_offset, D, rk);
      }
    } else {
      Dot4(dots, qh, k_rows, kv_offset, D, rk);
    }
    for (int j = 0; j < n_group; ++j, ++p) {
      scratch[p] = dots[j] * scale;
      max_score = std::max(max_score, scratch[p]);
    }
    n_group = 0;
  };
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* k = runs[r].k;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j) {
      if (j + kPrefetchAhead < n)
        PrefetchRow(rk.At(k + (j + kPrefetchAhead) * row_bytes, kv_offset), D * R::kBytes);
      k_rows[n_group++] = k + j * row_bytes;
      if (n_group == 4) score_group();
    }
  }
  if (n_group > 0) score_group();
  const float sum = ExpAndSumChunks(scratch, p, max_score);
  // Weighted sum of values, positions in order.
  WeightedValuesHead(oh, runs, n_runs, row_bytes, kv_offset, scratch, D, rv);
  const VF inv_sum = hn::Set(df, 1.0f / sum);
  size_t d = 0;
  for (; d + kN <= D; d += kN) hn::StoreU(hn::Mul(hn::LoadU(df, oh + d), inv_sum), df, oh + d);
  if (d < D) StorePartial(hn::Mul(LoadWeightsN(df, oh + d, D - d), inv_sum), df, oh + d, D - d);
}

// Scores q.k / sqrt(D) of query heads [h0, h0 + nh) over every position of `runs` in one pass:
// scores[h * stride + p] (h counted from h0) and each head's largest in max_out[h]. Per head and
// group of four positions, AttendHead's Dot4: its bits. Each position's row is prefetched
// `ahead` positions early over [first_col, first_col + span_bytes), the stretch the heads read.
template <class R>
HWY_INLINE void ScoreHeadsTogether(float* HWY_RESTRICT scores, size_t stride,
                                   float* HWY_RESTRICT max_out, const float* HWY_RESTRICT q,
                                   const KvRun* runs, size_t n_runs, size_t row_bytes, int h0,
                                   int nh, int group, size_t D, float scale, size_t first_col,
                                   size_t span_bytes, int ahead, const R& rd) {
  for (int h = 0; h < nh; ++h) max_out[h] = -INFINITY;
  const std::byte* k_rows[4];
  int n_group = 0;
  size_t p = 0;
  auto score_group = [&]() HWY_ATTR {
    for (int j = n_group; j < 4; ++j) k_rows[j] = k_rows[n_group - 1];  // padding, discarded
    for (int h = 0; h < nh; ++h) {
      float dots[4];
      Dot4(dots, q + static_cast<size_t>(h0 + h) * D, k_rows,
           static_cast<size_t>((h0 + h) / group) * D, D, rd);
      float* s = scores + h * stride + p;
      for (int j = 0; j < n_group; ++j) {
        s[j] = dots[j] * scale;
        max_out[h] = std::max(max_out[h], s[j]);
      }
    }
    p += n_group;
    n_group = 0;
  };
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* k = runs[r].k;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j) {
      if (j + ahead < n) PrefetchRow(rd.At(k + (j + ahead) * row_bytes, first_col), span_bytes);
      k_rows[n_group++] = k + j * row_bytes;
      if (n_group == 4) score_group();
    }
  }
  if (n_group > 0) score_group();
}

// Query heads [h0, h1) of one row in one pass over the positions per phase: each position's
// keys (then values) for all those heads are one contiguous stretch of its row, read once, where
// AttendHead reads a head's few cache lines of every row and then comes back for the next head's
// (batched decode, 8 sequences' caches that nothing else reuses, was bound by those strided
// reads). The arithmetic per (head, position) is AttendHead's, in the same order: the same Dot4
// per group of four positions, the same ExpAndSum, and each output element's weighted sum one
// fma chain from zero in position order (kept in `out` between positions: the same chain), then
// the same multiply by 1 / sum. So every head gets AttendHead's bits. Readers with no per-head
// state and whose Load is their value's bits (f32, f16, bf16), D a whole number of vectors.
// scratch holds (h1 - h0) x (P + D) floats.
template <class R>
void AttendHeadsTogether(float* HWY_RESTRICT out, const float* HWY_RESTRICT q, const KvRun* runs,
                         size_t n_runs, size_t row_bytes, int h0, int h1, int group, size_t D,
                         float* HWY_RESTRICT scratch, float scale, const R& rd) {
  const DF df;
  size_t n_pos = 0;
  for (size_t r = 0; r < n_runs; ++r) n_pos += runs[r].n_positions;
  // The stretch of a row the heads read: their key/value heads' slices, contiguous.
  const size_t first_col = static_cast<size_t>(h0 / group) * D;
  const size_t span_bytes = (static_cast<size_t>((h1 - 1) / group + 1) * D - first_col) * R::kBytes;
  // Rows fetched this many positions ahead: a row's stretch is many cache lines, so fewer rows
  // ahead than AttendHead's per-head slices cover the latency.
  constexpr int kAhead = 3;
  constexpr int kMaxHeads = 64;  // heads per pass (their maxima and sums on the stack)
  for (int hb = h0; hb < h1; hb += kMaxHeads) {
    const int he = std::min(h1, hb + kMaxHeads), nh = he - hb;
    float max_score[kMaxHeads], sum[kMaxHeads];
    ScoreHeadsTogether(scratch, n_pos, max_score, q, runs, n_runs, row_bytes, hb, nh, group, D,
                       scale, first_col, span_bytes, kAhead, rd);
    for (int h = 0; h < nh; ++h) sum[h] = ExpAndSumChunks(scratch + h * n_pos, n_pos, max_score[h]);
    // Weighted sums of values, positions in order: each element's chain of a chunk kept in
    // `chunk` (after the scores in scratch), added to its total in out as the chunk ends.
    float* HWY_RESTRICT chunk = scratch + static_cast<size_t>(nh) * n_pos;
    for (int h = hb; h < he; ++h)
      for (size_t d = 0; d < D; d += kN) hn::StoreU(hn::Zero(df), df, out + h * D + d);
    for (size_t i = 0; i < nh * D; i += kN) hn::StoreU(hn::Zero(df), df, chunk + i);
    auto end_chunk = [&]() HWY_ATTR {
      for (int h = 0; h < nh; ++h) {
        float* o = out + static_cast<size_t>(hb + h) * D;
        for (size_t d = 0; d < D; d += kN) {
          hn::StoreU(hn::Add(hn::LoadU(df, o + d), hn::LoadU(df, chunk + h * D + d)), df, o + d);
          hn::StoreU(hn::Zero(df), df, chunk + h * D + d);
        }
      }
    };
    size_t p = 0;
    for (size_t r = 0; r < n_runs; ++r) {
      const std::byte* row = runs[r].v;
      const int n = runs[r].n_positions;
      for (int j = 0; j < n; ++j, row += row_bytes) {
        if (j + kAhead < n) PrefetchRow(rd.At(row + kAhead * row_bytes, first_col), span_bytes);
        for (int h = 0; h < nh; ++h) {
          const VF w = hn::Set(df, scratch[h * n_pos + p]);
          const size_t column = static_cast<size_t>((hb + h) / group) * D;
          float* c = chunk + h * D;
          for (size_t d = 0; d < D; d += kN)
            hn::StoreU(hn::MulAdd(w, rd.Load(row, column + d), hn::LoadU(df, c + d)), df, c + d);
        }
        if (++p % kChunk == 0) end_chunk();
      }
    }
    if (p % kChunk != 0) end_chunk();
    for (int h = 0; h < nh; ++h) {
      const VF inv_sum = hn::Set(df, 1.0f / sum[h]);
      float* o = out + static_cast<size_t>(hb + h) * D;
      for (size_t d = 0; d < D; d += kN)
        hn::StoreU(hn::Mul(hn::LoadU(df, o + d), inv_sum), df, o + d);
    }
  }
}

}  // namespace

void AttentionImpl(float* out, const float* q, const KvRun* runs, size_t n_runs,
                   const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                   int head_dim, int head_begin, int head_end) {
  const size_t D = head_dim, kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
  const int group = n_head / n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int h = head_begin; h < head_end; ++h) {
    const int g = h / group;
    const size_t kv_offset = static_cast<size_t>(g) * D;
    float* oh = out + h * D;
    const float* qh = q + h * D;
    const size_t rb = format.row_bytes;
    switch (format.dtype) {
      case KvDtype::f32:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, F32Reader{},
                   F32Reader{});
        break;
      case KvDtype::f16:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale,
                   Half16Reader<hwy::float16_t>{}, Half16Reader<hwy::float16_t>{});
        break;
      case KvDtype::bf16:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale,
                   Half16Reader<hwy::bfloat16_t>{}, Half16Reader<hwy::bfloat16_t>{});
        break;
      case KvDtype::q8_0:
      case KvDtype::q8_0_kc:  // as q8_0 (the model reads q8_0_kc keys through attend_rows'
                              // widening)
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, Q8Reader{kv_dim},
                   Q8Reader{kv_dim});
        break;
      case KvDtype::fp8:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale,
                   Fp8Reader{format.k_scale[g]}, Fp8Reader{format.v_scale[g]});
        break;
      case KvDtype::int8:
        break;  // not storable: no cache hands out such rows
    }
  }
}

// Heads [head_begin, head_end) of one row together (AttendHeadsTogether) where the format allows,
// else one head at a time; the same bits either way.
void AttentionTogetherImpl(float* out, const float* q, const KvRun* runs, size_t n_runs,
                           const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                           int head_dim, int head_begin, int head_end) {
  const size_t D = head_dim;
  const int group = n_head / n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (head_begin >= head_end) return;
  if (D % kN == 0) {
    const size_t rb = format.row_bytes;
    switch (format.dtype) {
      case KvDtype::f32:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, F32Reader{});
      case KvDtype::f16:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, Half16Reader<hwy::float16_t>{});
      case KvDtype::bf16:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, Half16Reader<hwy::bfloat16_t>{});
      default:
        break;
    }
  }
  AttentionImpl(out, q, runs, n_runs, format, scratch, n_head, n_kv_head, head_dim, head_begin,
                head_end);
}

// One row's decode split by positions (attention.h): every head at once over a part of the
// positions, so each of a part's rows is read as one stretch (keys, then values) and the threads
// read disjoint stretches of the cache. The arithmetic per (head, position) is AttendHead's.
bool SplitSupportedImpl(KvDtype dtype, int head_dim) {
  const bool type = dtype == KvDtype::f32 || dtype == KvDtype::f16 || dtype == KvDtype::bf16;
  return type && head_dim % kN == 0;
}

// A whole row's prefetch distance: each is kv_dim values, many cache lines.
constexpr int kSplitAhead = 8;

template <class R>
void ScoresPart(float* HWY_RESTRICT scores, size_t stride, float* HWY_RESTRICT max_out,
                const float* HWY_RESTRICT q, const KvRun* runs, size_t n_runs, size_t row_bytes,
                int n_head, int group, size_t D, const R& rd) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const size_t span_bytes = static_cast<size_t>(n_head / group) * D * R::kBytes;
  ScoreHeadsTogether(scores, stride, max_out, q, runs, n_runs, row_bytes, 0, n_head, group, D,
                     scale, 0, span_bytes, kSplitAhead, rd);
}

template <class R>
void ValuesPart(float* HWY_RESTRICT partial, float* HWY_RESTRICT sums, float* HWY_RESTRICT scores,
                size_t stride, const float* HWY_RESTRICT max_score, const KvRun* runs,
                size_t n_runs, size_t row_bytes, int n_head, int group, size_t D, const R& rd) {
  const DF df;
  size_t n_pos = 0;
  for (size_t r = 0; r < n_runs; ++r) n_pos += runs[r].n_positions;
  const size_t n_chunks = (n_pos + kChunk - 1) / kChunk;
  const size_t span_bytes = static_cast<size_t>(n_head / group) * D * R::kBytes;
  for (int h = 0; h < n_head; ++h)
    for (size_t c = 0; c < n_chunks; ++c)
      sums[c * n_head + h] = ExpAndSum(scores + h * stride + c * kChunk,
                                       std::min(kChunk, n_pos - c * kChunk), max_score[h]);
  for (size_t i = 0; i < n_chunks * n_head * D; i += kN) hn::StoreU(hn::Zero(df), df, partial + i);
  size_t p = 0;
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* row = runs[r].v;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j, row += row_bytes, ++p) {
      if (j + kSplitAhead < n) PrefetchRow(row + kSplitAhead * row_bytes, span_bytes);
      float* chunk = partial + (p / kChunk) * n_head * D;
      for (int h = 0; h < n_head; ++h) {
        const VF w = hn::Set(df, scores[h * stride + p]);
        const size_t column = static_cast<size_t>(h / group) * D;
        float* o = chunk + h * D;
        for (size_t d = 0; d < D; d += kN)
          hn::StoreU(hn::MulAdd(w, rd.Load(row, column + d), hn::LoadU(df, o + d)), df, o + d);
      }
    }
  }
}

#define KVLM_SPLIT_DISPATCH(CALL)                   \
  switch (format.dtype) {                           \
    case KvDtype::f32:                              \
      return CALL(F32Reader{});                     \
    case KvDtype::f16:                              \
      return CALL(Half16Reader<hwy::float16_t>{});  \
    case KvDtype::bf16:                             \
      return CALL(Half16Reader<hwy::bfloat16_t>{}); \
    default:                                        \
      return;                                       \
  }

void ScoresPartImpl(float* scores, size_t stride, float* max_out, const float* q, const KvRun* runs,
                    size_t n_runs, const KvRowFormat& format, int n_head, int n_kv_head,
                    int head_dim) {
#define KVLM_SCORES(READER)                                                      \
  ScoresPart(scores, stride, max_out, q, runs, n_runs, format.row_bytes, n_head, \
             n_head / n_kv_head, head_dim, READER)
  KVLM_SPLIT_DISPATCH(KVLM_SCORES)
#undef KVLM_SCORES
}

void ValuesPartImpl(float* partial, float* sums, float* scores, size_t stride,
                    const float* max_score, const KvRun* runs, size_t n_runs,
                    const KvRowFormat& format, int n_head, int n_kv_head, int head_dim) {
#define KVLM_VALUES(READER)                                                                    \
  ValuesPart(partial, sums, scores, stride, max_score, runs, n_runs, format.row_bytes, n_head, \
             n_head / n_kv_head, head_dim, READER)
  KVLM_SPLIT_DISPATCH(KVLM_VALUES)
#undef KVLM_VALUES
}
#undef KVLM_SPLIT_DISPATCH

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(AttentionImpl);
HWY_EXPORT(AttentionTogetherImpl);
HWY_EXPORT(SplitSupportedImpl);
HWY_EXPORT(ScoresPartImpl);
HWY_EXPORT(ValuesPartImpl);

bool attention_split_supported(const KvRowFormat& format, int head_dim) {
  return HWY_DYNAMIC_DISPATCH(SplitSupportedImpl)(format.dtype, head_dim);
}

void attention_scores_part(float* scores, size_t stride, float* max_out, const float* q,
                           std::span<const KvRun> runs, const KvRowFormat& format, int n_head,
                           int n_kv_head, int head_dim) {
  HWY_DYNAMIC_DISPATCH(ScoresPartImpl)
  (scores, stride, max_out, q, runs.data(), runs.size(), format, n_head, n_kv_head, head_dim);
}

void attention_values_part(float* partial, float* chunk_sums, float* scores, size_t stride,
                           const float* max_score, std::span<const KvRun> runs,
                           const KvRowFormat& format, int n_head, int n_kv_head, int head_dim) {
  HWY_DYNAMIC_DISPATCH(ValuesPartImpl)
  (partial, chunk_sums, scores, stride, max_score, runs.data(), runs.size(), format, n_head,
   n_kv_head, head_dim);
}

void attention_combine_chunks(float* out, const float* partial, const float* chunk_sums,
                              int n_chunks, int n_head, int head_dim, int head_begin,
                              int head_end) {
  const size_t D = head_dim, H = n_head;
  for (size_t h = std::max(head_begin, 0); h < static_cast<size_t>(std::min(head_end, n_head));
       ++h) {
    float sum = 0.0f;
    for (int c = 0; c < n_chunks; ++c) sum += chunk_sums[c * H + h];
    const float inv_sum = 1.0f / sum;
    for (size_t d = 0; d < D; ++d) {
      float o = 0.0f;
      for (int c = 0; c < n_chunks; ++c) o += partial[(c * H + h) * D + d];
      out[h * D + d] = o * inv_sum;
    }
  }
}

void attention_forward(float* out, const float* q, std::span<const KvRun> runs,
                       const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                       int head_dim) {
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (out, q, runs.data(), runs.size(), format, scratch, n_head, n_kv_head, head_dim, 0, n_head);
}

void attention_heads_forward(float* out, const float* q, std::span<const KvRun> runs,
                             const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                             int head_dim, int head_begin, int head_end) {
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (out, q, runs.data(), runs.size(), format, scratch, n_head, n_kv_head, head_dim,
   std::max(head_begin, 0), std::min(head_end, n_head));
}

void attention_heads_together_forward(float* out, const float* q, std::span<const KvRun> runs,
                                      const KvRowFormat& format, float* scratch, int n_head,
                                      int n_kv_head, int head_dim, int head_begin, int head_end) {
  HWY_DYNAMIC_DISPATCH(AttentionTogetherImpl)
  (out, q, runs.data(), runs.size(), format, scratch, n_head, n_kv_head, head_dim,
   std::max(head_begin, 0), std::min(head_end, n_head));
}

void attention_reference(float* out, const float* q, std::span<const KvRun> runs,
                         const KvRowFormat& format, int n_head, int n_kv_head, int head_dim) {
  const size_t kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
  const int group = n_head / n_kv_head;
  for (int h = 0; h < n_head; ++h) {
    const float* qh = q + static_cast<size_t>(h) * head_dim;
    const int g = h / group;
    const size_t kv_offset = static_cast<size_t>(g) * head_dim;
    const float k_scale = format.k_scale ? format.k_scale[g] : 1.0f;
    const float v_scale = format.v_scale ? format.v_scale[g] : 1.0f;
    auto value = [&](const std::byte* rows, int j, int d, float s) {
      return double{
          kv_decode_value(rows + j * format.row_bytes, kv_dim, kv_offset + d, format.dtype, s)};
    };
    std::vector<double> scores;
    for (const KvRun& run : runs)
      for (int j = 0; j < run.n_positions; ++j) {
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += double{qh[d]} * value(run.k, j, d, k_scale);
        scores.push_back(dot / std::sqrt(static_cast<double>(head_dim)));
      }
    double max_score = -INFINITY, sum = 0.0;
    for (double s : scores) max_score = std::max(max_score, s);
    for (double& s : scores) sum += (s = std::exp(s - max_score));
    std::vector<double> acc(head_dim, 0.0);
    size_t p = 0;
    for (const KvRun& run : runs)
      for (int j = 0; j < run.n_positions; ++j, ++p)
        for (int d = 0; d < head_dim; ++d) acc[d] += scores[p] * value(run.v, j, d, v_scale);
    for (int d = 0; d < head_dim; ++d)
      out[static_cast<size_t>(h) * head_dim + d] = static_cast<float>(acc[d] / sum);
  }
}

}  // namespace kvlm
#endif  // HWY_ONCE
