// The roofline model of a forward step: how much arithmetic it does and how many bytes it must
// at least move, so its time is bounded below by max(bytes / bandwidth, flops / fma peak).
// Decode of one row per sequence reads every weight for little arithmetic (bandwidth-bound);
// prefill of many rows reuses each weight across rows (compute-bound). `kvlm bench` uses it to
// judge the kernels and to predict what the KV cache can save.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/config.h"

namespace kvlm {

// One sequence's part of a step: n_tokens new positions after start_pos cached ones.
struct ChunkShape {
  int start_pos = 0;
  int n_tokens = 0;
};

struct StepCost {
  double flops = 0;  // multiply and add counted apart (an fma is 2)
  double bytes = 0;  // weights read once, plus each sequence's K and V read once
};

struct MachineRates {
  double bytes_per_second = 0;  // measured read bandwidth
  double flops_per_second = 0;  // measured fp32 fma throughput
};

// weight_bytes: what Model::weight_bytes() reports (every weight read once per step).
// FLOPs: the projections and MLP for every row (2 x their weights), the output head for each
// chunk's last row, and attention's q.k and weighted sum over the positions each row sees.
// kv: how the cache stores its rows: K and V at kv_row_bytes of its dtype (an f16 cache reads
// half an fp32 one's bytes), and with sinks + a sliding window only the positions the chunk's
// rows still attend (view_size of each row for the arithmetic).
StepCost forward_step_cost(const ModelConfig& config, size_t weight_bytes,
                           std::span<const ChunkShape> chunks, const KvStorageOptions& kv = {});

// max(bytes / bandwidth, flops / peak): the least time the step can take.
double roofline_seconds(const StepCost& cost, const MachineRates& rates);

// The most tokens per second the roofline allows for `tokens` tokens costing `cost`. The ratio
// of two such rates bounds a measured speedup. Batch-8 decode reads each weight once for eight
// rows but does eight times the arithmetic: with 16-bit weights (2 FLOP per 2 bytes a row) the
// batch-8 over batch-1 ratio is at most min(8, fma peak in FLOP/s / bandwidth in B/s), so 6x
// needs a machine with 6 FLOP of peak per byte of bandwidth (docs/performance.md).
double roofline_tokens_per_second(const StepCost& cost, double tokens, const MachineRates& rates);

// The steps `generate` runs for these prompts: cached, one prefill of every prompt and then one
// token per sequence per step; uncached, every step recomputes each sequence from position 0.
std::vector<std::vector<ChunkShape>> generation_steps(const std::vector<int>& prompt_lengths,
                                                      int max_new_tokens, bool cached);

}  // namespace kvlm
