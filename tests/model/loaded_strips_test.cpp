// Column strips attached by the loaders (model/decode_strips.h): a Llama checkpoint's F16
// matrices and a GPT-2 one's all get strips, prefill and decode both read them, and the bits are
// those of the stored matrices: cached == uncached, a sequence alone == in a batch, and strips on
// == strips off (KVLM_STRIPS=0), with prompts longer than a block of prefill's rows (64); and
// none are made where they would not fit in memory.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/decode_strips.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/random_gpt2.h"
#include "ops/dtype.h"
#include "ops/matmul.h"
#include "ops/weight_strips.h"
#include "support/generation.h"
#include "support/random_values.h"
#include "support/test_support.h"
#include "support/without_strips.h"
#include "util/available_memory.h"

namespace kvlm {
namespace {

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
    const test::WithoutStrips off;
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
    const test::WithoutStrips off;
    without = load_model(dir.path(), {});
  }
  ASSERT_TRUE(without.is_ok()) << without.message();
  expect_bits_of_the_stored_matrices(*with.value(), *without.value(), config.n_vocab);
}

// The strips are made only where their bytes fit in three quarters of the available memory;
// without them the kernels read the stored matrices, with the same bits.
TEST(LoadedStrips, NoStripsWhereTheyDoNotFit) {
  EXPECT_TRUE(weight_strips_fit(750, 1000));
  EXPECT_FALSE(weight_strips_fit(751, 1000));
  EXPECT_FALSE(weight_strips_fit(1, 0));
  const size_t available = available_memory_bytes();
  EXPECT_GT(available, size_t{0}) << "no memory available, as /proc/meminfo or sysconf tell it";

  std::mt19937 rng(3);
  std::vector<uint16_t> a(64 * 100), b(100 * 64);
  for (uint16_t& v : a) v = f32_to_f16(std::normal_distribution<float>(0, 0.5f)(rng));
  for (uint16_t& v : b) v = f32_to_f16(std::normal_distribution<float>(0, 0.5f)(rng));
  const WeightMatrix stored_a{a.data(), DType::kF16, WeightLayout::kOutIn, 64, 100};
  const WeightMatrix stored_b{b.data(), DType::kF16, WeightLayout::kInOut, 100, 64};
  const size_t bytes = weight_strips_bytes(stored_a) + weight_strips_bytes(stored_b);
  const std::vector<float> x = test::random_normals(70 * 100, rng);
  for (size_t room : {bytes * 4 / 3 - 4, bytes * 4 / 3 + 4}) {
    WeightMatrix ma = stored_a, mb = stored_b;
    OwnedTensors owned;
    attach_weight_strips({&ma, &mb}, owned, room);
    const bool fits = room >= bytes * 4 / 3;
    EXPECT_EQ(ma.strips != nullptr, fits) << room << " bytes available for " << bytes;
    EXPECT_EQ(mb.strips != nullptr, fits) << room << " bytes available for " << bytes;
    EXPECT_EQ(owned.n_bytes, fits ? bytes : 0);
    std::vector<float> with(70 * 100), plain(70 * 100);
    matmul_forward(with.data(), x.data(), ma, nullptr, 70, Parallel{2});
    matmul_forward(plain.data(), x.data(), stored_a, nullptr, 70, Parallel{2});
    EXPECT_TRUE(test::bitwise_equal(with, plain));
  }
}

}  // namespace
}  // namespace kvlm
