// SIMD matmul over Q4_0, Q5_0, Q4_K and Q6_K weights, and Q8_0's prefill (matmul_kquant.h),
// compiled once per Highway target (foreach_target.h re-includes this file) and dispatched at run
// time.
//
// Each block format has a decoder that turns 16 consecutive weights of a block into fp32
// vectors in registers (Group): the nibbles (and Q6_K's two high bits) widened to int32, the
// offset subtracted in integers, converted (exact) and scaled with the block's fp32 factors in
// the order ggml's dequantize_row_* uses: Q4_0 (q - 8) * d; Q5_0 (q - 16) * d; Q4_K (d * sc) * q -
// dmin * m, the two factors formed once per sub-block; Q6_K (d * sc) * (q - 32). Those are the bits
// of ops/quant.h's scalar dequantization (a product of exact operands rounds once either way). The
// 16 weights then feed the 16 lanes of matmul.h's kOutIn chains (element i in lane i % 16, fmas in
// increasing i), so each output is the F32 kOutIn kernel's on the dequantized matrix.
//
// Two kernels, the same bits:
//   fused (decode, few rows): RO weight rows x RR activation rows per register tile, weights
//     dequantized and used at once; the decoded values never touch memory.
//   panel (prefill): RP weight rows dequantized once into an fp32 panel on the stack, then the
//     F32 kOutIn tiles (matmul_outin-inl.h) run every activation row against it: dequantizing
//     costs once per weight instead of once per weight and row tile.
//
// As in matmul_simd.cpp, an OpenMP region only calls a HWY_NOINLINE function of this target.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _cvtsh_ss (F16C), used on the AVX2 and AVX-512 targets only
#endif

#include "ops/matmul_kquant.h"
#include "ops/quant.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_kquant_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "hwy/cache_control.h"
#include "ops/matmul_outin-inl.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

using DI = hn::Rebind<int32_t, DD>;  // int32 lanes matching the fp32 vector
using D8 = hn::Rebind<uint8_t, DD>;  // as many bytes

// Calls f(integral_constant<size_t, g>) for g = 0 .. N-1, so shifts and offsets are constants.
template <size_t... G, class F>
HWY_INLINE void ForEachIndex(std::index_sequence<G...>, F&& f) {
  (f(std::integral_constant<size_t, G>()), ...);
}

// kDN bytes at p, widened to int32 lanes.
HWY_INLINE hn::Vec<DI> LoadBytes(const uint8_t* HWY_RESTRICT p) {
  return hn::PromoteTo(DI(), hn::LoadU(D8(), p));
}

// A block's fp16 scale as fp32. From AVX2 up x86 has F16C (one vcvtph2ps): f16_to_f32_fast's
// bits for every input but signalling NaNs, which come out quieted; a scale only enters
// products, which quiet them the same way, so the weights keep the reference's bits.
HWY_INLINE float HalfToFloat(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  return f16_to_f32_fast(h);
#endif
}

// out[j] = (j < 8 ? lo : hi) * float(bytes[j]) for 16 bytes, unsigned or signed: the products
// the scalar dequantization forms per sub-block (d * sc), eight lanes at a time.
template <typename T>
HWY_INLINE void ScaleBytes(float* HWY_RESTRICT out, const T* HWY_RESTRICT bytes, float lo,
                           float hi) {
  const hn::CappedTag<float, 8> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<T, decltype(df)> db;
  for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
    const auto v = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(db, bytes + j)));
    hn::StoreU(hn::Mul(hn::Set(df, j < 8 ? lo : hi), v), df, out + j);
  }
}

// Q4_0: 32 values, 18 bytes: fp16 d, 16 bytes of nibbles (low halves: values 0..15).
struct Q4_0Decoder {
  static constexpr size_t kValues = 32, kBytes = 18;
  float d;
  HWY_INLINE void Init(const uint8_t* HWY_RESTRICT b) { d = HalfToFloat(b); }
  template <size_t G>
  HWY_INLINE void Group(VD (&wv)[kDotVecs], const uint8_t* HWY_RESTRICT b) const {
    const DI di;
    const VD scale = hn::Set(DD(), d);
    for (int k = 0; k < kDotVecs; ++k) {
      const auto bytes = LoadBytes(b + 2 + k * kDN);
      const auto nib = G == 0 ? hn::And(bytes, hn::Set(di, 15)) : hn::ShiftRight<4>(bytes);
      wv[k] = hn::Mul(hn::ConvertTo(DD(), hn::Sub(nib, hn::Set(di, 8))), scale);
    }
  }
};

// Q5_0: 32 values, 22 bytes: fp16 d, 32 fifth bits (qh, bit j for value j), 16 bytes of nibbles
// as Q4_0's; value (q - 16) * d.
struct Q5_0Decoder {
  static constexpr size_t kValues = 32, kBytes = 22;
  float d;
  uint32_t qh;
  HWY_INLINE void Init(const uint8_t* HWY_RESTRICT b) {
    d = HalfToFloat(b);
    std::memcpy(&qh, b + 2, 4);
  }
  template <size_t G>
  HWY_INLINE void Group(VD (&wv)[kDotVecs], const uint8_t* HWY_RESTRICT b) const {
    const DI di;
    const VD scale = hn::Set(DD(), d);
    for (int k = 0; k < kDotVecs; ++k) {
      const auto bytes = LoadBytes(b + 6 + k * kDN);
      const auto nib = G == 0 ? hn::And(bytes, hn::Set(di, 15)) : hn::ShiftRight<4>(bytes);
      // Lane l's fifth bit: bit 16G + k * kDN + l of qh, moved to bit 4.
      const auto bit =
          hn::And(hn::Shr(hn::Set(di, static_cast<int32_t>(qh)), hn::Iota(di, 16 * G + k * kDN)),
                  hn::Set(di, 1));
      const auto q = hn::Or(nib, hn::ShiftLeft<4>(bit));
      wv[k] = hn::Mul(hn::ConvertTo(DD(), hn::Sub(q, hn::Set(di, 16))), scale);
    }
  }
};

// Q4_K: 256 values, 144 bytes: fp16 d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of
// nibbles; sub-block j (32 values) is d * sc_j * q - dmin * m_j.
struct Q4_KDecoder {
  static constexpr size_t kValues = 256, kBytes = 144;
  HWY_ALIGN float scale[16];  // d * sc_j for j < 8, then dmin * m_j (the mins)
  HWY_INLINE void Init(const uint8_t* HWY_RESTRICT b) {
    uint8_t bytes[16];  // 8 scales, 8 mins
    q4_k_unpack_scales(bytes, b + 4);
    ScaleBytes(scale, bytes, HalfToFloat(b), HalfToFloat(b + 2));
  }
  // Values 64c + 16p ..: bytes 32c + 16(p % 2) of qs, low nibbles for p < 2 (sub-block 2c),
  // high ones for p >= 2 (sub-block 2c + 1).
  template <size_t G>
  HWY_INLINE void Group(VD (&wv)[kDotVecs], const uint8_t* HWY_RESTRICT b) const {
    constexpr size_t c = G / 4, p = G % 4, sub = 2 * c + p / 2;
    const DI di;
    const VD s = hn::Set(DD(), scale[sub]), m = hn::Set(DD(), scale[8 + sub]);
    const uint8_t* q = b + 16 + 32 * c + 16 * (p % 2);
    for (int k = 0; k < kDotVecs; ++k) {
      const auto bytes = LoadBytes(q + k * kDN);
      const auto nib = p < 2 ? hn::And(bytes, hn::Set(di, 15)) : hn::ShiftRight<4>(bytes);
      wv[k] = hn::Sub(hn::Mul(s, hn::ConvertTo(DD(), nib)), m);
    }
  }
};

// Q6_K: 256 values, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16],
// fp16 d; value = (d * scale) * (q - 32), one scale per 16 values. Init assembles the 256 6-bit
// quants minus 32 as int8 in bytes (32 at a time: a quarter of the shifts and masks that
// assembling them in int32 lanes takes); Group widens 16 of them.
struct Q6_KDecoder {
  static constexpr size_t kValues = 256, kBytes = 210;
  HWY_ALIGN float scale[16];  // d * scales[i]
  HWY_ALIGN int8_t q[256];    // the quants minus 32, in value order
  HWY_INLINE void Init(const uint8_t* HWY_RESTRICT b) {
    ScaleBytes(scale, reinterpret_cast<const int8_t*>(b + 192), HalfToFloat(b + 208),
               HalfToFloat(b + 208));
    const hn::CappedTag<uint8_t, 32> du;
    const auto low4 = hn::Set(du, 15), low2 = hn::Set(du, 3), bias = hn::Set(du, 32);
    auto* qu = reinterpret_cast<uint8_t*>(q);
    // Value 128n + 32quarter + l: ql[64n + 32(quarter % 2) + l], nibble quarter / 2, and bits
    // 2quarter.. of qh[32n + l].
    for (size_t n = 0; n < 2; ++n)
      for (size_t l = 0; l < 32; l += hn::Lanes(du)) {
        const auto ql0 = hn::LoadU(du, b + 64 * n + l), ql1 = hn::LoadU(du, b + 64 * n + 32 + l);
        const auto qh = hn::LoadU(du, b + 128 + 32 * n + l);
        uint8_t* dst = qu + 128 * n + l;
        auto put = [&](size_t quarter, auto lo, auto hi) HWY_ATTR {
          hn::StoreU(hn::Sub(hn::Or(lo, hn::ShiftLeft<4>(hn::And(hi, low2))), bias), du,
                     dst + 32 * quarter);
        };
        put(0, hn::And(ql0, low4), qh);
        put(1, hn::And(ql1, low4), hn::ShiftRight<2>(qh));
        put(2, hn::ShiftRight<4>(ql0), hn::ShiftRight<4>(qh));
        put(3, hn::ShiftRight<4>(ql1), hn::ShiftRight<6>(qh));
      }
  }
  template <size_t G>
  HWY_INLINE void Group(VD (&wv)[kDotVecs], const uint8_t* HWY_RESTRICT) const {
    const hn::Rebind<int8_t, DD> d8;
    const VD s = hn::Set(DD(), scale[G]);
    for (int k = 0; k < kDotVecs; ++k)
      wv[k] =
          hn::Mul(s, hn::ConvertTo(DD(), hn::PromoteTo(DI(), hn::LoadU(d8, q + 16 * G + k * kDN))));
  }
};

// Q8_0: 32 values, 34 bytes: fp16 d, int8 q[32]; value q * d. (matmul_forward runs Q8_0 on
// 8-bit activations, matmul_q8act.h; this decoder is reached through matmul_kquant_forward.)
struct Q8_0Decoder {
  static constexpr size_t kValues = 32, kBytes = 34;
  float d;
  HWY_INLINE void Init(const uint8_t* HWY_RESTRICT b) { d = HalfToFloat(b); }
  template <size_t G>
  HWY_INLINE void Group(VD (&wv)[kDotVecs], const uint8_t* HWY_RESTRICT b) const {
    const hn::Rebind<int8_t, DD> d8;
    const auto* q = reinterpret_cast<const int8_t*>(b + 2 + 16 * G);
    for (int k = 0; k < kDotVecs; ++k)
      wv[k] = hn::Mul(hn::ConvertTo(DD(), hn::PromoteTo(DI(), hn::LoadU(d8, q + k * kDN))),
                      hn::Set(DD(), d));
  }
};

template <DType kType>
using DecoderFor = std::conditional_t<
    kType == DType::kQ4_0, Q4_0Decoder,
    std::conditional_t<
        kType == DType::kQ5_0, Q5_0Decoder,
        std::conditional_t<kType == DType::kQ4_K, Q4_KDecoder,
                           std::conditional_t<kType == DType::kQ6_K, Q6_KDecoder, Q8_0Decoder>>>>;

constexpr size_t kPrefetchTiles = 2;  // how far ahead the fused tiles fetch their weights

// Fused: out[r][o] for RO outputs (weight rows at w, row_bytes apart) and RR rows of x.
template <DType kType, int RO, int RR>
HWY_INLINE void FusedTile(float* HWY_RESTRICT out, const float* HWY_RESTRICT x,
                          const uint8_t* HWY_RESTRICT w, size_t row_bytes,
                          const float* HWY_RESTRICT bias, size_t n_in, size_t n_out) {
  using Dec = DecoderFor<kType>;
  constexpr size_t kGroups = Dec::kValues / 16;
  const DD dd;
  VD acc[RO][RR][kDotVecs];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr)
      for (int k = 0; k < kDotVecs; ++k) acc[ro][rr][k] = hn::Zero(dd);
  const size_t n_blocks = n_in / Dec::kValues;
  for (size_t bi = 0; bi < n_blocks; ++bi) {
    const uint8_t* block = w + bi * Dec::kBytes;
    // The tile's RO rows and the tiles after it are one contiguous stretch: fetch the part of
    // the tile kPrefetchTiles ahead that this block step reads, one sequential stream.
    {
      const char* ahead = reinterpret_cast<const char*>(w) + (kPrefetchTiles * RO) * row_bytes +
                          bi * (RO * Dec::kBytes);
      for (size_t line = 0; line < RO * Dec::kBytes; line += 64) hwy::Prefetch(ahead + line);
    }
    Dec dec[RO];
    for (int ro = 0; ro < RO; ++ro) dec[ro].Init(block + ro * row_bytes);
    ForEachIndex(std::make_index_sequence<kGroups>(), [&](auto g) HWY_ATTR {
      const size_t i = bi * Dec::kValues + g * 16;
      VD xv[RR][kDotVecs];
      for (int rr = 0; rr < RR; ++rr)
        for (int k = 0; k < kDotVecs; ++k) xv[rr][k] = hn::LoadU(dd, x + rr * n_in + i + k * kDN);
      for (int ro = 0; ro < RO; ++ro) {
        VD wv[kDotVecs];
        dec[ro].template Group<decltype(g)::value>(wv, block + ro * row_bytes);
        for (int k = 0; k < kDotVecs; ++k)
          for (int rr = 0; rr < RR; ++rr)
            acc[ro][rr][k] = hn::MulAdd(xv[rr][k], wv[k], acc[ro][rr][k]);
      }
    });
  }
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = SumLanes16(acc[ro][rr]);
      out[rr * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

template <DType kType, int RO, int RR>
void FusedOutputs(float* out, const float* x, const uint8_t* w, size_t row_bytes, const float* bias,
                  size_t n_rows, size_t n_in, size_t n_out) {
  size_t r = 0;
  for (; r + RR <= n_rows; r += RR)
    FusedTile<kType, RO, RR>(out + r * n_out, x + r * n_in, w, row_bytes, bias, n_in, n_out);
  for (; r < n_rows; ++r)
    FusedTile<kType, RO, 1>(out + r * n_out, x + r * n_in, w, row_bytes, bias, n_in, n_out);
}

// Output tile t of the fused kernel: outputs [t * RO, t * RO + RO) (fewer at the end).
template <DType kType, int RO, int RR>
HWY_NOINLINE void FusedOutputTile(float* out, const float* x, const uint8_t* w, size_t row_bytes,
                                  const float* bias, size_t n_rows, size_t n_in, size_t n_out,
                                  size_t t) {
  const size_t o0 = t * RO;
  if (o0 + RO <= n_out) {
    FusedOutputs<kType, RO, RR>(out + o0, x, w + o0 * row_bytes, row_bytes,
                                bias ? bias + o0 : nullptr, n_rows, n_in, n_out);
    return;
  }
  for (size_t o = o0; o < n_out; ++o)
    FusedOutputs<kType, 1, RR>(out + o, x, w + o * row_bytes, row_bytes, bias ? bias + o : nullptr,
                               n_rows, n_in, n_out);
}

template <DType kType, int RO, int RR>
void FusedAll(float* out, const float* x, const uint8_t* w, const float* bias, size_t n_rows,
              size_t n_in, size_t n_out, int n_threads) {
  const size_t row_bytes = n_in / DecoderFor<kType>::kValues * DecoderFor<kType>::kBytes;
  const size_t n_tiles = (n_out + RO - 1) / RO;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (size_t t = 0; t < n_tiles; ++t)
    FusedOutputTile<kType, RO, RR>(out, x, w, row_bytes, bias, n_rows, n_in, n_out, t);
}

// ---------------------------------------------------------------------------------------------
// Panel (prefill). The F32 tiles' shape: on 32-register targets 4 outputs x 6 rows (24
// accumulators, each weight vector feeding 6 fmas); elsewhere the F32 kernel's own.
constexpr int kPanelOuts = kVecRegs == 32 && kDotVecs == 1 ? 4 : kDotOutsN;
constexpr int kPanelRows = kVecRegs == 32 && kDotVecs == 1 ? 6 : kDotRowsN;
// The panel lives on the thread's stack: kPanelOuts rows of up to kPanelMaxIn values (192 KB
// at 4 x 12288). Wider matrices take the fused kernel, which gives the same bits.
constexpr size_t kPanelMaxIn = 12288;

// p [n_in] = weight row `row` dequantized (the decoders' values, stored).
template <DType kType>
HWY_INLINE void DequantizeRow(float* HWY_RESTRICT p, const uint8_t* HWY_RESTRICT row, size_t n_in) {
  using Dec = DecoderFor<kType>;
  const DD dd;
  for (size_t bi = 0; bi < n_in / Dec::kValues; ++bi) {
    const uint8_t* block = row + bi * Dec::kBytes;
    Dec dec;
    dec.Init(block);
    ForEachIndex(std::make_index_sequence<Dec::kValues / 16>(), [&](auto g) HWY_ATTR {
      VD wv[kDotVecs];
      dec.template Group<decltype(g)::value>(wv, block);
      for (int k = 0; k < kDotVecs; ++k)
        hn::Store(wv[k], dd, p + bi * Dec::kValues + g * 16 + k * kDN);
    });
  }
}

// Output tile t of the panel kernel: outputs [t * kPanelOuts, ...) for all rows.
template <DType kType>
HWY_NOINLINE void PanelOutputTile(float* out, const float* x, const uint8_t* w, size_t row_bytes,
                                  const float* bias, size_t n_rows, size_t n_in, size_t n_out,
                                  size_t t) {
  HWY_ALIGN float panel[kPanelOuts * kPanelMaxIn];
  const size_t o0 = t * kPanelOuts;
  const size_t outs = std::min<size_t>(kPanelOuts, n_out - o0);
  for (size_t ro = 0; ro < outs; ++ro)
    DequantizeRow<kType>(panel + ro * n_in, w + (o0 + ro) * row_bytes, n_in);
  const float* b = bias ? bias + o0 : nullptr;
  if (outs == kPanelOuts) {
    OutInOutputs<kPanelOuts, kPanelRows>(out + o0, x, panel, b, n_rows, n_in, n_out);
    return;
  }
  for (size_t ro = 0; ro < outs; ++ro)
    OutInOutputs<1, kPanelRows>(out + o0 + ro, x, panel + ro * n_in, b ? b + ro : nullptr, n_rows,
                                n_in, n_out);
}

template <DType kType>
void PanelAll(float* out, const float* x, const uint8_t* w, const float* bias, size_t n_rows,
              size_t n_in, size_t n_out, int n_threads) {
  const size_t row_bytes = n_in / DecoderFor<kType>::kValues * DecoderFor<kType>::kBytes;
  const size_t n_tiles = (n_out + kPanelOuts - 1) / kPanelOuts;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (size_t t = 0; t < n_tiles; ++t)
    PanelOutputTile<kType>(out, x, w, row_bytes, bias, n_rows, n_in, n_out, t);
}

template <DType kType>
void KQuantMatmul(float* out, const float* x, const uint8_t* w, const float* bias, size_t n_rows,
                  size_t n_in, size_t n_out, int n_threads, KQuantPath path) {
  if (path == KQuantPath::kAuto)
    path = n_rows >= kKQuantPanelMinRows ? KQuantPath::kPanel : KQuantPath::kFused;
  if (path == KQuantPath::kPanel && n_in <= kPanelMaxIn) {
    PanelAll<kType>(out, x, w, bias, n_rows, n_in, n_out, n_threads);
  } else if (n_rows == 1) {
    FusedAll<kType, kDotOuts1, 1>(out, x, w, bias, n_rows, n_in, n_out, n_threads);
  } else {
    FusedAll<kType, kDotOutsN, kDotRowsN>(out, x, w, bias, n_rows, n_in, n_out, n_threads);
  }
}

}  // namespace

void KQuantMatmulImpl(float* out, const float* x, const WeightMatrix& w, const float* bias,
                      int n_rows, int n_threads, KQuantPath path) {
  if (n_rows <= 0 || w.n_out <= 0) return;
  n_threads = std::max(n_threads, 1);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const size_t T = n_rows, I = w.n_in, O = w.n_out;
  switch (w.dtype) {
    case DType::kQ4_0:
      return KQuantMatmul<DType::kQ4_0>(out, x, data, bias, T, I, O, n_threads, path);
    case DType::kQ5_0:
      return KQuantMatmul<DType::kQ5_0>(out, x, data, bias, T, I, O, n_threads, path);
    case DType::kQ4_K:
      return KQuantMatmul<DType::kQ4_K>(out, x, data, bias, T, I, O, n_threads, path);
    case DType::kQ6_K:
      return KQuantMatmul<DType::kQ6_K>(out, x, data, bias, T, I, O, n_threads, path);
    case DType::kQ8_0:
      return KQuantMatmul<DType::kQ8_0>(out, x, data, bias, T, I, O, n_threads, path);
    default:
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(KQuantMatmulImpl);

bool kquant_kernel_handles(DType type, int n_rows) {
  return type == DType::kQ4_0 || type == DType::kQ5_0 || type == DType::kQ4_K ||
         type == DType::kQ6_K || (type == DType::kQ8_0 && n_rows >= kKQuantPanelMinRows);
}

void matmul_kquant_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                           int n_rows, const Parallel& par, KQuantPath path) {
  HWY_DYNAMIC_DISPATCH(KQuantMatmulImpl)(out, x, w, bias, n_rows, par.n_threads, path);
}

}  // namespace kvlm
#endif  // HWY_ONCE
