// Llama's formats and options, checked bitwise where the claim is exact: the same weights give
// the same logits whether they come from a llama2.c model.bin or a Hugging Face folder (q/k
// rows permuted as Hugging Face stores them, undone on load), whatever dtype they are stored
// in when the values fit it, and converting on load equals storing in that dtype; Mistral's
// sliding window keeps cached == uncached == paged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/dtype.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/generation.h"
#include "support/test_models.h"

namespace kvlm {
namespace {

using test::Generation;
using test::ModelFormat;

const std::vector<std::vector<int32_t>> kPrompts = {
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}, {47}};

// The same fp32 weights through both formats: after the q/k permutation is undone the matrices
// are identical, and the same kernels run in the same order, so the logits agree bit for bit.
TEST(LlamaFormats, HuggingFaceFolderEqualsLlama2cBinBitwise) {
  for (const auto& [kv, tied] :
       std::vector<std::pair<int, bool>>{{2, true}, {1, false}, {4, true}}) {
    test::TempDir bin_dir, hf_dir;
    test::ModelSpec bin = test::llama_spec(ModelFormat::kLlama2cBin, kv, tied);
    test::ModelSpec hf = test::llama_spec(ModelFormat::kLlamaHf, kv, tied, DType::kF32, 2);
    bin.seed = hf.seed = 7;
    auto a = test::write_and_load(bin, bin_dir);
    auto b = test::write_and_load(hf, hf_dir);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.message() << b.message();
    test::expect_same_bits(test::run_generate(*a.value(), kPrompts, 6, true, 1),
                           test::run_generate(*b.value(), kPrompts, 6, true, 1),
                           bin.name() + " vs " + hf.name());
  }
}

// Loading a Hugging Face folder without undoing the permutation would rotate the wrong pairs:
// check the loader really changed the rows (the logits would otherwise match only by luck).
TEST(LlamaFormats, PermutationIsUndoneOnLoad) {
  test::TempDir dir;
  const LlamaHostWeights w = random_llama_weights(tiny_llama_config(), 3);
  ASSERT_TRUE(write_llama_hf(dir.path(), w, HfWriteOptions{}).is_ok());
  auto model = load_model(dir.path(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  const auto* llama = dynamic_cast<const LlamaModel*>(model.value().get());
  ASSERT_NE(llama, nullptr);
  const ModelConfig& c = llama->config();
  const LlamaLayer& L = llama->weights().layers[1];
  const size_t q_size = static_cast<size_t>(c.q_dim()) * c.n_embd;
  const size_t k_size = static_cast<size_t>(c.kv_dim()) * c.n_embd;
  EXPECT_EQ(std::memcmp(L.wq.data, w.wq.data() + q_size, q_size * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(L.wk.data, w.wk.data() + k_size, k_size * sizeof(float)), 0);
}

// Rounds every weight to a value BF16 and F16 both hold exactly (tiny ones to 0, so none is an
// F16 subnormal), so that each storage dtype holds the very same numbers.
void round_to_bf16_and_f16(LlamaHostWeights* w) {
  for (std::vector<float>* v : {&w->embed, &w->attn_norm, &w->wq, &w->wk, &w->wv, &w->wo,
                                &w->ffn_norm, &w->w1, &w->w2, &w->w3, &w->final_norm, &w->lm_head})
    for (float& x : *v) x = std::fabs(x) < 1e-4f ? 0.0f : bf16_to_f32(f32_to_bf16(x));
}

// A matrix's bytes as loaded.
std::vector<uint8_t> bytes_of(const WeightMatrix& m) {
  const auto* p = static_cast<const uint8_t*>(m.data);
  return {p, p + m.n_bytes()};
}

// Storage is a container, not a change of model: with values every dtype holds exactly, F32,
// F16 and BF16 folders widened to F32 on load give bitwise the llama2.c .bin's logits; and
// converting F32 to BF16 on load gives bitwise the folder stored in BF16 (same rounding,
// round to nearest even, checked matrix by matrix on weights that do need rounding).
TEST(LlamaFormats, EveryStorageDtypeAndConversionIsTheSameModel) {
  LlamaConfig lc = tiny_llama_config();
  lc.model.tied_embeddings = false;
  LlamaHostWeights w = random_llama_weights(lc, 9);
  round_to_bf16_and_f16(&w);
  test::TempDir bin_dir;
  ASSERT_TRUE(write_llama2c(bin_dir.file("model.bin"), w).is_ok());
  auto bin = load_model(bin_dir.file("model.bin"), {});
  ASSERT_TRUE(bin.is_ok()) << bin.message();
  const Generation expected = test::run_generate(*bin.value(), kPrompts, 6, true, 1);
  LoadOptions widen;
  widen.convert_weights = DType::kF32;
  for (DType stored : {DType::kF32, DType::kF16, DType::kBF16}) {
    test::TempDir dir;
    HfWriteOptions o;
    o.dtype = stored;
    ASSERT_TRUE(write_llama_hf(dir.path(), w, o).is_ok());
    auto model = load_model(dir.path(), widen);
    ASSERT_TRUE(model.is_ok()) << model.message();
    EXPECT_EQ(model.value()->weight_dtype(), "F32");
    test::expect_same_bits(test::run_generate(*model.value(), kPrompts, 6, true, 1), expected,
                           std::string("stored as ") + dtype_name(stored));
  }

  // Unrounded weights: the .bin converted to BF16 on load against a folder stored in BF16.
  const LlamaHostWeights raw = random_llama_weights(lc, 9);
  test::TempDir raw_bin, raw_bf16;
  ASSERT_TRUE(write_llama2c(raw_bin.file("model.bin"), raw).is_ok());
  HfWriteOptions as_bf16;
  as_bf16.dtype = DType::kBF16;
  ASSERT_TRUE(write_llama_hf(raw_bf16.path(), raw, as_bf16).is_ok());
  LoadOptions to_bf16;
  to_bf16.convert_weights = DType::kBF16;
  auto converted = load_model(raw_bin.file("model.bin"), to_bf16);
  auto stored = load_model(raw_bf16.path(), {});
  ASSERT_TRUE(converted.is_ok() && stored.is_ok()) << converted.message() << stored.message();
  EXPECT_EQ(converted.value()->weight_dtype(), "BF16");
  const auto& a = dynamic_cast<const LlamaModel&>(*converted.value()).weights();
  const auto& b = dynamic_cast<const LlamaModel&>(*stored.value()).weights();
  EXPECT_EQ(bytes_of(a.lm_head), bytes_of(b.lm_head));
  for (size_t l = 0; l < a.layers.size(); ++l) {
    for (auto m : {&LlamaLayer::wq, &LlamaLayer::wk, &LlamaLayer::wv, &LlamaLayer::wo,
                   &LlamaLayer::w1, &LlamaLayer::w2, &LlamaLayer::w3})
      EXPECT_EQ(bytes_of(a.layers[l].*m), bytes_of(b.layers[l].*m)) << "layer " << l;
  }
}

// Mistral's sliding window: a window at least as long as the sequence changes nothing; a short
// one changes the logits past it and keeps cached == uncached == paged.
TEST(LlamaFormats, SlidingWindow) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 13, 2, 7, 30, 31, 3, 8, 1, 44, 6}};
  auto load_with_window = [&](int window, const test::TempDir& dir) {
    const LlamaHostWeights w = random_llama_weights(tiny_llama_config(), 5);
    EXPECT_TRUE(write_llama_hf(dir.path(), w, HfWriteOptions{}).is_ok());
    std::string config = test::read_text(dir.file("config.json"));
    const std::string from = "\"model_type\": \"llama\"";
    config.replace(config.find(from), from.size(),
                   "\"model_type\": \"mistral\", \"sliding_window\": " +
                       (window > 0 ? std::to_string(window) : std::string("null")));
    test::write_text(dir.file("config.json"), config);
    auto model = load_model(dir.path(), {});
    EXPECT_TRUE(model.is_ok()) << model.message();
    return std::move(model.value());
  };
  test::TempDir none_dir, long_dir, short_dir;
  auto none = load_with_window(0, none_dir);
  auto wide = load_with_window(32, long_dir);
  auto narrow = load_with_window(4, short_dir);
  const Generation a = test::run_generate(*none, prompts, 6, true, 1);
  test::expect_same_bits(test::run_generate(*wide, prompts, 6, true, 1), a, "window 32 vs none");
  const Generation c = test::run_generate(*narrow, prompts, 6, true, 1);
  test::expect_same_bits(test::run_generate(*narrow, prompts, 6, false, 1), c,
                         "window 4, uncached vs cached");
  test::expect_same_bits(test::run_generate(*narrow, prompts, 6, true, 1, test::paged_cache(3)), c,
                         "window 4, paged (window cuts inside blocks) vs contiguous");
  // That the window really applies, and exactly where: AttendRowsTest (window 5, against
  // attention over the last 5 positions by hand). Here only: it changes the model's logits.
  for (size_t step = 0; step < a.logits.size(); ++step)
    EXPECT_FALSE(test::bitwise_equal(a.logits[step][0], c.logits[step][0])) << step;
}

}  // namespace
}  // namespace kvlm
