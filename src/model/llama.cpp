#include "model/llama.h"

#include <algorithm>
#include <cstring>

#include "model/attend_rows.h"
#include "model/decode_strips.h"
#include "model/quantize_weights.h"
#include "ops/matmul.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace kvlm {

namespace {

// Moves each head's rows between the two rotary layouts: row c * half + i of the "halves" layout
// (Hugging Face) is row 2 * i + c of the "pairs" layout (llama2.c, and kvlm's RoPE).
void move_rotary_rows(void* dst, const void* src, int n_heads, int head_dim, size_t row_bytes,
                      bool halves_to_pairs) {
  const int half = head_dim / 2;
  auto* out = static_cast<uint8_t*>(dst);
  const auto* in = static_cast<const uint8_t*>(src);
  for (int h = 0; h < n_heads; ++h)
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < half; ++i) {
        const size_t halves = static_cast<size_t>(h) * head_dim + c * half + i;
        const size_t pairs = static_cast<size_t>(h) * head_dim + 2 * i + c;
        const size_t to = halves_to_pairs ? pairs : halves;
        const size_t from = halves_to_pairs ? halves : pairs;
        std::memcpy(out + to * row_bytes, in + from * row_bytes, row_bytes);
      }
}

}  // namespace

void unpermute_rotary_rows(void* dst, const void* src, int n_heads, int head_dim,
                           size_t row_bytes) {
  move_rotary_rows(dst, src, n_heads, head_dim, row_bytes, /*halves_to_pairs=*/true);
}

void permute_rotary_rows(void* dst, const void* src, int n_heads, int head_dim, size_t row_bytes) {
  move_rotary_rows(dst, src, n_heads, head_dim, row_bytes, /*halves_to_pairs=*/false);
}

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights,
                       std::unique_ptr<WeightStorage> storage, std::string source)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      storage_(std::move(storage)),
      source_(std::move(source)),
      inv_freq_(llama_rope_frequencies(config_)) {}

Result<std::unique_ptr<LlamaModel>> LlamaModel::create(LlamaConfig config, LlamaWeights weights,
                                                       std::unique_ptr<WeightStorage> storage,
                                                       std::string source) {
  KVLM_RETURN_IF_ERROR(validate_llama_config(config, source));
  if (static_cast<int>(weights.layers.size()) != config.model.n_layer)
    return Status::error(source + ": " + std::to_string(weights.layers.size()) +
                         " layers bound, expected " + std::to_string(config.model.n_layer));
  if (storage) {
    // Column strips (model/decode_strips.h), which prefill and decode read: every matrix is
    // [n_out, n_in], so they are lane-class strips, as the GPT-2 head's.
    std::vector<WeightMatrix*> matrices = {&weights.lm_head};
    for (LlamaLayer& L : weights.layers)
      for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w3, &L.w2})
        matrices.push_back(m);
    attach_weight_strips(matrices, storage->owned);
  }
  return std::unique_ptr<LlamaModel>(
      new LlamaModel(std::move(config), std::move(weights), std::move(storage), std::move(source)));
}

size_t LlamaModel::weight_bytes() const {
  const ModelConfig& c = config_.model;
  size_t bytes = weights_.lm_head.n_bytes();  // the embedding is read once per token, a row
  for (const LlamaLayer& L : weights_.layers) {
    bytes += L.wq.n_bytes() + L.wk.n_bytes() + L.wv.n_bytes() + L.wo.n_bytes();
    bytes += L.w1.n_bytes() + L.w3.n_bytes() + L.w2.n_bytes();
    bytes += sizeof(float) * 2 * c.n_embd;  // the two norms
    if (config_.attention_bias) bytes += sizeof(float) * (c.q_dim() + 2 * c.kv_dim() + c.n_embd);
    if (config_.mlp_bias) bytes += sizeof(float) * (2 * c.n_ff + c.n_embd);
  }
  return bytes + sizeof(float) * c.n_embd;  // final norm
}

std::string LlamaModel::weight_types() const {
  std::vector<const WeightMatrix*> all = {&weights_.embed};
  if (!config_.model.tied_embeddings) all.push_back(&weights_.lm_head);
  for (const LlamaLayer& L : weights_.layers)
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w3, &L.w2})
      all.push_back(m);
  return count_weight_types(all);
}

Status LlamaModel::check_kv_window(const KvWindow& window) const {
  if (!window.enabled()) return Status::ok();
  if (window.window > config_.model.n_ctx)
    return Status::error(
        "--kv-window " + std::to_string(window.window) + " is beyond the model's context length " +
        std::to_string(config_.model.n_ctx) + " (positions within the window run 0 .. W-1)");
  if (config_.sliding_window > 0 && window.window > config_.sliding_window)
    return Status::error("--kv-window " + std::to_string(window.window) +
                         " is beyond the model's own sliding window " +
                         std::to_string(config_.sliding_window) + " (config.json sliding_window)");
  return Status::ok();
}

// Causal grouped-query attention for every new row: its rotated K and its V go into the cache,
// then it attends over the sequence's positions [0, pos] (or the last sliding_window of them),
// all read back from the cache. Prefill and decode run exactly this code, which is what makes
// cached and uncached logits identical.
void LlamaModel::attention_block(int layer, std::span<const SequenceChunk> chunks, KvCache& cache,
                                 const Parallel& par) {
  const ModelConfig& c = config_.model;
  const int q_dim = c.q_dim(), kv_dim = c.kv_dim();
  std::vector<AttentionRow> rows;
  for (const SequenceChunk& chunk : chunks)
    for (size_t t = 0; t < chunk.tokens.size(); ++t)
      rows.push_back({chunk.seq, chunk.start_pos + static_cast<int>(t)});
  const int n_rows = static_cast<int>(rows.size());
  // With the cache's sinks + window (or q8_0_kc), keys go in unrotated and each row reads them
  // rotated to their in-view positions; its query sits at the view's last
  // (docs/sliding_window.md).
  const bool unrotated = cache.keys_unrotated();
  const KvWindow view = unrotated_view(cache, config_.sliding_window);
  const int view_positions = std::min(view.window, c.n_ctx);
  if (unrotated && window_rope_.n_positions < view_positions)
    window_rope_ = rope_table(inv_freq_.data(), c.head_dim, view_positions);
  for (int r = 0; r < n_rows; ++r) {
    float* q = state_.q.data() + static_cast<size_t>(r) * q_dim;
    float* k = state_.k.data() + static_cast<size_t>(r) * kv_dim;
    const float* v = state_.v.data() + static_cast<size_t>(r) * kv_dim;
    if (unrotated)
      rope_forward(q, nullptr, inv_freq_.data(), view.query_pos(rows[r].pos), c.n_head, c.n_kv_head,
                   c.head_dim);
    else
      rope_forward(q, k, inv_freq_.data(), rows[r].pos, c.n_head, c.n_kv_head, c.head_dim);
    cache.write_row(rows[r].seq, layer, rows[r].pos, k, v);
  }
  AttentionShape shape{c.n_head, c.n_kv_head, c.head_dim, config_.sliding_window};
  if (unrotated) shape.window_rope = &window_rope_;
  attend_rows(state_.att.data(), q_dim, state_.q.data(), q_dim, rows, layer, cache, shape,
              state_.scratch.data(), c.n_ctx, par);
}

void LlamaModel::prepare(size_t T, const Parallel& par) {
  const ModelConfig& c = config_.model;
  const size_t C = c.n_embd, F = c.n_ff;
  ensure_size(state_.x, T * C);
  ensure_size(state_.xn, T * C);
  ensure_size(state_.q, T * c.q_dim());
  ensure_size(state_.k, T * c.kv_dim());
  ensure_size(state_.v, T * c.kv_dim());
  ensure_size(state_.att, T * c.q_dim());
  ensure_size(state_.proj, T * C);
  ensure_size(state_.gate, T * F);
  ensure_size(state_.up, T * F);
  ensure_size(state_.scratch, static_cast<size_t>(std::max(par.n_threads, 1)) * c.n_ctx);
}

float* LlamaModel::embed(std::span<const SequenceChunk> chunks) {
  // x [T, C] = embed[token] (positions enter through RoPE, in attention)
  const int C = config_.model.n_embd;
  size_t r = 0;
  for (const SequenceChunk& chunk : chunks) {
    for (size_t t = 0; t < chunk.tokens.size(); ++t, ++r) {
      float* x = state_.x.data() + r * C;
      const size_t row = static_cast<size_t>(chunk.tokens[t]) * C;
      for (int i = 0; i < C; ++i)
        x[i] = load_as_f32(weights_.embed.data, weights_.embed.dtype, row + i);
    }
  }
  return state_.x.data();
}

void LlamaModel::layer_forward(int l, float* x, int n_rows, std::span<const SequenceChunk> chunks,
                               KvCache& cache, const Parallel& par) {
  const ModelConfig& c = config_.model;
  const int C = c.n_embd;
  const size_t T = n_rows, F = c.n_ff;
  const LlamaLayer& L = weights_.layers[l];
  // x = x + wo(attention(rope(wq xn), rope(wk xn), wv xn)), xn = rmsnorm(x)
  rmsnorm_forward(state_.xn.data(), x, L.attn_norm, n_rows, C, c.norm_eps);
  matmul_forward(state_.q.data(), state_.xn.data(), L.wq, L.bq, n_rows, par);
  matmul_forward(state_.k.data(), state_.xn.data(), L.wk, L.bk, n_rows, par);
  matmul_forward(state_.v.data(), state_.xn.data(), L.wv, L.bv, n_rows, par);
  attention_block(l, chunks, cache, par);
  matmul_forward(state_.proj.data(), state_.att.data(), L.wo, L.bo, n_rows, par);
  for (size_t i = 0; i < T * C; ++i) x[i] += state_.proj[i];
  // x = x + w2(silu(w1 xn) * w3 xn), xn = rmsnorm(x)
  rmsnorm_forward(state_.xn.data(), x, L.ffn_norm, n_rows, C, c.norm_eps);
  matmul_forward(state_.gate.data(), state_.xn.data(), L.w1, L.b1, n_rows, par);
  matmul_forward(state_.up.data(), state_.xn.data(), L.w3, L.b3, n_rows, par);
  swiglu_forward(state_.gate.data(), state_.gate.data(), state_.up.data(), T * F, par);
  matmul_forward(state_.proj.data(), state_.gate.data(), L.w2, L.b2, n_rows, par);
  for (size_t i = 0; i < T * C; ++i) x[i] += state_.proj[i];
}

void LlamaModel::final_norm(float* out, const float* x) const {
  rmsnorm_forward(out, x, weights_.final_norm, 1, config_.model.n_embd, config_.model.norm_eps);
}

}  // namespace kvlm
