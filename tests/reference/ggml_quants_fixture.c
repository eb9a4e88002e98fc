// Writes tests/golden/ggml_quants.bin: inputs and the bytes ggml's own reference quantizers
// (quantize_row_{q8_0,q4_0,q5_0,q4_K,q6_K}_ref, what llama-quantize writes without an importance
// matrix) make of them, so tests/ops/quantize_k_test.cpp can check that kvlm writes the same
// bytes. Built against a ggml checkout (GGML: ggml-org/ggml at any recent commit; this file was
// made with d99724f2b141fed9e1a9f402213506c081433465), ggml-base's flags (no -march, so no fma):
//   cc -O2 -std=c11 -I$GGML/include -I$GGML/src tests/reference/ggml_quants_fixture.c \
//      $GGML/src/ggml-quants.c -lm -o /tmp/ggml_quants_fixture
//   /tmp/ggml_quants_fixture tests/golden/ggml_quants.bin
// File layout (little-endian): "KVQF", u32 n (values, a multiple of 256), f32 x[n], then the
// Q4_K, Q6_K, Q8_0, Q4_0 and Q5_0 bytes of x in that order (Q5_0 came last, so the bytes
// before it are those of the file without it).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

// ggml-base functions ggml-quants.c refers to on paths this program never takes (the rest of
// ggml is not linked).
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  fprintf(stderr, "ggml_abort at %s:%d (%s)\n", file, line, fmt);
  abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { return (void)type, (void)ne, 0; }
size_t ggml_type_size(enum ggml_type type) { return (void)type, 0; }
const char* ggml_type_name(enum ggml_type type) { return (void)type, "?"; }

enum { kBlocks = 24, kN = 256 * kBlocks };

static uint64_t state = 0x9E3779B97F4A7C15ull;
static float uniform(void) {  // xorshift64*, [0, 1)
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return (float)((state * 2685821657736338717ull) >> 40) / 16777216.0f;
}
static float gauss(void) {
  float u = uniform() + 1e-7f, v = uniform();
  return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

int main(int argc, char** argv) {
  if (argc != 2) return fprintf(stderr, "usage: %s OUT.bin\n", argv[0]), 1;
  static float x[kN];
  for (int b = 0; b < kBlocks; ++b) {
    float* y = x + 256 * b;
    for (int i = 0; i < 256; ++i) {
      float v;
      switch (b) {
        case 0: v = 0.0f; break;                                        // all zero
        case 1: v = 0.5f; break;                                        // constant
        case 2: v = gauss(); break;                                     // N(0, 1)
        case 3: v = 0.02f * gauss(); break;                             // typical weights
        case 4: v = 0.1f + 0.9f * uniform(); break;                     // all positive
        case 5: v = -0.1f - 0.9f * uniform(); break;                    // all negative
        case 6: v = i == 77 ? 100.0f : 0.01f * gauss(); break;          // one outlier
        case 7: v = 1e-20f * gauss(); break;                            // below ggml's eps
        case 8: v = 1e-6f * gauss(); break;                             // fp16-subnormal scales
        case 9: v = 3000.0f * gauss(); break;                           // large
        case 10: v = (i / 32) % 2 ? 0.0f : gauss(); break;              // zero sub-blocks
        case 11: v = (float)(i % 16 - 8); break;                        // integers: rounding ties
        case 12: v = (float)(i % 7) * 0.25f - 0.5f; break;              // few distinct values
        case 13: v = i < 16 ? 5.0f : 0.001f * gauss(); break;           // one loud sub-block
        default: {
          const float g = gauss();
          v = (b % 2 ? g * g * g : g) * powf(10.0f, (float)(b - 17) / 2.0f);  // heavy tails
        }
      }
      y[i] = v;
    }
  }
  static block_q4_K q4k[kBlocks];
  static block_q6_K q6k[kBlocks];
  static block_q8_0 q80[kN / 32];
  static block_q4_0 q40[kN / 32];
  static block_q5_0 q50[kN / 32];
  quantize_row_q4_K_ref(x, q4k, kN);
  quantize_row_q6_K_ref(x, q6k, kN);
  quantize_row_q8_0_ref(x, q80, kN);
  quantize_row_q4_0_ref(x, q40, kN);
  quantize_row_q5_0_ref(x, q50, kN);
  FILE* f = fopen(argv[1], "wb");
  if (!f) return perror(argv[1]), 1;
  const uint32_t n = kN;
  fwrite("KVQF", 1, 4, f);
  fwrite(&n, 4, 1, f);
  fwrite(x, 4, kN, f);
  fwrite(q4k, sizeof q4k, 1, f);
  fwrite(q6k, sizeof q6k, 1, f);
  fwrite(q80, sizeof q80, 1, f);
  fwrite(q40, sizeof q40, 1, f);
  fwrite(q50, sizeof q50, 1, f);
  return fclose(f) != 0;
}
