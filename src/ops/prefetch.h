// Software prefetch for the streams a decode step reads once: weights and the KV cache.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace kvlm {

// Fetches the line holding `p` into L2, not L1 (prefetcht2 on x86; on Arm, PLDL2KEEP). An
// L1 prefetch holds one of the core's few L1 fill buffers for its whole trip to memory, and
// a decode step's streams ran out of them: L2's deeper queue keeps more lines in flight, and
// the demand loads then find their lines in L2. Measured with weights in huge pages (Sapphire
// Rapids, 2 threads, GPT-2 124M, interleaved runs): batch-1 decode at 128 cached F16 77 ->
// 100 tok/s, BF16 on vdpbf16ps 92 -> 105-110; F32 batch 8 221-226 -> 268; attention over 900
// cached positions (Q4_0) 152 -> 170. The AMX kernels keep prefetcht0 (102 against 94-97 tok/s
// with T2): their tile loads want the lines in L1. Prefetches never change a result.
// Always inlined: the one out-of-line copy is compiled for baseline x86-64, GCC then declines to
// inline it into the Highway targets' code (another target's options), finds that a call to it
// has no effect on memory it can see, and deletes the call. Which calls that hit changed with
// unrelated code (a template here was enough for a while, then a new kernel in matmul_simd.cpp
// took 665 prefetches down to 386 and F16 decode at batch 1 from 128 to 110 tok/s).
template <typename T>
__attribute__((always_inline)) inline void PrefetchToL2(const T* p) {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T2);
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

}  // namespace kvlm
