// attend_rows spreads (row, head) pairs over tasks and threads; whatever the grouping, each
// row's output must be the bits attention_forward gives for that row alone.
#include "model/attend_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "kv/contiguous_kv_cache.h"
#include "ops/attention.h"

namespace kvlm {
namespace {

struct Case {
  int n_head, n_kv_head, window;
};
// "heads4_kv2_window5": the case's name in listings.
void PrintTo(const Case& c, std::ostream* os) {
  *os << "heads" << c.n_head << "_kv" << c.n_kv_head;
  if (c.window > 0) *os << "_window" << c.window;
}

class AttendRowsTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttendRowsTest, EveryRowMatchesAttentionAloneAtEveryThreadCount) {
  const Case c = GetParam();
  const int D = 8, n_layer = 2, layer = 1;
  const int kv_dim = c.n_kv_head * D, q_dim = c.n_head * D;
  // Two sequences: 40 rows of a prefill (more than two 16-row blocks) and 3 decode-like rows.
  const std::vector<int> lengths = {40, 45};
  ContiguousKvCache cache(n_layer, kv_dim, lengths);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<AttentionRow> rows;
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(cache.check_reserved(s, lengths[s]).is_ok());
    for (int p = 0; p < lengths[s]; ++p) {
      std::vector<float> k(kv_dim), v(kv_dim);
      for (int i = 0; i < kv_dim; ++i) {
        k[i] = normal(rng);
        v[i] = normal(rng);
      }
      cache.write_row(s, layer, p, k.data(), v.data());
    }
  }
  for (int p = 0; p < 40; ++p) rows.push_back({0, p});
  for (int p = 42; p < 45; ++p) rows.push_back({1, p});
  std::vector<float> q(rows.size() * q_dim);
  for (float& x : q) x = normal(rng);

  // Expected: each row alone, all heads in one call, windowed by hand.
  std::vector<float> expected(rows.size() * q_dim), scratch(128);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<KvRun> runs;
    cache.runs(rows[r].seq, layer, rows[r].pos + 1, &runs);
    ASSERT_EQ(runs.size(), 1u);
    if (c.window > 0 && rows[r].pos + 1 > c.window) {
      const int skip = rows[r].pos + 1 - c.window;
      runs[0].k += static_cast<size_t>(skip) * kv_dim * sizeof(float);
      runs[0].v += static_cast<size_t>(skip) * kv_dim * sizeof(float);
      runs[0].n_positions -= skip;
    }
    attention_forward(expected.data() + r * q_dim, q.data() + r * q_dim, runs,
                      cache.row_format(layer), scratch.data(), c.n_head, c.n_kv_head, D);
  }
  const AttentionShape shape{c.n_head, c.n_kv_head, D, c.window};
  for (int threads : {1, 2, 3, 8}) {
    std::vector<float> out(rows.size() * q_dim, -1.0f), scratches(threads * 64);
    attend_rows(out.data(), q_dim, q.data(), q_dim, rows, layer, cache, shape, scratches.data(), 64,
                Parallel{threads});
    EXPECT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)), 0)
        << "threads " << threads;
    // Only the first decode rows: a batch of one row takes the per-head split.
    std::vector<float> one(q_dim, -1.0f);
    attend_rows(one.data(), q_dim, q.data() + 40 * q_dim, q_dim, {rows.data() + 40, 1}, layer,
                cache, shape, scratches.data(), 64, Parallel{threads});
    EXPECT_EQ(std::memcmp(one.data(), expected.data() + 40 * q_dim, q_dim * sizeof(float)), 0)
        << "threads " << threads;
  }
}

// A decode step: one row from each of several sequences (ragged lengths, one cut into runs by a
// paged-like split is not needed: the contiguous cache gives one run), every row's output the
// bits of attention_forward for that row alone, at every thread count and batch size.
TEST_P(AttendRowsTest, DecodeRowsOfManySequencesMatchAttentionAlone) {
  const Case c = GetParam();
  const int D = 16, n_layer = 2, layer = 0;
  const int kv_dim = c.n_kv_head * D, q_dim = c.n_head * D;
  const std::vector<int> lengths = {9, 30, 1, 17, 24, 5, 12, 40, 3, 100, 65, 33};
  const int n_seq = static_cast<int>(lengths.size());
  ContiguousKvCache cache(n_layer, kv_dim, lengths);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (int s = 0; s < n_seq; ++s) {
    ASSERT_TRUE(cache.check_reserved(s, lengths[s]).is_ok());
    for (int p = 0; p < lengths[s]; ++p) {
      std::vector<float> k(kv_dim), v(kv_dim);
      for (int i = 0; i < kv_dim; ++i) {
        k[i] = normal(rng);
        v[i] = normal(rng);
      }
      cache.write_row(s, layer, p, k.data(), v.data());
    }
  }
  std::vector<AttentionRow> rows;
  for (int s = n_seq - 1; s >= 0; --s) rows.push_back({s, lengths[s] - 1});  // any order
  std::vector<float> q(rows.size() * q_dim);
  for (float& x : q) x = normal(rng);
  std::vector<float> expected(rows.size() * q_dim), scratch(128);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<KvRun> runs;
    cache.runs(rows[r].seq, layer, rows[r].pos + 1, &runs);
    if (c.window > 0 && rows[r].pos + 1 > c.window) {
      const int skip = rows[r].pos + 1 - c.window;
      runs[0].k += static_cast<size_t>(skip) * kv_dim * sizeof(float);
      runs[0].v += static_cast<size_t>(skip) * kv_dim * sizeof(float);
      runs[0].n_positions -= skip;
    }
    attention_forward(expected.data() + r * q_dim, q.data() + r * q_dim, runs,
                      cache.row_format(layer), scratch.data(), c.n_head, c.n_kv_head, D);
  }
  const AttentionShape shape{c.n_head, c.n_kv_head, D, c.window};
  for (int threads : {1, 2, 3, 8})
    for (size_t batch : {size_t{1}, size_t{2}, size_t{5}, rows.size()}) {
      std::vector<float> out(batch * q_dim, -1.0f), scratches(threads * 128);
      attend_rows(out.data(), q_dim, q.data(), q_dim, {rows.data(), batch}, layer, cache, shape,
                  scratches.data(), 128, Parallel{threads});
      EXPECT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)), 0)
          << "threads " << threads << " batch " << batch;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttendRowsTest,
                         ::testing::Values(Case{4, 4, 0}, Case{8, 2, 0}, Case{6, 1, 0},
                                           Case{4, 2, 5}),
                         ::testing::PrintToStringParamName());

}  // namespace
}  // namespace kvlm
