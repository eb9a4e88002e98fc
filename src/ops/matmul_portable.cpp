// The scalar reference for the matmul kernels: the plain definition, accumulated in double so
// it stands for the mathematical value. The fast kernels (matmul_simd.cpp) are checked against
// it with a tolerance; their bitwise guarantees are checked between themselves.
#include "ops/matmul.h"

namespace kvlm {

void matmul_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                      int n_rows) {
  for (int r = 0; r < n_rows; ++r) {
    for (int o = 0; o < w.n_out; ++o) {
      double acc = 0.0;
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

}  // namespace kvlm
