#include "model/gpt2.h"

#include <algorithm>

#include "model/attend_rows.h"
#include "ops/activation.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "util/mapped_file.h"

namespace kvlm {

namespace {

// Hugging Face saves GPT2Model tensors bare ("h.0.ln_1.weight") and GPT2LMHeadModel ones
// under "transformer." ("transformer.h.0.ln_1.weight"); fine-tunes use either.
const std::vector<std::string> kPrefixes = {"", "transformer."};

}  // namespace

Result<std::unique_ptr<Gpt2Model>> load_gpt2(const std::string& dir, const LoadOptions& options) {
  const std::string config_path = dir + "/config.json";
  auto text = read_text_file(config_path);
  if (!text) return text.status();
  auto config = parse_gpt2_config(text.value(), config_path);
  if (!config) return config.status();
  auto checkpoint = Checkpoint::open_folder(dir);
  if (!checkpoint) return checkpoint.status();
  return Gpt2Model::create(config.value(), std::move(checkpoint.value()), options);
}

Result<std::unique_ptr<Gpt2Model>> Gpt2Model::create(ModelConfig config, Checkpoint checkpoint,
                                                     const LoadOptions& options) {
  std::unique_ptr<Gpt2Model> model(new Gpt2Model(config, std::move(checkpoint)));
  KVLM_RETURN_IF_ERROR(model->bind(options));
  return model;
}

std::unique_ptr<Gpt2Model> Gpt2Model::from_weights(ModelConfig config, Gpt2Weights weights,
                                                   std::shared_ptr<const void> storage) {
  std::unique_ptr<Gpt2Model> model(new Gpt2Model(config, Checkpoint()));
  model->weights_ = std::move(weights);
  model->storage_ = std::move(storage);
  return model;
}

Status Gpt2Model::bind(const LoadOptions& options) {
  const int64_t C = config_.n_embd, V = config_.n_vocab, F = config_.n_ff;
  const auto convert = options.convert_weights;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, WeightLayout layout,
                    WeightMatrix* out) -> Status {
    auto m = checkpoint_.matrix(name, kPrefixes, static_cast<int>(rows), static_cast<int>(cols),
                                layout, convert, &owned_);
    if (!m) return m.status();
    *out = m.value();
    return Status::ok();
  };
  auto vec = [&](const std::string& name, std::vector<int64_t> shape, const float** out) {
    auto v = checkpoint_.vector_f32(name, kPrefixes, shape, &owned_);
    if (!v) return v.status();
    *out = v.value();
    return Status::ok();
  };
  Gpt2Weights& w = weights_;
  KVLM_RETURN_IF_ERROR(matrix("wte.weight", V, C, WeightLayout::kOutIn, &w.wte));
  KVLM_RETURN_IF_ERROR(vec("wpe.weight", {config_.n_ctx, C}, &w.wpe));
  // n_layer is the config's claim, the tensors are what the files hold: the last layer must
  // exist before anything is sized by n_layer.
  const std::string last_layer = "h." + std::to_string(config_.n_layer - 1) + ".ln_1.weight";
  if (!checkpoint_.find(last_layer, kPrefixes))
    return Status::error(checkpoint_.description() + ": missing tensor '" + last_layer +
                         "' (config.json says n_layer " + std::to_string(config_.n_layer) + ")");
  w.layers.resize(config_.n_layer);
  for (int l = 0; l < config_.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Gpt2Layer& L = w.layers[l];
    KVLM_RETURN_IF_ERROR(vec(p + "ln_1.weight", {C}, &L.ln_1_weight));
    KVLM_RETURN_IF_ERROR(vec(p + "ln_1.bias", {C}, &L.ln_1_bias));
    KVLM_RETURN_IF_ERROR(
        matrix(p + "attn.c_attn.weight", C, 3 * C, WeightLayout::kInOut, &L.c_attn));
    KVLM_RETURN_IF_ERROR(vec(p + "attn.c_attn.bias", {3 * C}, &L.c_attn_bias));
    KVLM_RETURN_IF_ERROR(
        matrix(p + "attn.c_proj.weight", C, C, WeightLayout::kInOut, &L.attn_c_proj));
    KVLM_RETURN_IF_ERROR(vec(p + "attn.c_proj.bias", {C}, &L.attn_c_proj_bias));
    KVLM_RETURN_IF_ERROR(vec(p + "ln_2.weight", {C}, &L.ln_2_weight));
    KVLM_RETURN_IF_ERROR(vec(p + "ln_2.bias", {C}, &L.ln_2_bias));
    KVLM_RETURN_IF_ERROR(matrix(p + "mlp.c_fc.weight", C, F, WeightLayout::kInOut, &L.c_fc));
    KVLM_RETURN_IF_ERROR(vec(p + "mlp.c_fc.bias", {F}, &L.c_fc_bias));
    KVLM_RETURN_IF_ERROR(
        matrix(p + "mlp.c_proj.weight", F, C, WeightLayout::kInOut, &L.mlp_c_proj));
    KVLM_RETURN_IF_ERROR(vec(p + "mlp.c_proj.bias", {C}, &L.mlp_c_proj_bias));
  }
  KVLM_RETURN_IF_ERROR(vec("ln_f.weight", {C}, &w.ln_f_weight));
  KVLM_RETURN_IF_ERROR(vec("ln_f.bias", {C}, &w.ln_f_bias));
  // lm_head.weight sits at the top level, outside "transformer.". Tied checkpoints omit it.
  if (checkpoint_.find("lm_head.weight")) {
    KVLM_RETURN_IF_ERROR(matrix("lm_head.weight", V, C, WeightLayout::kOutIn, &w.lm_head));
    config_.tied_embeddings = false;
  } else {
    w.lm_head = w.wte;
    config_.tied_embeddings = true;
  }
  return Status::ok();
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
  gelu_forward(state_.ff.data(), T * F);
  matmul_forward(state_.proj.data(), state_.ff.data(), L.mlp_c_proj, L.mlp_c_proj_bias, n_rows,
                 par);
  for (size_t i = 0; i < T * C; ++i) x[i] += state_.proj[i];
}

void Gpt2Model::final_norm(float* out, const float* x) const {
  layernorm_forward(out, x, weights_.ln_f_weight, weights_.ln_f_bias, 1, config_.n_embd,
                    config_.norm_eps);
}

}  // namespace kvlm
