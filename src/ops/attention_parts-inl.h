// Per-target pieces shared by the attention kernels (attention.cpp: a head at a time and heads
// together; attention_split.cpp: a row split by positions): the Readers that widen stored K/V
// rows to fp32, the four-position dot products and their fixed lane sums, the chunked softmax
// sums, and the all-heads score pass. Each kernel file includes this once per Highway target,
// so every path computes a (head, position) with the same instructions in the same order.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_ATTENTION_PARTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_ATTENTION_PARTS_INL_H_
#undef KVLM_OPS_ATTENTION_PARTS_INL_H_
#else
#define KVLM_OPS_ATTENTION_PARTS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/attention.h"
#include "ops/prefetch.h"
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
  // out[i] = Scale(row, first + i) for i < n: kN at a time with Scale's bit moves where every
  // lane's half is normal, else lane by lane through Scale. Decoding a row's scales at once
  // costs a few vector operations where a scalar Scale per use cost more than the row's fmas.
  HWY_INLINE void Scales(const std::byte* row, size_t first, size_t n,
                         float* HWY_RESTRICT out) const {
    const DF df;
    const hn::Rebind<uint32_t, DF> du;
    const hn::Rebind<uint16_t, DF> d16;
    const uint16_t* halves = reinterpret_cast<const uint16_t*>(row + n_values) + first;
    size_t i = 0;
    for (; i + kN <= n; i += kN) {
      const auto h = hn::PromoteTo(du, hn::LoadU(d16, halves + i));
      const auto exponent = hn::And(h, hn::Set(du, 0x7c00u));
      if (!hn::AllFalse(du, hn::Or(hn::Eq(exponent, hn::Zero(du)),
                                   hn::Eq(exponent, hn::Set(du, 0x7c00u))))) {
        for (size_t k = i; k < i + kN; ++k) out[k] = Scale(row, first + k);
        continue;
      }
      const auto magnitude = hn::Add(hn::And(h, hn::Set(du, 0x7fffu)), hn::Set(du, 0x1c000u));
      const auto bits =
          hn::Or(hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u))), hn::ShiftLeft<13>(magnitude));
      hn::StoreU(hn::BitCast(df, bits), df, out + i);
    }
    for (; i < n; ++i) out[i] = Scale(row, first + i);
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

#if HWY_TARGET != HWY_SCALAR
// Per 128-bit block, the block sums of four positions' chains a0..a3: LaneSums4's interleave
// steps, shared with the group lane sums below.
HWY_INLINE VF BlockSums4(VF a0, VF a1, VF a2, VF a3) {
  const DF df;
  // Per block: [x0 + x2, y0 + y2, x1 + x3, y1 + y3] for positions x, y.
  const VF p01 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
  const VF p23 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
  const hn::Repartition<uint64_t, DF> du64;
  const auto b01 = hn::BitCast(du64, p01), b23 = hn::BitCast(du64, p23);
  return hn::Add(hn::BitCast(df, hn::InterleaveLower(du64, b01, b23)),
                 hn::BitCast(df, hn::InterleaveUpper(du64, b01, b23)));
}
#endif

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
  HWY_ALIGN float blocks[kN];
  hn::Store(BlockSums4(a0, a1, a2, a3), df, blocks);
  const hn::Full128<float> d4;
  auto sum = hn::Load(d4, blocks);
  for (size_t b = 4; b < kN; b += 4) sum = hn::Add(sum, hn::Load(d4, blocks + b));
  hn::StoreU(sum, d4, out);
#endif
}

// Sixteen chains' lane sums at once on 512-bit x86 targets: BlockSums4 on four groups of four
// chains, then LaneSums4's sum over 128-bit blocks ((b0 + b1) + b2) + b3 for all sixteen, after a
// 4 x 4 transposition of the blocks. Lane 4 i + j of the result is chain (i, j)'s sum: the same
// adds of the same values as LaneSums4(out, a[i][0..3]).
#undef KVLM_LANE_SUMS16  // defined once per target
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
#define KVLM_LANE_SUMS16 1
HWY_INLINE VF LaneSums16(const VF (&a)[4][4]) {
  VF t[4];  // t[i]: per 128-bit block, chains (i, 0..3)'s block sums
  for (int i = 0; i < 4; ++i) t[i] = BlockSums4(a[i][0], a[i][1], a[i][2], a[i][3]);
  // blocks[b] = [t0.b, t1.b, t2.b, t3.b]
  const __m512 x0 = _mm512_shuffle_f32x4(t[0].raw, t[1].raw, 0x44);  // t0.b0 t0.b1 t1.b0 t1.b1
  const __m512 x1 = _mm512_shuffle_f32x4(t[0].raw, t[1].raw, 0xEE);  // t0.b2 t0.b3 t1.b2 t1.b3
  const __m512 x2 = _mm512_shuffle_f32x4(t[2].raw, t[3].raw, 0x44);
  const __m512 x3 = _mm512_shuffle_f32x4(t[2].raw, t[3].raw, 0xEE);
  const VF b0{_mm512_shuffle_f32x4(x0, x2, 0x88)}, b1{_mm512_shuffle_f32x4(x0, x2, 0xDD)};
  const VF b2{_mm512_shuffle_f32x4(x1, x3, 0x88)}, b3{_mm512_shuffle_f32x4(x1, x3, 0xDD)};
  return hn::Add(hn::Add(hn::Add(b0, b1), b2), b3);
}
#else
#define KVLM_LANE_SUMS16 0
#endif

// Eight chains' lane sums at once on AVX2: BlockSums4 on two groups of four chains, then
// LaneSums4's sum of the two 128-bit blocks, b0 + b1, for all eight after swapping blocks
// between the groups. Lane 4 i + j of the result is chain (i, j)'s sum: the same adds of the same
// values as LaneSums4(out, a[i][0..3]).
#undef KVLM_LANE_SUMS8  // defined once per target
#if HWY_TARGET == HWY_AVX2 && HWY_ARCH_X86
#define KVLM_LANE_SUMS8 1
HWY_INLINE VF LaneSums8(const VF (&a)[2][4]) {
  VF t[2];  // t[i]: per 128-bit block, chains (i, 0..3)'s block sums
  for (int i = 0; i < 2; ++i) t[i] = BlockSums4(a[i][0], a[i][1], a[i][2], a[i][3]);
  const VF b0{_mm256_permute2f128_ps(t[0].raw, t[1].raw, 0x20)};  // t0.b0 t1.b0
  const VF b1{_mm256_permute2f128_ps(t[0].raw, t[1].raw, 0x31)};  // t0.b1 t1.b1
  return hn::Add(b0, b1);
}
#else
#define KVLM_LANE_SUMS8 0
#endif

// Dot4 over q8_0 rows whose head slice [c0, c0 + D) has D a multiple of kN (so, 32 being a
// multiple of kN, no vector straddles a block): per position, the slice's part of each q8_0
// block, in order, is one fma chain over the raw int8 values starting at zero, and the running
// sum takes it as a = fma(chain, block scale, a); then LaneSums4. Two vector operations per value
// (widen, fma) where scaling each value costs three.
// scale_of(j, block): position j's scale of that block (Q8Reader::Scale of k[j], or the same
// value decoded ahead).
template <class R, class ScaleOf>
HWY_INLINE void DotBlocks4(float* HWY_RESTRICT out, const float* HWY_RESTRICT q,
                           const std::byte* const* HWY_RESTRICT k, size_t c0, size_t D,
                           const R& rd, const ScaleOf& scale_of) {
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
    a0 = hn::MulAdd(p0, hn::Set(df, scale_of(0, block)), a0);
    a1 = hn::MulAdd(p1, hn::Set(df, scale_of(1, block)), a1);
    a2 = hn::MulAdd(p2, hn::Set(df, scale_of(2, block)), a2);
    a3 = hn::MulAdd(p3, hn::Set(df, scale_of(3, block)), a3);
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

// q8_0 blocks of a row whose scales the decode paths widen once per row into a buffer on the
// stack (kv_dim up to 8192); wider rows widen each scale where it is used.
constexpr size_t kMaxDecodedScales = 256;

// The q8_0 block scales of N rows over blocks [first, first + n), widened once
// (Q8Reader::Scales) where they fit the buffer, else each where it is used (Q8Reader::Scale):
// the same values either way. Empty for other readers.
template <int N, class R>
struct RowScales {
  static constexpr bool kUsed = R::kBlockScaled;
  size_t first = 0;
  bool decoded = false;
  HWY_ALIGN float s[kUsed ? N : 1][kUsed ? kMaxDecodedScales : 1];
  HWY_INLINE void Decode(const R& rd, const std::byte* const* rows, size_t first_block,
                         size_t n_blocks) {
    if constexpr (kUsed) {
      first = first_block;
      decoded = n_blocks <= kMaxDecodedScales;
      if (decoded)
        for (int j = 0; j < N; ++j) rd.Scales(rows[j], first_block, n_blocks, s[j]);
    }
  }
  HWY_INLINE float At(const R& rd, int j, const std::byte* row, size_t block) const {
    if constexpr (kUsed) return decoded ? s[j][block - first] : rd.Scale(row, block);
    return 1.0f;
  }
};

// acc[h * D + d] += w[h][j] * v_j[c_h + d] for the n rows v_j in order (j < N), heads h < nh of
// the query heads from h0, w[h][j] = weights[h * stride + j], c_h their key/value head's column:
// each element's chain one fma per row, as a row at a time would run it, its accumulator loaded
// and stored once per N rows instead of once per row.
template <int N, size_t kD, class R>
HWY_INLINE void AddValueRows(float* HWY_RESTRICT acc, const std::byte* const* rows,
                             const float* HWY_RESTRICT weights, size_t stride, int h0, int nh,
                             int group, size_t head_dim, const R& rd) {
  const size_t D = kD != 0 ? kD : head_dim;
  const DF df;
  // q8_0: each row's scales of the heads' blocks, decoded once for all the heads.
  RowScales<N, R> scales;
  if constexpr (R::kBlockScaled) {
    const size_t first = static_cast<size_t>(h0 / group) * D / kQ8BlockSize;
    const size_t end = (static_cast<size_t>((h0 + nh - 1) / group + 1) * D + kQ8BlockSize - 1) /
                       kQ8BlockSize;
    scales.Decode(rd, rows, first, end - first);
  }
  for (int h = 0; h < nh; ++h) {
    VF w[N];
    for (int j = 0; j < N; ++j) w[j] = hn::Set(df, weights[h * stride + j]);
    const size_t column = static_cast<size_t>((h0 + h) / group) * D;
    float* HWY_RESTRICT a = acc + h * D;
    for (size_t d = 0; d < D; d += kN) {
      VF o = hn::LoadU(df, a + d);
      if constexpr (R::kBlockScaled) {
        // q8_0, D a multiple of kN: no vector straddles a block, and each term is WeightedValues'
        // (the weight times the block's scale, one fp32 rounding) times the raw int8 value.
        const size_t block = (column + d) / kQ8BlockSize;
        for (int j = 0; j < N; ++j) {
          const VF ws = hn::Set(df, weights[h * stride + j] * scales.At(rd, j, rows[j], block));
          o = hn::MulAdd(ws, rd.LoadRaw(rows[j], column + d), o);
        }
      } else {
        for (int j = 0; j < N; ++j) o = hn::MulAdd(w[j], rd.Load(rows[j], column + d), o);
      }
      hn::StoreU(o, df, a + d);
    }
  }
}

// Rows added at once by AddValueRows: what the callers' runs and chunks allow, up to this.
constexpr int kValueRows = 4;

// AddValueRows for n (1..kValueRows) rows, the head dimensions models use most (64: GPT-2,
// TinyLlama, Llama 3.2 1B; 128: Llama 2 and 3 7-8B) known to the compiler, which then unrolls a
// head's loop: the same operations in the same order (GPT-2's shape, Zen 5, 12 layers of
// attention alone from memory: 1.16x at batch 1 and 900 cached, docs/performance.md).
template <class R>
HWY_INLINE void AddValueRowsUpTo4(int n, float* HWY_RESTRICT acc, const std::byte* const* rows,
                                  const float* HWY_RESTRICT weights, size_t stride, int h0, int nh,
                                  int group, size_t D, const R& rd) {
  static_assert(kValueRows == 4, "one case per row count");
  auto add = [&](auto rows_at_once, auto head_dim) HWY_ATTR {
    AddValueRows<decltype(rows_at_once)::value, decltype(head_dim)::value>(
        acc, rows, weights, stride, h0, nh, group, D, rd);
  };
  auto add_n = [&](auto head_dim) HWY_ATTR {
    switch (n) {
      case 1:
        return add(std::integral_constant<int, 1>{}, head_dim);
      case 2:
        return add(std::integral_constant<int, 2>{}, head_dim);
      case 3:
        return add(std::integral_constant<int, 3>{}, head_dim);
      default:
        return add(std::integral_constant<int, 4>{}, head_dim);
    }
  };
  if (D == 64) return add_n(std::integral_constant<size_t, 64>{});
  if (D == 128) return add_n(std::integral_constant<size_t, 128>{});
  add_n(std::integral_constant<size_t, 0>{});
}

// The weighted values of every position of `runs` in order, kValueRows rows at a time within a
// chunk (AddValueRows): position p's weight for head h is weights[h * stride + p], its chunk's
// accumulators acc_at(p) ([nh][D], head h0 + h's key/value head at column ((h0 + h) / group) *
// D of a row), and end_chunk() runs after each chunk's last position (kChunk positions from 0,
// the last chunk possibly short). Rows `ahead` positions on are fetched over [first_col, first_col
// + span_bytes) (ahead 0: none, whole rows left to the hardware prefetchers).
template <class R, class AccAt, class EndChunk>
HWY_INLINE void AddValueRuns(const KvRun* runs, size_t n_runs, size_t row_bytes,
                             const float* HWY_RESTRICT weights, size_t stride, int h0, int nh,
                             int group, size_t D, size_t first_col, size_t span_bytes, int ahead,
                             const R& rd, const AccAt& acc_at, const EndChunk& end_chunk) {
  size_t p = 0;
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* v = runs[r].v;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n;) {
      const int m = std::min({kValueRows, n - j, static_cast<int>(kChunk - p % kChunk)});
      const std::byte* rows[kValueRows];
      for (int i = 0; i < m; ++i) {
        rows[i] = v + (j + i) * row_bytes;
        if (ahead > 0 && j + i + ahead < n)
          PrefetchRow(rd.At(rows[i] + ahead * row_bytes, first_col), span_bytes);
      }
      AddValueRowsUpTo4(m, acc_at(p), rows, weights + p, stride, h0, nh, group, D, rd);
      j += m;
      p += m;
      if (p % kChunk == 0) end_chunk();
    }
  }
  if (p % kChunk != 0) end_chunk();
}

// Positions scored at once by DotGroup: a vector's lanes, where a lane-sum network exists.
#if KVLM_LANE_SUMS16
constexpr int kScoreGroup = 16;
HWY_INLINE VF LaneSumsGroup(const VF (&a)[4][4]) {
  return LaneSums16(a);
}
#elif KVLM_LANE_SUMS8
constexpr int kScoreGroup = 8;
HWY_INLINE VF LaneSumsGroup(const VF (&a)[2][4]) {
  return LaneSums8(a);
}
#else
constexpr int kScoreGroup = 4;
#endif

#if KVLM_LANE_SUMS16 || KVLM_LANE_SUMS8
// Dot4 for kScoreGroup positions k[0, kScoreGroup) at once, D a multiple of kN and a reader whose
// Row(k).Load is its Load: lane 4 i + j is Dot4's sum for k[4 i + j], one LaneSumsGroup for what
// kScoreGroup / 4 LaneSums4 (a store and four loads each) would do.
template <class R>
HWY_INLINE VF DotGroup(const float* HWY_RESTRICT q, const std::byte* const* HWY_RESTRICT k,
                       size_t c0, size_t D, const R& rd) {
  const DF df;
  VF a[kScoreGroup / 4][4];
  for (int i = 0; i < kScoreGroup / 4; ++i)
    for (int j = 0; j < 4; ++j) a[i][j] = hn::Zero(df);
  for (size_t d = 0; d < D; d += kN) {
    const VF qv = hn::LoadU(df, q + d);
    for (int i = 0; i < kScoreGroup / 4; ++i)
      for (int j = 0; j < 4; ++j) a[i][j] = hn::MulAdd(qv, rd.Load(k[4 * i + j], c0 + d), a[i][j]);
  }
  return LaneSumsGroup(a);
}
#endif

// How far ahead decode attention fetches rows of R: `ahead` positions for 16-bit rows, none for
// fp32 ones, whose stretches the hardware prefetchers follow alone faster than with a software
// fetch per line (96 a 3 KB row, keys and values): GPT-2's shape, Zen 5, attention alone from
// memory, fp32 cache: batch 1 split 1.04-1.27x, batch 8 1.02-1.17x, batch 2 1.15-1.37x without
// them; an f16 cache ran 0.64-0.87x at batch 8 and 0.88-1.12x split without them, so keeps them.
template <class R>
constexpr int FetchAhead(int ahead) {
  return R::kBytes >= 4 ? 0 : ahead;
}

// The largest of s[0, n) (-inf for none). Exact, so the order of the comparisons is free.
HWY_INLINE float MaxOf(const float* HWY_RESTRICT s, size_t n) {
  const DF df;
  VF m = hn::Set(df, -INFINITY);
  size_t i = 0;
  for (; i + kN <= n; i += kN) m = hn::Max(m, hn::LoadU(df, s + i));
  float largest = hn::GetLane(hn::MaxOfLanes(df, m));
  for (; i < n; ++i) largest = std::max(largest, s[i]);
  return largest;
}

// Scores q.k / sqrt(D) of query heads [h0, h0 + nh) over every position of `runs` in one pass:
// scores[h * stride + p] (h counted from h0) and each head's largest in max_out[h]. Per head and
// group of four positions, AttendHead's Dot4: its bits (on 512-bit x86, groups of sixteen, on
// AVX2 of eight, through DotGroup: the same bits). Each position's key row, and its value row for
// the weighted values that follow, is prefetched `ahead` positions early over [first_col,
// first_col + span_bytes), the stretch the heads read: the values' pass then finds its rows in L2
// (batched decode, whose values pass had waited on them: 1.02-1.07x at batch 8,
// docs/performance.md). ahead 0 fetches nothing (FetchAhead).
//
// The maxima are taken over the stored scores after the pass rather than by a reduction across a
// vector's lanes per head and group inside it (1.01-1.03x for attention alone).
template <class R>
HWY_INLINE void ScoreHeadsTogether(float* HWY_RESTRICT scores, size_t stride,
                                   float* HWY_RESTRICT max_out, const float* HWY_RESTRICT q,
                                   const KvRun* runs, size_t n_runs, size_t row_bytes, int h0,
                                   int nh, int group, size_t D, float scale, size_t first_col,
                                   size_t span_bytes, int ahead, const R& rd) {
  const std::byte* k_rows[16];
  static_assert(kScoreGroup <= 16, "k_rows holds a group");
  int n_group = 0;
  size_t p = 0;
  // q8_0: the scales of the heads' blocks, decoded once per row for all the heads.
  const size_t first_block = first_col / kQ8BlockSize;
  const size_t n_blocks = (first_col + span_bytes / R::kBytes + kQ8BlockSize - 1) / kQ8BlockSize -
                          first_block;
  RowScales<4, R> scales;
  // Positions k_rows[first, first + n), n <= 4, at p.
  auto score_four = [&](int first, int n) HWY_ATTR {
    const std::byte* k[4];
    for (int j = 0; j < 4; ++j) k[j] = k_rows[first + std::min(j, n - 1)];  // padding, discarded
    if constexpr (R::kBlockScaled) scales.Decode(rd, k, first_block, n_blocks);
    for (int h = 0; h < nh; ++h) {
      float dots[4];
      const float* qh = q + static_cast<size_t>(h0 + h) * D;
      const size_t c0 = static_cast<size_t>((h0 + h) / group) * D;
      if constexpr (R::kBlockScaled) {  // q8_0 (callers take it only for D a multiple of kN)
        DotBlocks4(dots, qh, k, c0, D, rd,
                   [&](int j, size_t block) { return scales.At(rd, j, k[j], block); });
      } else {
        Dot4(dots, qh, k, c0, D, rd);
      }
      float* s = scores + h * stride + p;
      for (int j = 0; j < n; ++j) s[j] = dots[j] * scale;
    }
    p += n;
  };
#if KVLM_LANE_SUMS16 || KVLM_LANE_SUMS8
  constexpr int kGroup = kScoreGroup;
  const bool whole_vectors = D % kN == 0 && !R::kBlockScaled;
  auto score_group = [&]() HWY_ATTR {
    if (n_group == kGroup && whole_vectors) {
      const DF df;
      for (int h = 0; h < nh; ++h) {
        const VF s = hn::Mul(DotGroup(q + static_cast<size_t>(h0 + h) * D, k_rows,
                                      static_cast<size_t>((h0 + h) / group) * D, D, rd),
                             hn::Set(df, scale));
        hn::StoreU(s, df, scores + h * stride + p);
      }
      p += kGroup;
    } else {
      for (int first = 0; first < n_group; first += 4)
        score_four(first, std::min(4, n_group - first));
    }
    n_group = 0;
  };
#else
  constexpr int kGroup = 4;
  auto score_group = [&]() HWY_ATTR {
    score_four(0, n_group);
    n_group = 0;
  };
#endif
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* k = runs[r].k;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j) {
      if (ahead > 0 && j + ahead < n) {
        PrefetchRow(rd.At(k + (j + ahead) * row_bytes, first_col), span_bytes);
        PrefetchRow(rd.At(runs[r].v + (j + ahead) * row_bytes, first_col), span_bytes);
      }
      k_rows[n_group++] = k + j * row_bytes;
      if (n_group == kGroup) score_group();
    }
  }
  if (n_group > 0) score_group();
  for (int h = 0; h < nh; ++h) max_out[h] = MaxOf(scores + h * stride, p);
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
