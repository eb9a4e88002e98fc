// Column strips attached by the loaders (model/decode_strips.h): a Llama checkpoint's F16
// matrices and a GPT-2 one's all get strips, prefill and decode both read them, and the bits are
// those of the stored matrices: cached == uncached, a sequence alone == in a batch, and strips on
// == strips off (KVLM_STRIPS=0), with prompts longer than a block of prefill's rows (64).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/gpt2.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/random_gpt2.h"
#include "ops/weight_strips.h"
#include "support/generation.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

// Loads with the packing switched off, then on again.
class WithoutStrips {
 public:
  WithoutStrips() { set_weight_strips_enabled(false); }
  ~WithoutStrips() { set_weight_strips_enabled(true); }
  WithoutStrips(const WithoutStrips&) = delete;
  WithoutStrips& operator=(const WithoutStrips&) = delete;
};

// A Llama with several strips per matrix (n_ff 176: 3 strips and a part), grouped-query heads,
// and room for a prompt past a block of rows.
LlamaConfig strips_llama_config() {
  LlamaConfig lc = tiny_llama_config();
  ModelConfig& c = lc.model;
  c.n_vocab = 150;
  c.n_ctx = 96;
  c.n_embd = 64;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.head_dim = 16;
  c.n_ff = 176;
  return lc;
}

std::vector<std::vector<int32_t>> prompts(int n_vocab) {
  std::vector<int32_t> longer;
  for (int i = 0; i < 70; ++i) longer.push_back((i * 37 + 5) % n_vocab);
  return {longer, {9, 2, 40, 3, 17, 8, 1, 30, 22}, {4}};
}

// The comparisons of the file's header, `with` and `without` loaded from one checkpoint.
void expect_bits_of_the_stored_matrices(Model& with, Model& without, int n_vocab) {
  const auto p = prompts(n_vocab);
  const test::Generation cached = test::run_generate(with, p, 6, true, 2);
  test::expect_same_bits(cached, test::run_generate(with, p, 6, false, 2), "cached vs uncached");
  test::expect_same_bits(cached, test::run_generate(without, p, 6, true, 2),
                         "strips vs the stored matrices");
  test::expect_same_bits(cached, test::run_generate(with, p, 6, true, 1), "2 threads vs 1");
  for (size_t s = 0; s < p.size(); ++s)
    test::expect_same_bits(test::run_generate(with, {p[s]}, 6, true, 2),
                           test::only_sequence(cached, s),
                           "sequence " + std::to_string(s) + " alone vs in the batch");
}

TEST(LoadedStrips, LlamaF16MatricesAreReadAsStripsWithTheStoredBits) {
  test::TempDir dir;
  HfWriteOptions hf;
  hf.dtype = DType::kF16;
  const LlamaConfig config = strips_llama_config();
  ASSERT_TRUE(write_llama_hf(dir.path(), random_llama_weights(config, 11), hf).is_ok());
  auto with = load_model(dir.path(), {});
  ASSERT_TRUE(with.is_ok()) << with.message();
  const auto* llama = dynamic_cast<const LlamaModel*>(with.value().get());
  ASSERT_NE(llama, nullptr);
  for (const LlamaLayer& L : llama->weights().layers)
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w3, &L.w2}) {
      EXPECT_EQ(m->dtype, DType::kF16);
      EXPECT_NE(m->strips, nullptr) << "a layer's F16 matrix has no strips";
    }
  EXPECT_NE(llama->weights().lm_head.strips, nullptr) << "the tied F16 head has no strips";
  Result<std::unique_ptr<Model>> without = Status::error("not loaded");
  {
    const WithoutStrips off;
    without = load_model(dir.path(), {});
  }
  ASSERT_TRUE(without.is_ok()) << without.message();
  const auto* plain = dynamic_cast<const LlamaModel*>(without.value().get());
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->weights().layers[0].w1.strips, nullptr) << "KVLM_STRIPS=0 packed strips";
  expect_bits_of_the_stored_matrices(*with.value(), *without.value(), config.model.n_vocab);
}

TEST(LoadedStrips, Gpt2F16PrefillAndDecodeReadStripsWithTheStoredBits) {
  test::TempDir dir;
  RandomGpt2Options options;
  options.dtype = DType::kF16;
  options.separate_lm_head = true;
  ModelConfig config = test::tiny_gpt2_config();
  config.n_ctx = 96;
  ASSERT_TRUE(write_random_gpt2(dir.path(), config, options).is_ok());
  auto with = load_model(dir.path(), {});
  ASSERT_TRUE(with.is_ok()) << with.message();
  const auto* gpt2 = dynamic_cast<const Gpt2Model*>(with.value().get());
  ASSERT_NE(gpt2, nullptr);
  EXPECT_NE(gpt2->weights().layers[0].c_fc.strips, nullptr);
  EXPECT_NE(gpt2->weights().lm_head.strips, nullptr);
  Result<std::unique_ptr<Model>> without = Status::error("not loaded");
  {
    const WithoutStrips off;
    without = load_model(dir.path(), {});
  }
  ASSERT_TRUE(without.is_ok()) << without.message();
  expect_bits_of_the_stored_matrices(*with.value(), *without.value(), config.n_vocab);
}

}  // namespace
}  // namespace kvlm
