#include "model/gpt2.h"

#include <omp.h>

#include <algorithm>

#include "model/attend_rows.h"
#include "model/decode_strips.h"
#include "model/quantize_weights.h"
#include "ops/activation.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16amx.h"
#include "ops/matmul_bf16dot.h"
#include "ops/weight_strips.h"

namespace kvlm {

namespace {

// Second copies of the matrices in the orders decode's kernels stream (each kernel gives the bits
// of reading the stored matrix): AMX's tiles of the BF16 layers, which vdpbf16ps's decode also
// reads (their weight pairs) and its head's pairs by lane class where AMX does not run, and
// column strips of F16's matrices, BF16's where vdpbf16ps does not run, and F32's layers
// (ops/weight_strips.h), which decode of one sequence and prefill read too (a thread's columns
// one contiguous stream), F32's head as stored (each output's row already is one).
// set_weight_strips_enabled(false) (`KVLM_STRIPS=0`) skips every copy but AMX's.
void repack_for_decode(Gpt2Weights& weights, WeightStorage& storage) {
  const bool amx = bf16_amx_active();
  const bool batched_bf16 = bf16_dot_active() && !amx && weight_strips_enabled();
  const int threads = omp_get_max_threads();
  std::vector<WeightMatrix*> layers;
  for (Gpt2Layer& L : weights.layers)
    for (WeightMatrix* m : {&L.c_attn, &L.attn_c_proj, &L.c_fc, &L.mlp_c_proj}) layers.push_back(m);
  auto allocate = [&](size_t n_values) {
    return static_cast<uint16_t*>(storage.owned.allocate(n_values * sizeof(uint16_t)));
  };
  for (WeightMatrix* m : layers)
    if ((amx || batched_bf16) && m->dtype == DType::kBF16 && m->layout == WeightLayout::kInOut) {
      uint16_t* tiles = allocate(bf16amx_tiles_size(*m));
      pack_bf16amx_tiles(tiles, *m, threads);
      m->amx_tiles = tiles;
    }
  WeightMatrix& head = weights.lm_head;
  if (batched_bf16 && head.dtype == DType::kBF16 && head.layout == WeightLayout::kOutIn &&
      head.n_in > 0 && head.n_out > 0) {
    uint16_t* strips = allocate(bf16dot_head_strips_size(head));
    pack_bf16dot_head_strips(strips, head, threads);
    head.bf16dot_pairs = strips;
  }
  layers.push_back(&head);
  attach_weight_strips(layers, storage.owned);
}

}  // namespace

Gpt2Model::Gpt2Model(ModelConfig config, Gpt2Weights weights,
                     std::unique_ptr<WeightStorage> storage, std::string source)
    : config_(config),
      weights_(std::move(weights)),
      storage_(std::move(storage)),
      source_(std::move(source)) {}

Result<std::unique_ptr<Gpt2Model>> Gpt2Model::create(ModelConfig config, Gpt2Weights weights,
                                                     std::unique_ptr<WeightStorage> storage,
                                                     std::string source) {
  KVLM_RETURN_IF_ERROR(validate_config(config, source));
  if (static_cast<int>(weights.layers.size()) != config.n_layer)
    return Status::error(source + ": " + std::to_string(weights.layers.size()) +
                         " layers bound, expected " + std::to_string(config.n_layer));
  if (storage) repack_for_decode(weights, *storage);
  return std::unique_ptr<Gpt2Model>(
      new Gpt2Model(config, std::move(weights), std::move(storage), std::move(source)));
}

size_t Gpt2Model::weight_bytes() const {
  const int64_t C = config_.n_embd;
  size_t bytes = weights_.wte.n_bytes();  // read once as the output head
  if (!config_.tied_embeddings) bytes += weights_.lm_head.n_bytes();
  for (const Gpt2Layer& L : weights_.layers) {
    bytes +=
        L.c_attn.n_bytes() + L.attn_c_proj.n_bytes() + L.c_fc.n_bytes() + L.mlp_c_proj.n_bytes();
    bytes += sizeof(float) * (4 * C + 3 * C + C + config_.n_ff + C);  // norms and biases
  }
  return bytes;
}

std::string Gpt2Model::weight_types() const {
  std::vector<const WeightMatrix*> all = {&weights_.wte};
  if (!config_.tied_embeddings) all.push_back(&weights_.lm_head);
  for (const Gpt2Layer& L : weights_.layers)
    for (const WeightMatrix* m : {&L.c_attn, &L.attn_c_proj, &L.c_fc, &L.mlp_c_proj})
      all.push_back(m);
  return count_weight_types(all);
}

// Causal self-attention for every new row: write its K and V into the cache (stored as the
// cache's dtype), then attend over the sequence's positions [0, pos], reading them all back
// from the cache. Prefill and decode run exactly this code, which is what makes cached and
// uncached logits identical.
void Gpt2Model::attention_block(int layer, std::span<const SequenceChunk> chunks, KvCache& cache,
                                const Parallel& par) {
  const int C = config_.n_embd;
  std::vector<AttentionRow> rows;
  for (const SequenceChunk& c : chunks)
    for (size_t t = 0; t < c.tokens.size(); ++t)
      rows.push_back({c.seq, c.start_pos + static_cast<int>(t)});
  const int n_rows = static_cast<int>(rows.size());
  for (int r = 0; r < n_rows; ++r) {
    const float* qkv = state_.qkv.data() + static_cast<size_t>(r) * 3 * C;
    cache.write_row(rows[r].seq, layer, rows[r].pos, qkv + C, qkv + 2 * C);
  }
  const AttentionShape shape{config_.n_head, config_.n_kv_head, config_.head_dim, 0};
  attend_rows(state_.att.data(), C, state_.qkv.data(), 3 * static_cast<size_t>(C), rows, layer,
              cache, shape, state_.scratch.data(), config_.n_ctx, par);
}

void Gpt2Model::prepare(size_t T, const Parallel& par) {
  const size_t C = config_.n_embd, F = config_.n_ff;
  ensure_size(state_.x, T * C);
  ensure_size(state_.xn, T * C);
  ensure_size(state_.qkv, T * 3 * C);
  ensure_size(state_.att, T * C);
  ensure_size(state_.ff, T * F);
  ensure_size(state_.proj, T * C);
  ensure_size(state_.scratch, static_cast<size_t>(std::max(par.n_threads, 1)) * config_.n_ctx);
}

float* Gpt2Model::embed(std::span<const SequenceChunk> chunks) {
  // x [T, C] = wte[token] + wpe[position]
  const int C = config_.n_embd;
  const Gpt2Weights& w = weights_;
  size_t r = 0;
  for (const SequenceChunk& c : chunks) {
    for (size_t t = 0; t < c.tokens.size(); ++t, ++r) {
      float* x = state_.x.data() + r * C;
      const float* pe = w.wpe + static_cast<size_t>(c.start_pos + t) * C;
      const size_t te = static_cast<size_t>(c.tokens[t]) * C;
      for (int i = 0; i < C; ++i) x[i] = load_as_f32(w.wte.data, w.wte.dtype, te + i) + pe[i];
    }
  }
  return state_.x.data();
}

void Gpt2Model::layer_forward(int l, float* x, int n_rows, std::span<const SequenceChunk> chunks,
                              KvCache& cache, const Parallel& par) {
  const int C = config_.n_embd;
  const size_t T = n_rows, F = config_.n_ff;
  const Gpt2Layer& L = weights_.layers[l];
  // x = x + c_proj(attention(ln_1(x)))
  layernorm_forward(state_.xn.data(), x, L.ln_1_weight, L.ln_1_bias, n_rows, C, config_.norm_eps);
  matmul_forward(state_.qkv.data(), state_.xn.data(), L.c_attn, L.c_attn_bias, n_rows, par);
  attention_block(l, chunks, cache, par);
  matmul_forward(state_.proj.data(), state_.att.data(), L.attn_c_proj, L.attn_c_proj_bias, n_rows,
                 par);
  for (size_t i = 0; i < T * C; ++i) x[i] += state_.proj[i];
  // x = x + c_proj(gelu(c_fc(ln_2(x))))
  layernorm_forward(state_.xn.data(), x, L.ln_2_weight, L.ln_2_bias, n_rows, C, config_.norm_eps);
  matmul_forward(state_.ff.data(), state_.xn.data(), L.c_fc, L.c_fc_bias, n_rows, par);
  gelu_forward(state_.ff.data(), T * F, par);
  matmul_forward(state_.proj.data(), state_.ff.data(), L.mlp_c_proj, L.mlp_c_proj_bias, n_rows,
                 par);
  for (size_t i = 0; i < T * C; ++i) x[i] += state_.proj[i];
}

void Gpt2Model::final_norm(float* out, const float* x) const {
  layernorm_forward(out, x, weights_.ln_f_weight, weights_.ln_f_bias, 1, config_.n_embd,
                    config_.norm_eps);
}

}  // namespace kvlm
