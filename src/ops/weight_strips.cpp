#include "ops/weight_strips.h"

#include <algorithm>
#include <atomic>

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

void pack_weight_strips(uint16_t* strips, const WeightMatrix& w, int n_threads) {
  const uint16_t* src = static_cast<const uint16_t*>(w.data);
  const size_t I = w.n_in, O = w.n_out;
  const int64_t n_strips = static_cast<int64_t>((O + kStripCols - 1) / kStripCols);
  if (w.layout == WeightLayout::kOutIn) {
    const size_t K = (I + 15) / 16;
#pragma omp parallel for num_threads(std::max(n_threads, 1)) schedule(static)
    for (int64_t s = 0; s < n_strips; ++s) {
      uint16_t* dst = strips + static_cast<size_t>(s) * 16 * K * kStripCols;
      for (size_t l = 0; l < 16; ++l)
        for (size_t k = 0; k < K; ++k, dst += kStripCols)
          for (size_t c = 0; c < kStripCols; ++c) {
            const size_t o = static_cast<size_t>(s) * kStripCols + c, i = 16 * k + l;
            dst[c] = o < O && i < I ? src[o * I + i] : uint16_t{0};
          }
    }
    return;
  }
#pragma omp parallel for num_threads(std::max(n_threads, 1)) schedule(static)
  for (int64_t s = 0; s < n_strips; ++s) {
    const size_t c0 = static_cast<size_t>(s) * kStripCols, n = std::min(kStripCols, O - c0);
    uint16_t* dst = strips + c0 * I;
    for (size_t i = 0; i < I; ++i, dst += kStripCols) {
      std::copy_n(src + i * O + c0, n, dst);
      std::fill(dst + n, dst + kStripCols, uint16_t{0});
    }
  }
}

bool wants_weight_strips(const WeightMatrix& w) {
  return weight_strips_enabled() && w.dtype == DType::kF16 && w.n_in > 0 && w.n_out > 0;
}

bool weight_strips_enabled() {
  return g_strips_enabled.load(std::memory_order_relaxed);
}

void set_weight_strips_enabled(bool enabled) {
  g_strips_enabled.store(enabled, std::memory_order_relaxed);
}

}  // namespace kvlm
