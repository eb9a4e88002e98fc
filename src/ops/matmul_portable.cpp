// Portable matmul kernels (plain C++ the compiler may vectorise without re-association):
// the fallback where no SIMD kernel is compiled, and the definition of the reduction order
// the SIMD kernels keep.
//
// Order per output element:
//   kInOut: acc = 0; for i in 0..I-1: acc = acc + x[i] * W[i][o]; out = acc + bias[o]
//   kOutIn: 8 partial sums, element i going to lane i % 8, each summed in increasing i;
//           then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); out = that + bias[o]
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/matmul.h"
#include "ops/matmul_internal.h"

namespace kvlm {

namespace {

constexpr int kColBlock = 64;  // outputs per task (kInOut)
constexpr int kRowBlock = 4;   // rows sharing one pass over a weight panel
constexpr int kLanes = 8;

// Widens n elements of a weight row starting at element `offset` into dst and returns dst;
// F32 rows are returned in place.
const float* widen(float* dst, const void* src, DType type, size_t offset, int n) {
  if (type == DType::kF32) return static_cast<const float*>(src) + offset;
  const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
  if (type == DType::kBF16) {
    for (int k = 0; k < n; ++k) dst[k] = bf16_to_f32(s[k]);
  } else {
    for (int k = 0; k < n; ++k) dst[k] = f16_to_f32(s[k]);
  }
  return dst;
}

void in_out_block(float* out, const float* x, const WeightMatrix& w, const float* bias, int n_rows,
                  int col0, int n_cols) {
  const int n_in = w.n_in, n_out = w.n_out;
  float buffer[kColBlock];
  for (int r0 = 0; r0 < n_rows; r0 += kRowBlock) {
    const int rows = std::min(kRowBlock, n_rows - r0);
    float acc[kRowBlock][kColBlock] = {};
    for (int i = 0; i < n_in; ++i) {
      const float* wrow =
          widen(buffer, w.data, w.dtype, static_cast<size_t>(i) * n_out + col0, n_cols);
      for (int r = 0; r < rows; ++r) {
        const float xi = x[static_cast<size_t>(r0 + r) * n_in + i];
        for (int c = 0; c < n_cols; ++c) acc[r][c] = acc[r][c] + xi * wrow[c];
      }
    }
    for (int r = 0; r < rows; ++r) {
      float* o = out + static_cast<size_t>(r0 + r) * n_out + col0;
      for (int c = 0; c < n_cols; ++c) o[c] = bias ? acc[r][c] + bias[col0 + c] : acc[r][c];
    }
  }
}

float lane_dot(const float* x, const float* w, int n) {
  float lane[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = lane[l] + x[i + l] * w[i + l];
  for (int l = 0; i < n; ++i, ++l) lane[l] = lane[l] + x[i] * w[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

void matmul_portable(float* out, const float* x, const WeightMatrix& w, const float* bias,
                     int n_rows, const Parallel& par) {
  if (w.layout == WeightLayout::kInOut) {
    const int n_blocks = (w.n_out + kColBlock - 1) / kColBlock;
#pragma omp parallel for num_threads(par.n_threads) schedule(static)
    for (int b = 0; b < n_blocks; ++b) {
      const int col0 = b * kColBlock;
      in_out_block(out, x, w, bias, n_rows, col0, std::min(kColBlock, w.n_out - col0));
    }
    return;
  }
  const int n_in = w.n_in, n_out = w.n_out;
#pragma omp parallel num_threads(par.n_threads)
  {
    std::vector<float> buffer(n_in);
#pragma omp for schedule(static)
    for (int o = 0; o < n_out; ++o) {
      const float* wrow =
          widen(buffer.data(), w.data, w.dtype, static_cast<size_t>(o) * n_in, n_in);
      for (int r = 0; r < n_rows; ++r) {
        const float dot = lane_dot(x + static_cast<size_t>(r) * n_in, wrow, n_in);
        out[static_cast<size_t>(r) * n_out + o] = bias ? dot + bias[o] : dot;
      }
    }
  }
}

void matmul_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                      int n_rows) {
  for (int r = 0; r < n_rows; ++r) {
    for (int o = 0; o < w.n_out; ++o) {
      double acc = 0.0;  // double: the reference is the mathematical value, not a bit pattern
      for (int i = 0; i < w.n_in; ++i) {
        const size_t index = w.layout == WeightLayout::kInOut ? static_cast<size_t>(i) * w.n_out + o
                                                              : static_cast<size_t>(o) * w.n_in + i;
        acc += static_cast<double>(x[static_cast<size_t>(r) * w.n_in + i]) *
               load_as_f32(w.data, w.dtype, index);
      }
      if (bias) acc += bias[o];
      out[static_cast<size_t>(r) * w.n_out + o] = static_cast<float>(acc);
    }
  }
}

void matmul_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                    int n_rows, const Parallel& par) {
  matmul_portable(out, x, w, bias, n_rows, par);
}

}  // namespace kvlm
