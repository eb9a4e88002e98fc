// Rows of one sequence attended together (ops/attention_rows.h) on every SIMD target: each row
// gets the bits attention_heads_forward gives it alone over its own prefix of the positions,
// whatever the other rows in its tile attend (ragged prefixes, chunk boundaries crossed by some
// rows only), however the positions are split into runs, and heads outside the range untouched.
#include "ops/attention_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/for_each_target.h"
#include "ops/kv_format.h"

namespace kvlm {
namespace {

struct Case {
  int n_head, n_kv_head, head_dim;
  std::vector<int> n_positions;  // per row
};

struct Rows {
  std::vector<float> q;  // rows of q_stride floats, head 0 one float in (misaligned)
  size_t q_stride = 0;
  std::vector<std::byte> k, v;
  KvRowFormat format;
  int n_positions = 0;  // stored
};

Rows make_rows(const Case& c, KvDtype dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Rows d;
  const size_t kv_dim = static_cast<size_t>(c.n_kv_head) * c.head_dim;
  d.n_positions = *std::max_element(c.n_positions.begin(), c.n_positions.end());
  d.q_stride = static_cast<size_t>(c.n_head) * c.head_dim + 3;
  d.q.resize(1 + c.n_positions.size() * d.q_stride);
  for (float& f : d.q) f = normal(rng);
  d.format = {dtype, kv_row_bytes(dtype, kv_dim), nullptr, nullptr};
  d.k.resize(d.n_positions * d.format.row_bytes);
  d.v.resize(d.k.size());
  std::vector<float> row(kv_dim);
  for (auto* bytes : {&d.k, &d.v})
    for (int p = 0; p < d.n_positions; ++p) {
      for (float& f : row) f = normal(rng);
      kv_encode_row(bytes->data() + p * d.format.row_bytes, row.data(), kv_dim, dtype, nullptr,
                    c.head_dim);
    }
  return d;
}

// The first n positions, in runs cut at `cuts`.
std::vector<KvRun> runs_of(const Rows& d, int n, const std::vector<int>& cuts) {
  const size_t row = d.format.row_bytes;
  std::vector<KvRun> runs;
  int start = 0;
  std::vector<int> ends = cuts;
  ends.push_back(n);
  for (int end : ends) {
    end = std::min(end, n);
    if (end <= start) continue;
    runs.push_back({d.k.data() + start * row, d.v.data() + start * row, end - start});
    start = end;
  }
  return runs;
}

std::string label(KvDtype dtype, const Case& c) {
  std::ostringstream s;
  s << kv_dtype_name(dtype) << " H " << c.n_head << " G " << c.n_kv_head << " D " << c.head_dim
    << " rows";
  for (int n : c.n_positions) s << " " << n;
  return s.str();
}

TEST(AttentionRowsTest, EachRowGetsTheBitsOfItsOwnAttention) {
  std::mt19937 rng(31);
  const std::vector<Case> cases = {
      {12, 12, 64, {97, 98, 99, 100}},  // a prefill chunk's consecutive rows
      {4, 2, 64, {31, 32, 33, 34}},     // rows ending either side of a chunk boundary
      {4, 1, 128, {64, 1, 40, 65}},     // ragged, unordered, one row of a single position
      {2, 2, 16, {5, 9, 200}},          // three rows
      {6, 3, 32, {70, 71}},             // two rows
      {2, 1, 64, {33}},                 // one row
      {3, 3, 8, {1, 2, 3, 4}},
  };
  const KvDtype types[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16};
  int checked = 0;
  for_each_target([&](const SimdTarget& target) {
    for (KvDtype dtype : types)
      for (const Case& c : cases) {
        SCOPED_TRACE(label(dtype, c) + " on " + target.name);
        const Rows d = make_rows(c, dtype, rng);
        if (!attention_rows_supported(d.format, c.head_dim)) continue;
        ++checked;
        const int n_rows = static_cast<int>(c.n_positions.size());
        const size_t n_out = static_cast<size_t>(c.n_head) * c.head_dim;
        const size_t out_stride = n_out + 5;
        std::vector<float> want(n_rows * n_out);
        std::vector<float> scratch((d.n_positions + c.head_dim) * c.n_head);
        for (int r = 0; r < n_rows; ++r)
          attention_heads_forward(want.data() + r * n_out, d.q.data() + 1 + r * d.q_stride,
                                  runs_of(d, c.n_positions[r], {}), d.format, scratch.data(),
                                  c.n_head, c.n_kv_head, c.head_dim, 0, c.n_head, false);
        const int group = c.n_head / c.n_kv_head;
        for (const std::vector<int>& cuts : {std::vector<int>{}, {1}, {3, 32, 33, 70}})
          for (int width : {group, c.n_head}) {
            std::vector<float> got(n_rows * out_stride, -3.0f);
            for (int h0 = 0; h0 < c.n_head; h0 += width) {
              const int h1 = std::min(h0 + width, c.n_head);
              attention_rows_forward(got.data(), out_stride, d.q.data() + 1, d.q_stride,
                                     c.n_positions.data(), n_rows, runs_of(d, d.n_positions, cuts),
                                     d.format, c.n_head, c.n_kv_head, c.head_dim, h0, h1);
              for (int r = 0; r < n_rows; ++r)
                for (size_t i = h1 * c.head_dim; i < out_stride; ++i)
                  ASSERT_EQ(got[r * out_stride + i], -3.0f)
                      << "row " << r << ": heads " << h0 << ".." << h1 << " wrote element " << i;
            }
            for (int r = 0; r < n_rows; ++r)
              ASSERT_EQ(std::memcmp(got.data() + r * out_stride, want.data() + r * n_out,
                                    n_out * sizeof(float)),
                        0)
                  << "row " << r << " (" << c.n_positions[r] << " positions), " << cuts.size()
                  << " cuts, heads " << width << " at a time";
          }
      }
  });
  EXPECT_GT(checked, 0) << "no target took any case";
}

TEST(AttentionRowsTest, TakesOnlyTypesWhoseLoadsAreTheirValues) {
  const KvRowFormat q8{KvDtype::q8_0, kv_row_bytes(KvDtype::q8_0, 64), nullptr, nullptr};
  const KvRowFormat f32{KvDtype::f32, kv_row_bytes(KvDtype::f32, 64), nullptr, nullptr};
  EXPECT_FALSE(attention_rows_supported(q8, 64));
  EXPECT_TRUE(attention_rows_supported(f32, 64));
  EXPECT_FALSE(attention_rows_supported(f32, 63));  // not whole vectors on the running target
}

}  // namespace
}  // namespace kvlm
