// Where matmul_forward sends the block-quantized weight types: every one of them (Q8_0, Q5_0,
// Q4_0, Q6_K, Q4_K) runs on 8-bit activations with integer dot products (matmul_q8act.h), decode
// and prefill alike, so cached == uncached, batch and thread invariance hold with one order.
// matmul_kquant_simd.cpp's fp32-activation kernels (each weight dequantized in registers) stay
// for types outside that set and are otherwise reached only through matmul_kquant_forward (its
// tests). Q8_0's fused fp32-activation decode tiles, which used to live here, were removed when
// Q8_0 moved to 8-bit activations: nothing reached them.
#include "ops/matmul_internal.h"
#include "ops/matmul_kquant.h"
#include "ops/matmul_q8act.h"

namespace kvlm {

void matmul_quant_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                          int n_rows, const Parallel& par) {
  if (q8act_kernel_handles(w.dtype)) return matmul_q8act_forward(out, x, w, bias, n_rows, par);
  if (kquant_kernel_handles(w.dtype, n_rows))
    return matmul_kquant_forward(out, x, w, bias, n_rows, par);
}

}  // namespace kvlm
