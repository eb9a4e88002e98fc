// GPT-2 checkpoints as fine-tunes save them, and --weights conversion on load, checked exactly:
// names under "transformer." load, an untied lm_head is really used, and converting F32 to BF16
// on load rounds every matrix as the BF16 writer does (to nearest even) while norms and biases
// stay F32.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/last_logits.h"
#include "model/gpt2.h"
#include "model/loader.h"
#include "model/random_gpt2.h"
#include "support/generation.h"
#include "support/test_support.h"
#include "support/without_bf16_dot.h"

namespace kvlm {
namespace {

// Fine-tunes save tensors under "transformer." and may store lm_head.weight untied: both load,
// and an untied head is really used.
TEST(Gpt2Loading, PrefixedNamesAndSeparateHead) {
  test::TempDir plain, prefixed, untied;
  RandomGpt2Options options;
  ASSERT_TRUE(write_random_gpt2(plain.path(), test::tiny_gpt2_config(), options).is_ok());
  options.transformer_prefix = true;
  ASSERT_TRUE(write_random_gpt2(prefixed.path(), test::tiny_gpt2_config(), options).is_ok());
  options.separate_lm_head = true;
  ASSERT_TRUE(write_random_gpt2(untied.path(), test::tiny_gpt2_config(), options).is_ok());
  auto a = load_model(plain.path(), {});
  auto b = load_model(prefixed.path(), {});
  auto c = load_model(untied.path(), {});
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok()) << a.message() << b.message() << c.message();
  EXPECT_TRUE(a.value()->config().tied_embeddings);
  EXPECT_FALSE(c.value()->config().tied_embeddings);
  auto logits = [](Result<std::unique_ptr<Model>>& model) {
    return last_logits(LoadedModel::from_parts(std::move(model.value()), nullptr).value(),
                       {{1, 2, 3}}, {.threads = 1});
  };
  auto la = logits(a);
  auto lb = logits(b);
  auto lc = logits(c);
  ASSERT_TRUE(la.is_ok() && lb.is_ok() && lc.is_ok());
  EXPECT_TRUE(test::bitwise_equal(la.value()[0], lb.value()[0]));
  EXPECT_FALSE(test::bitwise_equal(la.value()[0], lc.value()[0]));
}

std::vector<uint8_t> bytes_of(const WeightMatrix& m) {
  const auto* p = static_cast<const uint8_t*>(m.data);
  return {p, p + m.n_bytes()};
}

// --weights bf16 or f16 on an F32 file gives, matrix by matrix, the bytes of the same seed
// written as that type (the writer rounds each value to nearest even with the scalar
// f32_to_bf16 / f32_to_f16; the loader rounds whole rows in SIMD); norms and biases keep the
// F32 file's values.
TEST(Gpt2Loading, ConvertOnLoadRoundsLikeTheWriter) {
  for (DType type : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(type));
    test::TempDir f32, written;
    RandomGpt2Options options;
    ASSERT_TRUE(write_random_gpt2(f32.path(), test::tiny_gpt2_config(), options).is_ok());
    options.dtype = type;
    ASSERT_TRUE(write_random_gpt2(written.path(), test::tiny_gpt2_config(), options).is_ok());
    LoadOptions convert;
    convert.convert_weights = type;
    auto converted = load_model(f32.path(), convert);
    auto stored = load_model(written.path(), {});
    auto original = load_model(f32.path(), {});
    ASSERT_TRUE(converted.is_ok() && stored.is_ok() && original.is_ok());
    EXPECT_EQ(converted.value()->weight_dtype(), dtype_name(type));
    const Gpt2Weights& a = dynamic_cast<const Gpt2Model&>(*converted.value()).weights();
    const Gpt2Weights& b = dynamic_cast<const Gpt2Model&>(*stored.value()).weights();
    const Gpt2Weights& f = dynamic_cast<const Gpt2Model&>(*original.value()).weights();
    EXPECT_EQ(bytes_of(a.wte), bytes_of(b.wte));
    const int C = converted.value()->config().n_embd;
    for (size_t l = 0; l < a.layers.size(); ++l) {
      for (auto m :
           {&Gpt2Layer::c_attn, &Gpt2Layer::attn_c_proj, &Gpt2Layer::c_fc, &Gpt2Layer::mlp_c_proj})
        EXPECT_EQ(bytes_of(a.layers[l].*m), bytes_of(b.layers[l].*m)) << "layer " << l;
      for (auto v : {&Gpt2Layer::ln_1_weight, &Gpt2Layer::ln_1_bias, &Gpt2Layer::ln_2_bias,
                     &Gpt2Layer::attn_c_proj_bias})
        EXPECT_EQ(std::memcmp(a.layers[l].*v, f.layers[l].*v, C * sizeof(float)), 0) << l;
    }
  }
}

// BF16 where vdpbf16ps does not run its products (AVX2, NEON, AVX-512 without AVX512_BF16; here
// switched off): the loader packs column strips of every matrix, head included, prefill and
// decode read them, and the bits hold: cached == uncached, and a sequence alone == in a batch
// (loaded_strips_test.cpp checks strips against the stored matrices).
TEST(Gpt2Loading, Bf16WithoutVdpbf16psDecodesOverStripsBitwise) {
  const test::WithoutBf16Dot no_bf16_dot;
  test::TempDir dir;
  RandomGpt2Options options;
  options.dtype = DType::kBF16;
  options.separate_lm_head = true;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), options).is_ok());
  auto loaded = load_model(dir.path(), {});
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  const auto* gpt2 = dynamic_cast<const Gpt2Model*>(loaded.value().get());
  ASSERT_NE(gpt2, nullptr);
  for (const Gpt2Layer& layer : gpt2->weights().layers)
    for (const WeightMatrix* m :
         {&layer.c_attn, &layer.attn_c_proj, &layer.c_fc, &layer.mlp_c_proj}) {
      EXPECT_EQ(m->dtype, DType::kBF16);
      EXPECT_NE(m->strips, nullptr) << "a layer's BF16 matrix has no strips";
    }
  EXPECT_NE(gpt2->weights().lm_head.strips, nullptr) << "the BF16 head has no strips";

  Model& model = *loaded.value();
  const std::vector<std::vector<int32_t>> prompts = {{7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}};
  const test::Generation cached = test::run_generate(model, prompts, 10, true, 2);
  test::expect_same_bits(cached, test::run_generate(model, prompts, 10, false, 2),
                         "cached vs uncached");
  for (size_t s = 0; s < prompts.size(); ++s)
    test::expect_same_bits(test::run_generate(model, {prompts[s]}, 10, true, 1),
                           test::only_sequence(cached, s),
                           "sequence " + std::to_string(s) + " alone vs in the batch");
}

}  // namespace
}  // namespace kvlm
