// Attention on every SIMD target and every stored K/V type (f32, f16, bf16, q8_0, fp8): close to
// the double-precision reference (over the same decoded values) for head widths around the
// vector length, several head groupings and position counts, misaligned rows; and bitwise the
// same however the positions are split into runs (contiguous vs paged caches).
#include "ops/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/attention_split.h"
#include "ops/for_each_target.h"

namespace kvlm {
namespace {

struct Case {
  int n_head, n_kv_head, head_dim, n_positions;
};

// q [H * D] at a float offset; K and V rows stored as `dtype`, starting `offset` elements into
// their buffers (so rows are misaligned against vectors), with the fp8 scales per KV head.
struct Data {
  std::vector<float> q;
  std::vector<std::byte> k, v;
  size_t offset = 0;  // of q in floats; of the rows in bytes
  std::vector<float> k_scale, v_scale;
  KvRowFormat format;
};

// row_magnitude(p): the factor position p's K and V values are drawn with (q8_0: scales of
// every kind of half, zero and subnormal included).
Data make_data(const Case& c, int offset, KvDtype dtype, std::mt19937& rng,
               float (*row_magnitude)(int) = nullptr) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Data d;
  const size_t kv_dim = static_cast<size_t>(c.n_kv_head) * c.head_dim;
  const size_t element = dtype == KvDtype::f32                             ? 4
                         : dtype == KvDtype::f16 || dtype == KvDtype::bf16 ? 2
                                                                           : 1;
  d.offset = offset;
  d.q.resize(offset + c.n_head * c.head_dim);
  for (float& f : d.q) f = normal(rng);
  for (int g = 0; g < c.n_kv_head; ++g) {  // fp8: a different scale per head
    d.k_scale.push_back(0.25f * (g + 1));
    d.v_scale.push_back(2.0f / (g + 1));
  }
  d.format = {dtype, kv_row_bytes(dtype, kv_dim), d.k_scale.data(), d.v_scale.data()};
  const size_t row_offset = offset * element;
  d.k.resize(row_offset + c.n_positions * d.format.row_bytes);
  d.v.resize(d.k.size());
  std::vector<float> row(kv_dim);
  for (auto [bytes, scales] : {std::pair{&d.k, &d.k_scale}, {&d.v, &d.v_scale}})
    for (int p = 0; p < c.n_positions; ++p) {
      const float magnitude = row_magnitude ? row_magnitude(p) : 1.0f;
      for (float& f : row) f = magnitude * normal(rng);
      kv_encode_row(bytes->data() + row_offset + p * d.format.row_bytes, row.data(), kv_dim, dtype,
                    scales->data(), c.head_dim);
    }
  d.offset = offset;
  return d;
}

// Splits positions [0, P) into runs at the given cut points.
std::vector<KvRun> split(const Case& c, const Data& d, const std::vector<int>& cuts) {
  const size_t row = d.format.row_bytes;
  const size_t base = d.k.size() - c.n_positions * row;  // the rows' byte offset
  std::vector<KvRun> runs;
  int start = 0;
  std::vector<int> ends = cuts;
  ends.push_back(c.n_positions);
  for (int end : ends) {
    if (end <= start || end > c.n_positions) continue;
    runs.push_back({d.k.data() + base + start * row, d.v.data() + base + start * row, end - start});
    start = end;
  }
  return runs;
}

// "f16 H 4 G 2 D 64 P 9": which case a failure is in.
std::string case_label(KvDtype dtype, const Case& c) {
  return std::string(kv_dtype_name(dtype)) + " H " + std::to_string(c.n_head) + " G " +
         std::to_string(c.n_kv_head) + " D " + std::to_string(c.head_dim) + " P " +
         std::to_string(c.n_positions);
}

const KvDtype kStoredTypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0,
                                KvDtype::fp8};

TEST(AttentionTest, MatchesTheReferenceAndIgnoresHowPositionsAreSplit) {
  std::mt19937 rng(13);
  std::vector<Case> cases;
  for (int D = 1; D <= 40; ++D) cases.push_back({2, 1, D, 1 + D % 7});
  for (int D : {20, 33, 48}) cases.push_back({4, 4, D, 9});  // q8_0 blocks straddle heads
  for (int P : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 100})
    for (auto [H, G] : {std::pair{1, 1}, {4, 2}, {3, 3}, {4, 1}}) cases.push_back({H, G, 64, P});
  cases.push_back({12, 12, 64, 300});
  cases.push_back({4, 2, 80, 50});
  cases.push_back({2, 2, 128, 37});
  for_each_target([&](const SimdTarget&) {
    for (KvDtype dtype : kStoredTypes)
      for (const Case& c : cases) {
        SCOPED_TRACE(case_label(dtype, c));
        const int offset = (c.head_dim + c.n_positions) % 4;
        const Data d = make_data(c, offset, dtype, rng);
        const float* q = d.q.data() + offset;
        const size_t n_out = static_cast<size_t>(c.n_head) * c.head_dim;
        std::vector<float> scratch(c.n_positions + 1, 0.0f), want(n_out);
        std::vector<float> one_run(n_out + 1, 9.0f);
        attention_forward(one_run.data(), q, split(c, d, {}), d.format, scratch.data(), c.n_head,
                          c.n_kv_head, c.head_dim);
        ASSERT_EQ(one_run.back(), 9.0f) << "wrote past the end of out";
        attention_reference(want.data(), q, split(c, d, {}), d.format, c.n_head, c.n_kv_head,
                            c.head_dim);
        // out is an average of values of about unit size (fp8's V scales reach 2)
        for (size_t i = 0; i < n_out; ++i)
          ASSERT_NEAR(one_run[i], want[i], 4e-5f) << "output " << i;
        // Runs of 1, of 3, and uneven splits: the same bits.
        std::vector<std::vector<int>> splits = {{}, {1}, {c.n_positions / 2}, {3, 4, 11}};
        std::vector<int> ones, threes;
        for (int p = 1; p < c.n_positions; ++p) ones.push_back(p);
        for (int p = 3; p < c.n_positions; p += 3) threes.push_back(p);
        splits.push_back(ones);
        splits.push_back(threes);
        for (const auto& cuts : splits) {
          std::vector<float> got(n_out);
          attention_forward(got.data(), q, split(c, d, cuts), d.format, scratch.data(), c.n_head,
                            c.n_kv_head, c.head_dim);
          ASSERT_EQ(std::memcmp(got.data(), one_run.data(), n_out * 4), 0)
              << "split into " << split(c, d, cuts).size() << " runs";
        }
      }
  });
}

// Heads computed in any grouping give the bits of the all-heads call (what lets the model
// spread one row's heads over threads), and a head range writes only its own heads.
TEST(AttentionTest, HeadRangesGiveTheSameBitsAndTouchOnlyTheirHeads) {
  const Case c{6, 2, 20, 37};
  std::mt19937 rng(8);
  const Data d = make_data(c, 1, KvDtype::f32, rng);
  const float* q = d.q.data() + 1;
  const size_t n_out = static_cast<size_t>(c.n_head) * c.head_dim;
  for_each_target([&](const SimdTarget&) {
    std::vector<float> scratch(c.n_positions), all(n_out);
    attention_forward(all.data(), q, split(c, d, {5}), d.format, scratch.data(), c.n_head,
                      c.n_kv_head, c.head_dim);
    for (int group = 1; group <= c.n_head; ++group) {
      std::vector<float> got(n_out, 0.0f);
      for (int h0 = 0; h0 < c.n_head; h0 += group)  // prefetched ahead (decode) or not (prefill)
        attention_heads_forward(got.data(), q, split(c, d, {5}), d.format, scratch.data(), c.n_head,
                                c.n_kv_head, c.head_dim, h0, std::min(h0 + group, c.n_head),
                                /*fetch_ahead=*/group % 2 == 0);
      ASSERT_EQ(std::memcmp(got.data(), all.data(), n_out * 4), 0) << "groups of " << group;
    }
    std::vector<float> one(n_out, -3.0f);
    attention_heads_forward(one.data(), q, split(c, d, {}), d.format, scratch.data(), c.n_head,
                            c.n_kv_head, c.head_dim, 2, 3);
    for (size_t i = 0; i < n_out; ++i) {
      const bool in_head = i / c.head_dim == 2;
      if (in_head) {
        ASSERT_EQ(one[i], all[i]) << "element " << i;
      } else {
        ASSERT_EQ(one[i], -3.0f) << "element " << i << " outside head 2 was written";
      }
    }
  });
}

// A row split by positions into parts of whole chunks (attention_scores_part, _values_part,
// _combine_chunks: the decode path of rows fewer than the threads) gives the bits of the row
// computed alone, for every stored type it takes, part count, head grouping and split of each
// part's positions into runs, on every target; positions around the chunk boundaries.
TEST(AttentionTest, RowSplitIntoPartsOfWholeChunksGivesTheBitsOfTheRowAlone) {
  std::mt19937 rng(31);
  const int C = static_cast<int>(kAttentionChunk);
  const Case cases[] = {{12, 12, 64, 900}, {8, 2, 32, 65},    {4, 1, 16, 1},
                        {4, 4, 64, C},     {6, 3, 16, C + 1}, {2, 2, 128, 3 * C - 1}};
  for_each_target([&](const SimdTarget& target) {
    for (KvDtype dtype : kStoredTypes)
      for (const Case& c : cases) {
        SCOPED_TRACE(case_label(dtype, c));
        const Data d = make_data(c, 1, dtype, rng);
        if (!attention_split_supported(d.format, c.head_dim)) {
          EXPECT_TRUE(dtype == KvDtype::fp8) << target.name;
          continue;
        }
        const float* q = d.q.data() + 1;
        const int H = c.n_head, D = c.head_dim, P = c.n_positions;
        const size_t n_out = static_cast<size_t>(H) * D;
        std::vector<float> scratch(P), alone(n_out);
        attention_forward(alone.data(), q, split(c, d, {}), d.format, scratch.data(), H,
                          c.n_kv_head, D);
        const int n_chunks = (P + C - 1) / C;
        for (int n_parts : {1, 2, 3, 7}) {
          std::vector<float> scores(static_cast<size_t>(H) * P), maxima(n_parts * H);
          std::vector<float> partial(n_chunks * n_out, -7.0f), sums(n_chunks * H, -7.0f);
          std::vector<float> row_max(H, -INFINITY);
          // Each part's runs, cut once more inside (a paged cache's blocks).
          auto part_runs = [&](int c0, int c1) {
            const int begin = c0 * C, end = std::min(c1 * C, P);
            std::vector<KvRun> all = split(c, d, {begin, begin + (end - begin) / 2, end});
            std::vector<KvRun> runs;
            int at = 0;
            for (const KvRun& run : all) {
              if (at >= begin && at < end) runs.push_back(run);
              at += run.n_positions;
            }
            return runs;
          };
          for (int k = 0; k < n_parts; ++k) {
            const int c0 = n_chunks * k / n_parts, c1 = n_chunks * (k + 1) / n_parts;
            std::fill(maxima.begin() + k * H, maxima.begin() + (k + 1) * H, -INFINITY);
            if (c0 == c1) continue;
            attention_scores_part(scores.data() + c0 * C, P, maxima.data() + k * H, q,
                                  part_runs(c0, c1), d.format, H, c.n_kv_head, D);
          }
          for (int k = 0; k < n_parts; ++k)
            for (int h = 0; h < H; ++h) row_max[h] = std::max(row_max[h], maxima[k * H + h]);
          for (int k = n_parts - 1; k >= 0; --k) {  // any order
            const int c0 = n_chunks * k / n_parts, c1 = n_chunks * (k + 1) / n_parts;
            if (c0 == c1) continue;
            attention_values_part(partial.data() + c0 * n_out, sums.data() + c0 * H,
                                  scores.data() + c0 * C, P, row_max.data(), part_runs(c0, c1),
                                  d.format, H, c.n_kv_head, D);
          }
          std::vector<float> got(n_out);
          for (int h = 0; h < H; h += 3)  // in ranges of heads
            attention_combine_chunks(got.data(), partial.data(), sums.data(), n_chunks, H, D, h,
                                     h + 3);
          ASSERT_EQ(std::memcmp(got.data(), alone.data(), n_out * sizeof(float)), 0)
              << target.name << ", " << n_parts << " parts";
        }
      }
  });
}

// q8_0 rows whose block scales are zero (a row of zeros) or subnormal halves (values near 2^-16)
// among ordinary ones: the split and heads-together paths, which widen a row's scales at once
// (Q8Reader::Scales, lane by lane where a half is not normal), give the bits of the head-by-head
// path, which widens each scale where it is used.
TEST(AttentionTest, Q8ZeroAndSubnormalScalesGiveTheBitsOfHeadByHead) {
  std::mt19937 rng(41);
  const Case c{12, 12, 64, 70};
  auto magnitude = [](int p) { return p % 5 == 1 ? 0.0f : p % 5 == 3 ? 0x1p-16f : 1.0f; };
  for_each_target([&](const SimdTarget& target) {
    const Data d = make_data(c, 1, KvDtype::q8_0, rng, magnitude);
    if (!attention_split_supported(d.format, c.head_dim)) return;
    const float* q = d.q.data() + 1;
    const int H = c.n_head, D = c.head_dim, P = c.n_positions;
    const size_t n_out = static_cast<size_t>(H) * D;
    std::vector<float> scratch((P + D) * H), alone(n_out), together(n_out);
    attention_forward(alone.data(), q, split(c, d, {}), d.format, scratch.data(), H, H, D);
    attention_heads_together_forward(together.data(), q, split(c, d, {}), d.format,
                                     scratch.data(), H, H, D, 0, H);
    EXPECT_EQ(std::memcmp(together.data(), alone.data(), n_out * sizeof(float)), 0)
        << target.name;
    const int n_chunks = (P + static_cast<int>(kAttentionChunk) - 1) / kAttentionChunk;
    std::vector<float> scores(static_cast<size_t>(H) * P), row_max(H);
    std::vector<float> partial(n_chunks * n_out), sums(n_chunks * H), got(n_out);
    attention_scores_part(scores.data(), P, row_max.data(), q, split(c, d, {}), d.format, H, H, D);
    attention_values_part(partial.data(), sums.data(), scores.data(), P, row_max.data(),
                          split(c, d, {}), d.format, H, H, D);
    attention_combine_chunks(got.data(), partial.data(), sums.data(), n_chunks, H, D, 0, H);
    EXPECT_EQ(std::memcmp(got.data(), alone.data(), n_out * sizeof(float)), 0) << target.name;
  });
}

// Heads computed together in one pass over the positions (attention_heads_together_forward, the
// batched-decode path) give the bits of the head-by-head call for every stored type (those it
// does not take fall back to head by head), head width, grouping of query heads, head range and
// split of the positions into runs, on every target; a range writes only its own heads.
TEST(AttentionTest, HeadsTogetherGiveTheBitsOfHeadByHead) {
  std::mt19937 rng(21);
  const Case cases[] = {{6, 2, 16, 37},    {4, 4, 64, 9},  {8, 1, 32, 5},
                        {12, 12, 64, 130}, {3, 3, 20, 14}, {4, 2, 8, 1}};
  for_each_target([&](const SimdTarget&) {
    for (KvDtype dtype : kStoredTypes)
      for (const Case& c : cases) {
        SCOPED_TRACE(case_label(dtype, c));
        const Data d = make_data(c, 1, dtype, rng);
        const float* q = d.q.data() + 1;
        const size_t n_out = static_cast<size_t>(c.n_head) * c.head_dim;
        std::vector<float> scratch((c.n_positions + c.head_dim) * c.n_head), all(n_out);
        attention_forward(all.data(), q, split(c, d, {}), d.format, scratch.data(), c.n_head,
                          c.n_kv_head, c.head_dim);
        const int group = c.n_head / c.n_kv_head;
        for (int width = group; width <= c.n_head; width += group)
          for (const std::vector<int>& cuts : {std::vector<int>{}, {3}, {1, 2, 7}}) {
            std::vector<float> got(n_out + 1, -3.0f);
            for (int h0 = 0; h0 < c.n_head; h0 += width) {
              const int h1 = std::min(h0 + width, c.n_head);
              attention_heads_together_forward(got.data(), q, split(c, d, cuts), d.format,
                                               scratch.data(), c.n_head, c.n_kv_head, c.head_dim,
                                               h0, h1);
              for (size_t i = h1 * c.head_dim; i < n_out + 1; ++i)
                ASSERT_EQ(got[i], -3.0f) << "heads " << h0 << ".." << h1 << " wrote element " << i;
            }
            ASSERT_EQ(std::memcmp(got.data(), all.data(), n_out * 4), 0)
                << "ranges of " << width << " heads, " << cuts.size() << " cuts";
          }
      }
  });
}

TEST(AttentionTest, OnePositionReturnsItsValue) {
  const Case c{2, 1, 5, 1};
  std::mt19937 rng(2);
  const Data d = make_data(c, 0, KvDtype::f32, rng);
  for_each_target([&](const SimdTarget&) {
    std::vector<float> out(10), scratch(1);
    attention_forward(out.data(), d.q.data(), split(c, d, {}), d.format, scratch.data(), 2, 1, 5);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 5; ++i)  // softmax of one = 1
        EXPECT_EQ(out[h * 5 + i], kv_decode_value(d.v.data(), 5, i, KvDtype::f32, 1.0f));
  });
}

}  // namespace
}  // namespace kvlm
