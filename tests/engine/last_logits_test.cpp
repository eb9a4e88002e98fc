// last_logits (what `kvlm logits` prints): cached, each prompt's last token really is computed
// against the cache (its other positions are prefix hits), and the answer is bitwise that of
// one uncached pass, for prompts that share prefixes, repeat, or are one token long.
#include "engine/last_logits.h"

#include <gtest/gtest.h>

#include "support/engine_runs.h"
#include "support/generation.h"

namespace kvlm {
namespace {

TEST(LastLogitsTest, CachedEqualsOnePassBitwise) {
  test::TempDir gpt2_dir, llama_dir;
  for (auto model : {test::engine_gpt2(gpt2_dir), test::engine_llama(llama_dir)}) {
    ASSERT_TRUE(model);
    const std::vector<std::vector<int32_t>> prompts = {
        {5, 6, 7, 9, 10, 11}, {8}, {5, 6, 7}, {5, 6, 7, 9, 10, 11}, {3, 1, 4, 1, 5, 9, 2, 6}};
    for (const char* kv : {"f32", "q8_0"}) {
      SCOPED_TRACE(kv);
      auto cached = last_logits(model, prompts, {.cached = true, .threads = 2, .kv_dtype = kv});
      auto uncached = last_logits(model, prompts, {.cached = false, .threads = 1, .kv_dtype = kv});
      ASSERT_TRUE(cached.is_ok()) << cached.message();
      ASSERT_TRUE(uncached.is_ok()) << uncached.message();
      ASSERT_EQ(cached->size(), prompts.size());
      for (size_t s = 0; s < prompts.size(); ++s) {
        ASSERT_EQ(cached.value()[s].size(), static_cast<size_t>(model->n_vocab()));
        EXPECT_TRUE(test::bitwise_equal(cached.value()[s], uncached.value()[s])) << "prompt " << s;
      }
    }
  }
}

TEST(LastLogitsTest, BadPromptsAreNamed) {
  test::TempDir dir;
  auto model = test::engine_gpt2(dir);
  ASSERT_TRUE(model);
  auto outside = last_logits(model, {{1, 2}, {1, 64}}, {});
  EXPECT_FALSE(outside.is_ok());
  EXPECT_EQ(outside.message(), "prompt 2: token id 64 is outside the vocabulary [0, 64)");
  auto empty = last_logits(model, {{1}, {}}, {});
  EXPECT_EQ(empty.message(), "prompt 2 is empty: give at least one token");
  auto dtype = last_logits(model, {{1}}, {.kv_dtype = "int4"});
  EXPECT_NE(dtype.message().find("unknown KV cache dtype 'int4'"), std::string::npos)
      << dtype.message();
}

}  // namespace
}  // namespace kvlm
