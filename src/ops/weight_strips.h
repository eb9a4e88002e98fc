// Column strips: an F16, BF16 or F32 weight matrix re-laid for matmul_forward (decode and
// prefill alike), so that each strip of 48 outputs is one contiguous run and a thread's strips one
// sequential stream (ops/matmul_strips-inl.h reads them):
//   [n_in, n_out] (GPT-2's Conv1D): strip s holds W[i][48 s + c], rows i in order;
//   [n_out, n_in] (nn.Linear, the output head): strip s holds W[48 s + c][16 k + l] grouped by
//   lane class l, the steps k of each class in order (matmul.h's 16-lane order, one chain per
//   class).
// Made once at load, a copy of the bytes; the kernels that read it keep each output's stated
// order, so the bits are the same with or without it. After packing, only an embedding's row
// lookups read the stored matrix, so a checkpoint's mapped pages go cold (the kernel may drop
// them) rather than being read beside the strips.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/weight_matrix.h"

namespace kvlm {

// Columns per strip: a whole number of vectors on every target (3 of AVX-512's 16 fp32 lanes,
// 6 of AVX2's 8, 12 of NEON's 4), and 8 rows x 3 AVX-512 vectors fill 24 of its 32 registers.
inline constexpr size_t kStripCols = 48;

// Values of the strips of w: ceil(n_out / 48) strips of S x 48, S = n_in ([n_in, n_out]) or
// n_in rounded up to 16 ([n_out, n_in]).
size_t weight_strips_size(const WeightMatrix& w);
// Their bytes: each value is one of w's (2 bytes for F16 and BF16, 4 for F32).
size_t weight_strips_bytes(const WeightMatrix& w);

// Packs w's values as they are stored (F16, BF16 or F32; zero past n_out and n_in), the strips
// split over n_threads threads:
//   [n_in, n_out]: strips[(s * n_in + i) * 48 + c] = W[i][48 s + c]
//   [n_out, n_in]: strips[((s * 16 + l) * K + k) * 48 + c] = W[48 s + c][16 k + l], K =
//   ceil(n_in/16)
void pack_weight_strips(void* strips, const WeightMatrix& w, int n_threads);

// Whether a loader packs strips for w: F16 of either layout (whose batched decode was bound by
// widening and strided reads), BF16 the same where vdpbf16ps does not run its products
// (bf16_dot_active(): it reads layouts of its own), and F32 [n_in, n_out] (whose decode split by
// columns read pieces of rows apart); non-empty, and not switched off. F32's [n_out, n_in] head
// keeps its stored rows.
bool wants_weight_strips(const WeightMatrix& w);

// Turns the packing off (false: loaders keep only the stored matrix, every kernel reads it) or
// on for the whole process. `kvlm` calls it for KVLM_STRIPS=0. Call it before loading.
void set_weight_strips_enabled(bool enabled);
// Whether it is on. The GPT-2 loader also asks it before packing BF16 layers into AMX tiles for
// vdpbf16ps's batched decode (on AMX machines the tiles are AMX's own layout and always made).
bool weight_strips_enabled();

}  // namespace kvlm
