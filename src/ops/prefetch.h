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
// A template, instantiated in each Highway target's code: as a plain inline function GCC 12
// emitted half of these prefetches (1047 -> 488 in the binary) and F16 decode fell from 106
// to 72 tok/s.
template <typename T>
inline void PrefetchToL2(const T* p) {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T2);
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

}  // namespace kvlm
