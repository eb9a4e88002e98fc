#include "bench/roofline.h"

#include <algorithm>

namespace kvlm {

namespace {

// Positions [first, last] summed over rows: the positions each attends (its own included).
double positions_seen(int64_t first, int64_t last, const KvWindow& window) {
  if (!window.enabled()) return static_cast<double>(first + 1 + last + 1) * (last - first + 1) / 2;
  double sum = 0;
  for (int64_t p = first; p <= last; ++p) sum += window.view_size(p);
  return sum;
}

// Distinct cached positions the rows [first, last] read: with a window, the sinks and the
// recent positions from the first row's view on (what the cache still holds).
double positions_read(int64_t first, int64_t last, const KvWindow& window) {
  if (!window.enabled()) return static_cast<double>(last + 1);
  const int64_t recent = window.recent_begin(first);
  return static_cast<double>(std::min<int64_t>(window.sinks, recent) + (last + 1 - recent));
}

}  // namespace

StepCost forward_step_cost(const ModelConfig& c, size_t weight_bytes,
                           std::span<const ChunkShape> chunks, const KvStorageOptions& kv) {
  const double C = c.n_embd, F = c.n_ff, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  // Weights every row multiplies: attention projections, then the MLP (Llama's is gated).
  const double mlp_matrices = c.arch == Architecture::kLlama ? 3 : 2;
  const double per_row_weights =
      c.n_layer * (C * (q_dim + 2 * kv_dim) + q_dim * C + mlp_matrices * C * F);
  // K and V of one position in every layer, as stored.
  const double kv_position_bytes =
      2.0 * c.n_layer * static_cast<double>(kv_row_bytes(kv.dtype, static_cast<size_t>(kv_dim)));
  StepCost cost;
  cost.bytes = static_cast<double>(weight_bytes);
  for (const ChunkShape& chunk : chunks) {
    cost.flops += 2.0 * per_row_weights * chunk.n_tokens;
    cost.flops += 2.0 * static_cast<double>(c.n_vocab) * C;  // output head, last row only
    if (chunk.n_tokens <= 0) continue;
    // Row at position p attends p + 1 positions (fewer in a window): q.k and the weighted sum,
    // 2 flops each.
    const int64_t first = chunk.start_pos, last = chunk.start_pos + chunk.n_tokens - 1;
    cost.flops += 4.0 * c.n_layer * q_dim * positions_seen(first, last, kv.window);
    cost.bytes += kv_position_bytes * positions_read(first, last, kv.window);
  }
  return cost;
}

double roofline_seconds(const StepCost& cost, const MachineRates& rates) {
  return std::max(cost.bytes / rates.bytes_per_second, cost.flops / rates.flops_per_second);
}

double roofline_tokens_per_second(const StepCost& cost, double tokens, const MachineRates& rates) {
  return tokens / roofline_seconds(cost, rates);
}

std::vector<std::vector<ChunkShape>> generation_steps(const std::vector<int>& prompt_lengths,
                                                      int max_new_tokens, bool cached) {
  std::vector<std::vector<ChunkShape>> steps;
  for (int s = 0; s < max_new_tokens; ++s) {
    std::vector<ChunkShape> step;
    for (int length : prompt_lengths) {
      if (!cached) {
        step.push_back({0, length + s});
      } else if (s == 0) {
        step.push_back({0, length});
      } else {
        step.push_back({length + s - 1, 1});
      }
    }
    steps.push_back(step);
  }
  return steps;
}

}  // namespace kvlm
