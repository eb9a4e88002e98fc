#include "model/gpt2_hf.h"

#include "util/mapped_file.h"

namespace kvlm {

namespace {

// Hugging Face saves GPT2Model tensors bare ("h.0.ln_1.weight") and GPT2LMHeadModel ones
// under "transformer." ("transformer.h.0.ln_1.weight"); fine-tunes use either.
const std::vector<std::string> kPrefixes = {"", "transformer."};

}  // namespace

Result<std::unique_ptr<Gpt2Model>> create_gpt2_hf(ModelConfig config, Checkpoint checkpoint,
                                                  const LoadOptions& options) {
  auto storage = std::make_unique<WeightStorage>();
  storage->checkpoint = std::move(checkpoint);
  const Checkpoint& ckpt = *storage->checkpoint;
  const CheckpointBinder b(ckpt, kPrefixes, options, &storage->owned);
  const int C = config.n_embd, V = config.n_vocab, F = config.n_ff;
  constexpr WeightLayout kInOut = WeightLayout::kInOut, kOutIn = WeightLayout::kOutIn;
  Gpt2Weights w;
  KVLM_RETURN_IF_ERROR(b.matrix("wte.weight", V, C, kOutIn, &w.wte));
  KVLM_RETURN_IF_ERROR(b.vector("wpe.weight", {config.n_ctx, C}, &w.wpe));
  KVLM_RETURN_IF_ERROR(b.check_last_layer(
      "h." + std::to_string(config.n_layer - 1) + ".ln_1.weight", "n_layer", config.n_layer));
  w.layers.resize(config.n_layer);
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    Gpt2Layer& L = w.layers[l];
    KVLM_RETURN_IF_ERROR(b.vector(p + "ln_1.weight", {C}, &L.ln_1_weight));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ln_1.bias", {C}, &L.ln_1_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn.c_attn.weight", C, 3 * C, kInOut, &L.c_attn));
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn.c_attn.bias", {3 * C}, &L.c_attn_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn.c_proj.weight", C, C, kInOut, &L.attn_c_proj));
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn.c_proj.bias", {C}, &L.attn_c_proj_bias));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ln_2.weight", {C}, &L.ln_2_weight));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ln_2.bias", {C}, &L.ln_2_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.c_fc.weight", C, F, kInOut, &L.c_fc));
    KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.c_fc.bias", {F}, &L.c_fc_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.c_proj.weight", F, C, kInOut, &L.mlp_c_proj));
    KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.c_proj.bias", {C}, &L.mlp_c_proj_bias));
  }
  KVLM_RETURN_IF_ERROR(b.vector("ln_f.weight", {C}, &w.ln_f_weight));
  KVLM_RETURN_IF_ERROR(b.vector("ln_f.bias", {C}, &w.ln_f_bias));
  // lm_head.weight sits at the top level, outside "transformer.". Tied checkpoints omit it.
  config.tied_embeddings = !ckpt.find("lm_head.weight");
  if (config.tied_embeddings) {
    w.lm_head = w.wte;
  } else {
    KVLM_RETURN_IF_ERROR(b.matrix("lm_head.weight", V, C, kOutIn, &w.lm_head));
  }
  const std::string source = ckpt.description() + " (Hugging Face folder)";
  return Gpt2Model::create(config, std::move(w), std::move(storage), source);
}

Result<std::unique_ptr<Gpt2Model>> load_gpt2(const std::string& dir, const LoadOptions& options) {
  const std::string config_path = dir + "/config.json";
  KVLM_ASSIGN_OR_RETURN(const std::string text, read_text_file(config_path));
  KVLM_ASSIGN_OR_RETURN(ModelConfig config, parse_gpt2_config(text, config_path));
  KVLM_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open_folder(dir));
  return create_gpt2_hf(config, std::move(checkpoint), options);
}

}  // namespace kvlm
