// The BPE merge loop on a small hand-made table (exact results) and its two algorithms against
// each other on GPT-2's table.
#include "tokenizer/bpe_merge.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/gpt2_test_data.h"

namespace kvlm {
namespace {

// Ids 0..3 are the letters a, b, c, d; merges make 4 = "ab", 5 = "aa", 6 = "abc", 7 = "aaaa".
const std::vector<MergeRule> kRules = {
    {0, 1, 4},  // rank 0: a b
    {0, 0, 5},  // rank 1: a a
    {4, 2, 6},  // rank 2: ab c
    {5, 5, 7},  // rank 3: aa aa
};

std::vector<int32_t> merged(std::vector<int32_t> ids, bool heap) {
  const MergeTable table(kRules);
  (heap ? bpe_merge_heap : bpe_merge_rescan)(table, &ids);
  return ids;
}

TEST(BpeMerge, LowestRankFirstLeftmostOnTies) {
  for (bool heap : {false, true}) {
    SCOPED_TRACE(heap ? "heap" : "rescan");
    EXPECT_EQ(merged({0, 1, 2}, heap), (std::vector<int32_t>{6}));     // abc
    EXPECT_EQ(merged({0, 0, 0}, heap), (std::vector<int32_t>{5, 0}));  // aa a, not a aa
    EXPECT_EQ(merged({0, 0, 0, 0}, heap), (std::vector<int32_t>{7}));
    // "aab": a b (rank 0) beats a a (rank 1), so the first a stays alone.
    EXPECT_EQ(merged({0, 0, 1}, heap), (std::vector<int32_t>{0, 4}));
    EXPECT_EQ(merged({3, 2, 1}, heap), (std::vector<int32_t>{3, 2, 1}));
    EXPECT_EQ(merged({2}, heap), (std::vector<int32_t>{2}));
    EXPECT_EQ(merged({}, heap), (std::vector<int32_t>{}));
  }
}

TEST(BpeMerge, RepeatedPairKeepsItsLastRank) {
  // Like OpenAI's dict(zip(merges, range(...))): "a a" listed again after "b c" ranks below it.
  const std::vector<MergeRule> rules = {{0, 0, 5}, {1, 2, 6}, {0, 0, 5}};
  const MergeTable table(rules);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.find(0, 0).rank, 2);
  EXPECT_EQ(table.find(1, 2).rank, 1);
  EXPECT_EQ(table.find(2, 1).rank, MergeTable::kNoRank);
}

TEST(BpeMerge, HeapAndRescanAgreeOnGpt2) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const auto* bpe = dynamic_cast<const ByteLevelBpe*>(&gpt2_test::gpt2());
  ASSERT_NE(bpe, nullptr);
  // Letters, spaces and punctuation, so merges cross what would be piece boundaries and long
  // sequences exercise many merge orders.
  const std::string letters = "etaoin shrdlu.,\n";
  std::mt19937 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    std::string text;
    const int n = 2 + static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) text.push_back(letters[rng() % letters.size()]);
    std::vector<int32_t> a;
    for (char c : text) a.push_back(bpe->encode(std::string(1, c), false).at(0));
    std::vector<int32_t> b = a;
    bpe_merge_rescan(bpe->merge_table(), &a);
    bpe_merge_heap(bpe->merge_table(), &b);
    ASSERT_EQ(a, b) << "text: " << text;
    Result<std::string> back = bpe->decode(a);
    ASSERT_TRUE(back.is_ok());
    ASSERT_EQ(back.value(), text);
  }
}

}  // namespace
}  // namespace kvlm
