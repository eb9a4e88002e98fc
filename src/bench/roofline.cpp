#include "bench/roofline.h"

#include <algorithm>

namespace kvlm {

StepCost forward_step_cost(const ModelConfig& c, size_t weight_bytes,
                           std::span<const ChunkShape> chunks) {
  const double C = c.n_embd, F = c.n_ff, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  // Weights every row multiplies: attention projections, then the MLP (Llama's is gated).
  const double mlp_matrices = c.arch == Architecture::kLlama ? 3 : 2;
  const double per_row_weights =
      c.n_layer * (C * (q_dim + 2 * kv_dim) + q_dim * C + mlp_matrices * C * F);
  StepCost cost;
  cost.bytes = static_cast<double>(weight_bytes);
  for (const ChunkShape& chunk : chunks) {
    cost.flops += 2.0 * per_row_weights * chunk.n_tokens;
    cost.flops += 2.0 * static_cast<double>(c.n_vocab) * C;  // output head, last row only
    // Row at position p attends p + 1 positions: q.k and the weighted sum, 2 flops each.
    const double first = chunk.start_pos + 1.0, last = chunk.start_pos + chunk.n_tokens;
    const double positions_seen = (first + last) * chunk.n_tokens / 2;
    cost.flops += 4.0 * c.n_layer * q_dim * positions_seen;
    cost.bytes += static_cast<double>(c.kv_bytes_per_token(sizeof(float))) *
                  (chunk.start_pos + chunk.n_tokens);
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
