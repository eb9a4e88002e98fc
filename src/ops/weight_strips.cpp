#include "ops/weight_strips.h"

#include <algorithm>
#include <atomic>

#include "ops/matmul_bf16dot.h"
#include "ops/thread_team.h"

namespace kvlm {

namespace {
std::atomic<bool> g_strips_enabled{true};
}  // namespace

size_t weight_strips_size(const WeightMatrix& w) {
  const size_t strips = (static_cast<size_t>(w.n_out) + kStripCols - 1) / kStripCols;
  const size_t steps = w.layout == WeightLayout::kOutIn
                           ? (static_cast<size_t>(w.n_in) + 15) / 16 * 16
                           : static_cast<size_t>(w.n_in);
  return strips * steps * kStripCols;
}

size_t weight_strips_bytes(const WeightMatrix& w) {
  return weight_strips_size(w) * dtype_size(w.dtype);
}

namespace {

// Element is the values' storage type (uint16_t or float): packing only moves them.
template <typename Element>
void pack_strips(Element* strips, const WeightMatrix& w, int n_threads) {
  const Element* src = static_cast<const Element*>(w.data);
  const size_t I = w.n_in, O = w.n_out;
  const int64_t n_strips = static_cast<int64_t>((O + kStripCols - 1) / kStripCols);
  if (w.layout == WeightLayout::kOutIn) {
    const size_t K = (I + 15) / 16;
    parallel_for(n_threads, int64_t{n_strips}, [&](int64_t s) {
      Element* dst = strips + static_cast<size_t>(s) * 16 * K * kStripCols;
      for (size_t l = 0; l < 16; ++l)
        for (size_t k = 0; k < K; ++k, dst += kStripCols)
          for (size_t c = 0; c < kStripCols; ++c) {
            const size_t o = static_cast<size_t>(s) * kStripCols + c, i = 16 * k + l;
            dst[c] = o < O && i < I ? src[o * I + i] : Element{0};
          }
    });
    return;
  }
  parallel_for(n_threads, int64_t{n_strips}, [&](int64_t s) {
    const size_t c0 = static_cast<size_t>(s) * kStripCols, n = std::min(kStripCols, O - c0);
    Element* dst = strips + c0 * I;
    for (size_t i = 0; i < I; ++i, dst += kStripCols) {
      std::copy_n(src + i * O + c0, n, dst);
      std::fill(dst + n, dst + kStripCols, Element{0});
    }
  });
}

}  // namespace

void pack_weight_strips(void* strips, const WeightMatrix& w, int n_threads) {
  if (dtype_size(w.dtype) == 4) return pack_strips(static_cast<float*>(strips), w, n_threads);
  pack_strips(static_cast<uint16_t*>(strips), w, n_threads);
}

bool wants_weight_strips(const WeightMatrix& w) {
  // BF16 only where its products are not vdpbf16ps's (matmul_bf16dot.h), which read their own
  // layouts: there BF16 decode is F16's, widening by a shift where F16 converts.
  const bool type = w.dtype == DType::kF16 || (w.dtype == DType::kBF16 && !bf16_dot_active()) ||
                    (w.dtype == DType::kF32 && w.layout == WeightLayout::kInOut);
  return weight_strips_enabled() && type && w.n_in > 0 && w.n_out > 0;
}

bool weight_strips_enabled() {
  return g_strips_enabled.load(std::memory_order_relaxed);
}

void set_weight_strips_enabled(bool enabled) {
  g_strips_enabled.store(enabled, std::memory_order_relaxed);
}

}  // namespace kvlm
