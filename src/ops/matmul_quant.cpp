// Where matmul_forward sends the block-quantized weight types: every one of them (Q8_0, Q5_0,
// Q4_0, Q6_K, Q4_K) runs on 8-bit activations with integer dot products (matmul_q8act.h), decode
// and prefill alike, so cached == uncached, batch and thread invariance hold with one order.
// (The fp32-activation kernels each type ran before, weights dequantized in registers, were
// removed once nothing reached them: docs/gguf.md tells their history.)
#include "ops/matmul_internal.h"
#include "ops/matmul_q8act.h"

namespace kvlm {

void matmul_quant_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                          int n_rows, const Parallel& par) {
  if (q8act_kernel_handles(w.dtype)) matmul_q8act_forward(out, x, w, bias, n_rows, par);
}

}  // namespace kvlm
