// BF16 products on every target's own widening kernels for a scope, as on machines without
// AVX512_BF16: vdpbf16ps (ops/matmul_bf16dot.h) runs them where the CPU has it, reading layouts of
// its own, so tests of what the other machines run switch it off. Restores the default (on).
#pragma once

#include "ops/matmul_bf16dot.h"

namespace kvlm::test {

class WithoutBf16Dot {
 public:
  WithoutBf16Dot() { set_bf16_dot_enabled(false); }
  ~WithoutBf16Dot() { set_bf16_dot_enabled(true); }
  WithoutBf16Dot(const WithoutBf16Dot&) = delete;
  WithoutBf16Dot& operator=(const WithoutBf16Dot&) = delete;
};

}  // namespace kvlm::test
