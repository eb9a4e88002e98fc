// Attention sinks + sliding window (KvWindow, docs/sliding_window.md): the window's arithmetic,
// the paged cache evicting whole blocks without a model, and on small random Llama models:
// - a 1-layer model's windowed logits are bitwise those of recomputing the kept tokens from
//   scratch at their in-window positions (its K/V depend on the token alone, so that is exactly
//   what the window promises; deeper models differ, their kept K/V carry older context);
// - a window that never fills changes no bit;
// - through the engine, past the model's context: cached == uncached (every position recomputed
//   in one pass through the same windowed attention), alone == batched, any block size, thread
//   count, prefill chunking, and the cache's allocated bytes stay at the window's size;
// - what is refused: GPT-2, W <= S, W smaller than a block, W beyond the context.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "eval/perplexity.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/paged_kv_cache.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/random_gpt2.h"
#include "support/engine_runs.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(KvWindowTest, ViewOfARow) {
  const KvWindow w{8, 2};
  // Until the window fills, a row sees everything at its own position.
  EXPECT_EQ(w.view_size(0), 1);
  EXPECT_EQ(w.recent_begin(0), 1);
  EXPECT_EQ(w.view_size(7), 8);
  EXPECT_EQ(w.query_pos(7), 7);
  EXPECT_EQ(w.recent_begin(7), 2);
  // Then: sinks 0, 1 and the last 6 positions, the query at in-window position 7.
  EXPECT_EQ(w.view_size(8), 8);
  EXPECT_EQ(w.recent_begin(8), 3);
  EXPECT_EQ(w.query_pos(100), 7);
  EXPECT_EQ(w.recent_begin(100), 95);
  EXPECT_FALSE(w.evicted(1, 100));  // a sink
  EXPECT_TRUE(w.evicted(2, 100));
  EXPECT_TRUE(w.evicted(94, 100));
  EXPECT_FALSE(w.evicted(95, 100));
  EXPECT_FALSE(KvWindow{}.evicted(5, 100));
}

TEST(KvWindowTest, BadWindowsAreRefusedNamingTheFlags) {
  KvStorageOptions o;
  o.window = {4, 4};
  Status s = validate_kv_storage(o, 1, 4);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("--kv-window 4 must be larger than --sink-tokens 4"),
            std::string::npos)
      << s.message();
  o.window = {-1, 0};
  EXPECT_FALSE(validate_kv_storage(o, 1, 4).is_ok());
  o.window = {8, -1};
  EXPECT_FALSE(validate_kv_storage(o, 1, 4).is_ok());
  o.window = {8, 0};
  EXPECT_TRUE(validate_kv_storage(o, 1, 4).is_ok());
}

// Paged cache, no model: a sequence growing one position at a time keeps its sinks' block and
// the blocks its window still reads, never more, and those hold the rows written.
TEST(PagedWindowTest, EvictsWholeBlocksNoRowReadsAgain) {
  constexpr int kDim = 2, B = 4;
  PagedKvCacheOptions options;
  options.block_size = B;
  options.token_budget = 64 * B;
  options.storage.window = {10, 2};
  auto made = PagedKvCache::create(1, kDim, options);
  ASSERT_TRUE(made.is_ok()) << made.message();
  PagedKvCache& cache = *made.value();
  for (int pos = 0; pos < 200; ++pos) {
    ASSERT_TRUE(cache.reserve(0, pos + 1).is_ok());
    const float k[kDim] = {static_cast<float>(pos), 0.5f}, v[kDim] = {-static_cast<float>(pos), 1};
    cache.write_row(0, 0, pos, k, v);
    // Held: the sinks' block, and the blocks of [recent_begin(pos), pos] (the row being written
    // attends to them), at most 1 + ceil(8 / 4) + 1.
    ASSERT_LE(cache.pool().n_used(), 4) << "at position " << pos;
    ASSERT_TRUE(cache.check().is_ok()) << cache.check().message();
    // The row at `pos` reads its sinks and recent positions back, each the row written there.
    const KvWindow w = cache.window();
    std::vector<KvRun> runs;
    cache.range_runs(0, 0, 0, std::min<int>(2, pos + 1), &runs);
    cache.range_runs(0, 0, static_cast<int>(w.recent_begin(pos)), pos + 1, &runs);
    std::vector<float> seen;
    for (const KvRun& r : runs)
      for (int i = 0; i < r.n_positions; ++i)
        seen.push_back(reinterpret_cast<const float*>(r.k)[i * kDim]);
    ASSERT_EQ(static_cast<int>(seen.size()), w.view_size(pos));
    for (int j = 0; j < static_cast<int>(seen.size()); ++j) {
      const int want = j < 2 && pos >= 2 ? j : static_cast<int>(w.recent_begin(pos)) + j - 2;
      ASSERT_EQ(seen[j], pos + 1 <= 10 ? j : want) << "position " << pos << " slot " << j;
    }
    cache.evict_outside_window(0);
  }
  const auto& table = cache.block_table(0);
  EXPECT_NE(table[0], PagedKvCache::kEvicted);  // the sinks' block stays
  EXPECT_EQ(table[10], PagedKvCache::kEvicted);
  cache.free_sequence(0);
  EXPECT_EQ(cache.pool().n_used(), 0);
  EXPECT_TRUE(cache.check().is_ok());
}

// Contiguous cache, no model: with a window and steps of at most 3 positions, a sequence of 200
// positions lives in a ring of W - 1 + 3 = 12 rows; every row's view reads back the rows
// written at its positions, in steps of 1, 2 and 3; a larger step is refused, not overwritten.
TEST(ContiguousWindowTest, RingOfTheWindowsSizeHoldsEveryRowsView) {
  constexpr int kDim = 2;
  KvStorageOptions storage;
  storage.window = {10, 2};
  ContiguousKvCache cache(1, kDim, {200}, storage, 3);
  EXPECT_EQ(cache.slab_positions(0), 12);
  EXPECT_EQ(cache.allocated_bytes(), 2u * 12 * kDim * sizeof(float));
  const KvWindow w = cache.window();
  for (int begin = 0, step = 1; begin < 200; begin += step, step = step % 3 + 1) {
    const int end = std::min(200, begin + step);
    ASSERT_TRUE(cache.check_step(0, begin, end).is_ok())
        << cache.check_step(0, begin, end).message();
    for (int pos = begin; pos < end; ++pos) {
      const float k[kDim] = {static_cast<float>(pos), 0.5f},
                  v[kDim] = {-static_cast<float>(pos), 1};
      cache.write_row(0, 0, pos, k, v);
    }
    for (int pos = begin; pos < end; ++pos) {  // each row of the step, after all are written
      std::vector<KvRun> runs;
      const int recent = static_cast<int>(w.recent_begin(pos));
      cache.range_runs(0, 0, 0, std::min(w.sinks, recent), &runs);
      cache.range_runs(0, 0, recent, pos + 1, &runs);
      std::vector<int> seen;
      for (const KvRun& r : runs)
        for (int i = 0; i < r.n_positions; ++i) {
          const float* kv = reinterpret_cast<const float*>(r.k) + i * kDim;
          ASSERT_EQ(reinterpret_cast<const float*>(r.v)[i * kDim], -kv[0]);
          seen.push_back(static_cast<int>(kv[0]));
        }
      ASSERT_EQ(static_cast<int>(seen.size()), w.view_size(pos));
      for (int j = 0; j < static_cast<int>(seen.size()); ++j)
        ASSERT_EQ(seen[j],
                  j < std::min(w.sinks, recent) ? j : recent + j - std::min(w.sinks, recent))
            << "position " << pos << " slot " << j;
    }
  }
  const Status big = cache.check_step(0, 100, 104);
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.message().find("window ring holds 10 recent positions; a step writing positions "
                               "100..103 needs 11"),
            std::string::npos)
      << big.message();
  // Without a window, or without a step bound, the slab is the capacity.
  EXPECT_EQ(ContiguousKvCache(1, kDim, {200}, {}, 3).slab_positions(0), 200);
  EXPECT_EQ(ContiguousKvCache(1, kDim, {200}, storage).slab_positions(0), 200);
  EXPECT_EQ(ContiguousKvCache(1, kDim, {8}, storage, 3).slab_positions(0), 8);
}

std::unique_ptr<Model> write_llama(const test::TempDir& dir, int n_layer, int n_ctx) {
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_layer = n_layer;
  lc.model.n_ctx = n_ctx;
  EXPECT_TRUE(write_llama2c(dir.file("model.bin"), random_llama_weights(lc, 5)).is_ok());
  auto model = load_model(dir.file("model.bin"), {});
  EXPECT_TRUE(model.is_ok()) << model.message();
  return model ? std::move(model.value()) : nullptr;
}

std::vector<int32_t> some_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7 + 3) % n_vocab;
  return t;
}

// Logits after every position of `tokens` ([n][V]) in one forward pass, as perplexity does.
std::vector<std::vector<float>> every_row(Model& model, const std::vector<int32_t>& tokens,
                                          const KvStorageOptions& storage, int threads) {
  const int n = static_cast<int>(tokens.size());
  ContiguousKvCache cache(model.config().n_layer, model.config().kv_dim(), {n}, storage);
  std::vector<SequenceChunk> chunks;
  for (int p = 0; p < n; ++p)
    chunks.push_back({0, p, std::span<const int32_t>(tokens).subspan(p, 1)});
  const size_t V = model.config().n_vocab;
  std::vector<float> logits(n * V);
  Parallel par{threads};
  const Status s = model.forward(logits.data(), chunks, cache, par);
  EXPECT_TRUE(s.is_ok()) << s.message();
  std::vector<std::vector<float>> rows;
  for (int p = 0; p < n; ++p)
    rows.emplace_back(logits.begin() + p * V, logits.begin() + (p + 1) * V);
  return rows;
}

// The plain model (no window) on `tokens` from position 0 in one pass: the last row's logits.
std::vector<float> plain_last(Model& model, const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  ContiguousKvCache cache(model.config().n_layer, model.config().kv_dim(), {n});
  const SequenceChunk chunk{0, 0, tokens};
  std::vector<float> logits(model.config().n_vocab);
  const Status s = model.forward(logits.data(), {&chunk, 1}, cache, Parallel{1});
  EXPECT_TRUE(s.is_ok()) << s.message();
  return logits;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(WindowModelTest, OneLayerEqualsRecomputingTheKeptTokensAtTheirWindowPositions) {
  test::TempDir dir;
  auto model = write_llama(dir, 1, 32);
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = some_tokens(70, model->config().n_vocab);  // 2x context
  for (const KvWindow w : {KvWindow{12, 3}, KvWindow{12, 0}, KvWindow{32, 4}}) {
    KvStorageOptions storage;
    storage.window = w;
    const auto rows = every_row(*model, tokens, storage, 2);
    for (int t = 0; t < static_cast<int>(tokens.size()); ++t) {
      std::vector<int32_t> kept;
      const int recent = static_cast<int>(w.recent_begin(t));
      for (int p = 0; p < std::min(w.sinks, recent); ++p) kept.push_back(tokens[p]);
      for (int p = recent; p <= t; ++p) kept.push_back(tokens[p]);
      ASSERT_EQ(static_cast<int>(kept.size()), w.view_size(t));
      ASSERT_TRUE(same_bits(rows[t], plain_last(*model, kept)))
          << "window " << w.window << " sinks " << w.sinks << " position " << t;
    }
  }
}

TEST(WindowModelTest, AWindowThatNeverFillsChangesNothingAndThreadsChangeNothing) {
  test::TempDir dir;
  auto model = write_llama(dir, 2, 32);
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = some_tokens(30, model->config().n_vocab);
  const auto plain = every_row(*model, tokens, {}, 1);
  KvStorageOptions storage;
  storage.window = {30, 4};
  const auto windowed = every_row(*model, tokens, storage, 1);
  for (size_t t = 0; t < tokens.size(); ++t)
    ASSERT_TRUE(same_bits(windowed[t], plain[t])) << "position " << t;
  // Past the window, the rows differ from full attention (the test can see a window), and
  // do not depend on the thread count.
  std::vector<int32_t> longer = some_tokens(60, model->config().n_vocab);
  storage.window = {16, 4};
  const auto one = every_row(*model, longer, storage, 1);
  const auto three = every_row(*model, longer, storage, 3);
  const auto full =
      every_row(*model, std::vector<int32_t>(longer.begin(), longer.begin() + 30), {}, 1);
  EXPECT_FALSE(same_bits(one[20], full[20]));
  EXPECT_TRUE(same_bits(one[15], full[15]));
  for (size_t t = 0; t < longer.size(); ++t)
    ASSERT_TRUE(same_bits(one[t], three[t])) << "position " << t;
}

// The rows of every position in passes of `step` positions through a ring sized for them.
std::vector<std::vector<float>> every_row_in_steps(Model& model, const std::vector<int32_t>& tokens,
                                                   const KvStorageOptions& storage, int step,
                                                   size_t* allocated) {
  const int n = static_cast<int>(tokens.size());
  ContiguousKvCache cache(model.config().n_layer, model.config().kv_dim(), {n}, storage, step);
  *allocated = cache.allocated_bytes();
  const size_t V = model.config().n_vocab;
  std::vector<std::vector<float>> rows;
  for (int begin = 0; begin < n; begin += step) {
    std::vector<SequenceChunk> chunks;
    for (int p = begin; p < std::min(n, begin + step); ++p)
      chunks.push_back({0, p, std::span<const int32_t>(tokens).subspan(p, 1)});
    std::vector<float> logits(chunks.size() * V);
    const Status s = model.forward(logits.data(), chunks, cache, Parallel{2});
    EXPECT_TRUE(s.is_ok()) << s.message();
    for (size_t i = 0; i < chunks.size(); ++i)
      rows.emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
  }
  return rows;
}

// The contiguous cache's ring (2W - 1 positions for steps of W) gives every row the bits of a
// slab holding all 150 positions, f32 and q8_0; a pass writing more than the ring allows is
// refused by the forward pass, naming the numbers.
TEST(WindowModelTest, ContiguousRingBoundsMemoryAndChangesNoBit) {
  test::TempDir dir;
  auto model = write_llama(dir, 2, 32);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  const std::vector<int32_t> tokens = some_tokens(150, c.n_vocab);
  for (KvDtype dtype : {KvDtype::f32, KvDtype::q8_0}) {
    KvStorageOptions storage;
    storage.dtype = dtype;
    storage.window = {16, 4};
    const auto whole = every_row(*model, tokens, storage, 2);
    size_t allocated = 0;
    const auto ring = every_row_in_steps(*model, tokens, storage, 16, &allocated);
    EXPECT_EQ(allocated, 2u * c.n_layer * 31 * kv_row_bytes(dtype, c.kv_dim()));
    ASSERT_EQ(ring.size(), whole.size());
    for (size_t t = 0; t < tokens.size(); ++t)
      ASSERT_TRUE(same_bits(ring[t], whole[t])) << kv_dtype_name(dtype) << " position " << t;
  }
  KvStorageOptions storage;
  storage.window = {16, 4};
  ContiguousKvCache small(c.n_layer, c.kv_dim(), {150}, storage, 4);
  const SequenceChunk chunk{0, 0, std::span<const int32_t>(tokens).first(40)};
  std::vector<float> logits(c.n_vocab);
  const Status s = model->forward(logits.data(), {&chunk, 1}, small, Parallel{1});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("window ring holds 15 recent positions"), std::string::npos)
      << s.message();
}

// kvlm perplexity's stream through the window: the same log-likelihood as the rows of one pass
// over a slab holding everything, in a cache of 2W - 1 positions for a text of 150.
TEST(WindowModelTest, PerplexityStreamsThroughABoundedCache) {
  test::TempDir dir;
  auto model = write_llama(dir, 2, 32);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  const std::vector<int32_t> tokens = some_tokens(150, c.n_vocab);
  EvalConfig config{model.get(), {}};
  config.kv.window = {16, 4};
  auto r = perplexity(tokens, config, nullptr, PerplexityOptions{}, Parallel{2});
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->tokens, 149);
  EXPECT_EQ(r->kv_bytes_peak, 2u * c.n_layer * 31 * c.kv_dim() * sizeof(float));
  const auto rows = every_row(*model, tokens, config.kv, 1);
  double nll = 0;
  for (size_t t = 1; t < tokens.size(); ++t) {
    const std::vector<float>& row = rows[t - 1];
    const float max = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float x : row) sum += std::exp(double{x} - max);
    nll += max + std::log(sum) - row[tokens[t]];
  }
  EXPECT_NEAR(r->nll, nll / 149, 1e-12);
}

// The engine's llama (context 96) generating 150 tokens, beyond its context.
TEST(WindowEngineTest, PastTheContextCachedEqualsUncachedAloneEqualsBatchedMemoryBounded) {
  test::TempDir dir;
  auto model = test::engine_llama(dir);
  ASSERT_TRUE(model);
  const int V = model->n_vocab();
  std::vector<test::Spec> specs = {{test::greedy_request(some_tokens(10, V), 150), 0},
                                   {test::greedy_request(some_tokens(37, V), 120), 0},
                                   {test::greedy_request(some_tokens(5, V), 90), 3}};
  specs[2].request.sampling.temperature = 0.8f;  // a sampled one too
  specs[2].request.sampling.seed = 9;
  EngineOptions base;
  base.kv_window = 24;
  base.sink_tokens = 4;
  base.block_size = 4;
  base.threads = 1;
  base.max_running = 1;
  // Reference: each request alone, uncached (every step recomputes all positions in one pass).
  EngineOptions uncached = base;
  uncached.recompute_every_step = true;
  uncached.kv_tokens = 4096;  // recomputing holds every position at once
  std::vector<test::Trace> want;
  for (const test::Spec& s : specs) {
    auto r = test::run_schedule(model, {{s.request, 0}}, uncached);
    ASSERT_EQ(r.traces[0].tokens.size(), static_cast<size_t>(s.request.max_new_tokens));
    want.push_back(r.traces[0]);
  }
  struct Variant {
    int block_size, threads, budget;
    std::string kv_dtype;
  };
  for (const Variant& v :
       {Variant{4, 1, 512, "f32"}, Variant{8, 3, 7, "f32"}, Variant{16, 2, 3, "f32"}}) {
    EngineOptions o = base;
    o.block_size = v.block_size;
    o.threads = v.threads;
    o.max_batch_tokens = v.budget;
    o.max_running = 3;
    o.kv_dtype = v.kv_dtype;
    const auto got = test::run_schedule(model, specs, o);
    for (size_t i = 0; i < specs.size(); ++i)
      EXPECT_EQ(test::compare_traces(got.traces[i], want[i]), "")
          << "request " << i << ", block size " << v.block_size << ", threads " << v.threads
          << ", budget " << v.budget;
  }
  // Alone and cached, the first request's cache stays at the window's size: its sinks' block
  // and the blocks its last W - S positions span, while the whole run would take 40 blocks.
  auto alone = test::run_schedule(model, {specs[0]}, base);
  EXPECT_EQ(test::compare_traces(alone.traces[0], want[0]), "");
  const size_t block_bytes = 2 * 2 * 4 * model->model().config().kv_dim() * sizeof(float);
  EXPECT_LE(alone.stats.kv_bytes_peak, 7 * block_bytes);  // 1 + ceil((24 - 4) / 4) + 1
  EXPECT_GE(alone.stats.kv_bytes_peak, 6 * block_bytes);
}

TEST(WindowEngineTest, QuantizedCacheCachedEqualsUncached) {
  test::TempDir dir;
  auto model = test::engine_llama(dir);
  ASSERT_TRUE(model);
  for (const char* dtype : {"q8_0", "bf16", "q8_0_kc"}) {
    EngineOptions o;
    o.kv_window = 12;
    o.sink_tokens = 2;
    o.block_size = 4;
    o.kv_dtype = dtype;
    o.threads = 1;
    const std::vector<test::Spec> specs = {
        {test::greedy_request(some_tokens(9, model->n_vocab()), 40), 0}};
    const auto cached = test::run_schedule(model, specs, o);
    o.recompute_every_step = true;
    o.kv_tokens = 4096;
    const auto uncached = test::run_schedule(model, specs, o);
    EXPECT_EQ(test::compare_traces(cached.traces[0], uncached.traces[0]), "") << dtype;
  }
}

TEST(WindowEngineTest, RefusalsNameTheFlag) {
  test::TempDir gpt2_dir, llama_dir;
  auto gpt2 = test::engine_gpt2(gpt2_dir);
  auto llama = test::engine_llama(llama_dir);
  ASSERT_TRUE(gpt2 && llama);
  struct Case {
    std::shared_ptr<LoadedModel> model;
    int window, sinks, block_size;
    std::string message;
  };
  const Case cases[] = {
      {gpt2, 32, 4, 16, "--kv-window: this model's learned absolute position embeddings (GPT-2)"},
      {llama, 8, 8, 4, "--kv-window 8 must be larger than --sink-tokens 8"},
      {llama, 8, 2, 16, "--kv-window 8 is smaller than one cache block (--block-size 16)"},
      {llama, 128, 4, 16, "--kv-window 128 is beyond the model's context length 96"},
  };
  for (const Case& c : cases) {
    EngineOptions o;
    o.kv_window = c.window;
    o.sink_tokens = c.sinks;
    o.block_size = c.block_size;
    auto engine = Engine::create(c.model, o);
    ASSERT_FALSE(engine.is_ok()) << c.message;
    EXPECT_NE(engine.message().find(c.message), std::string::npos) << engine.message();
  }
}

// The command line: generate past the context with a window, cached == --no-cache, the cache's
// bytes bounded; bad flags exit 1 naming the flag.
TEST(WindowCliTest, GeneratePastTheContextAndBadFlags) {
  test::TempDir dir;
  LlamaConfig lc = tiny_llama_config();  // context 32
  ASSERT_TRUE(write_llama2c(dir.file("m.bin"), random_llama_weights(lc, 3)).is_ok());
  const std::string base =
      "generate --model " + dir.file("m.bin") + " --ids 1,2,3 --max-new 100 --ignore-eos";
  const std::string window = " --kv-window 16 --sink-tokens 4 --block-size 4 --json";
  const auto cached = test::run_kvlm(base + window);
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  const auto uncached = test::run_kvlm(base + window + " --no-cache");
  ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
  auto ids = [](const std::string& out) { return out.substr(0, out.find("\"stats\"")); };
  EXPECT_EQ(ids(cached.out), ids(uncached.out));
  EXPECT_NE(cached.out.find("\"finish_reason\":\"length\""), std::string::npos) << cached.out;
  // The sinks' block and the 4 blocks 12 recent positions span at most: 5 blocks of 4
  // positions, each 2 layers x (K + V) x 12 floats (the whole run would take 26).
  const size_t block_bytes = 4 * 2 * 2 * 12 * sizeof(float);
  const auto at = cached.out.find("\"kv_cache_bytes\":");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LE(std::stoull(cached.out.substr(at + 17)), 5 * block_bytes) << cached.out;
  // Without the window the same request is beyond the context.
  const auto plain = test::run_kvlm(base);
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("beyond the context length 32"), std::string::npos) << plain.err;

  test::TempDir gpt2_dir;
  ASSERT_TRUE(write_random_gpt2(gpt2_dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const struct {
    std::string args, message;
  } bad[] = {
      {base + " --kv-window 8 --sink-tokens 8",
       "--kv-window 8 must be larger than --sink-tokens 8"},
      {base + " --kv-window 8 --block-size 16", "smaller than one cache block (--block-size 16)"},
      {base + " --kv-window 64", "--kv-window 64 is beyond the model's context length 32"},
      {base + " --sink-tokens 4", "--sink-tokens 4 needs --kv-window"},
      {"generate --model " + gpt2_dir.path() + " --ids 1,2 --kv-window 8",
       "--kv-window: this model's learned absolute position embeddings (GPT-2)"},
      {"perplexity --model " + dir.file("m.bin") + " --file " + dir.file("m.bin") +
           " --kv-window 8 --ctx 16",
       "--kv-window scores the whole text as one stream"},
  };
  for (const auto& b : bad) {
    const auto r = test::run_kvlm(b.args);
    EXPECT_EQ(r.exit_code, 1) << b.args;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << b.args << "\n" << r.err;
  }
}

// The other commands that run the model take the window too, past the context of 32: demo
// (cached == uncached, the cache's peak at the window's size), logits (a prompt longer than the
// context, cached == --no-cache byte for byte), bench --engine (the engine's tokens == the static
// batch's, both windowed). Without the window the same runs are beyond the context; GPT-2 is
// refused by each, serve included.
TEST(WindowCliTest, DemoLogitsBenchAndServeTakeTheWindow) {
  test::TempDir dir;
  LlamaConfig lc = tiny_llama_config();  // context 32, 2 layers, kv_dim 12: 192 bytes a position
  ASSERT_TRUE(write_llama2c(dir.file("m.bin"), random_llama_weights(lc, 3)).is_ok());
  const std::string model = " --model " + dir.file("m.bin") + " --threads 2";
  const std::string window = " --kv-window 16 --sink-tokens 4";

  const auto demo = test::run_kvlm("demo" + model + " --max-new 60" + window);
  ASSERT_EQ(demo.exit_code, 0) << demo.err << demo.out;
  EXPECT_NE(demo.out.find("tokens identical (cached vs uncached): yes"), std::string::npos);
  EXPECT_NE(demo.out.find("max |logit difference| over all steps: 0\n"), std::string::npos);
  // Blocks of one position: three sequences hold at most their 16-position windows at once,
  // where the whole run (10 + 2 + 4 prompt tokens, 59 fed back each) would take 193.
  const auto at = demo.out.find("as allocated by the cache:");
  ASSERT_NE(at, std::string::npos) << demo.out;
  const size_t allocated = std::stoull(demo.out.substr(demo.out.find_first_of("0123456789", at)));
  EXPECT_LE(allocated, 3u * 16 * 192) << demo.out;
  EXPECT_GE(allocated, 3u * 12 * 192) << demo.out;

  std::string ids;
  for (int i = 0; i < 45; ++i) ids += std::to_string((i * 7 + 3) % 48) + ",";
  ids.pop_back();
  const auto cached = test::run_kvlm("logits" + model + " --json --ids " + ids + window);
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  const auto uncached =
      test::run_kvlm("logits" + model + " --json --no-cache --ids " + ids + window);
  ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
  EXPECT_EQ(cached.out, uncached.out);
  EXPECT_EQ(cached.out.rfind("{\"logits\":[[", 0), 0u) << cached.out;

  const auto bench = test::run_kvlm(
      "bench --engine --json --requests 4 --new-tokens 40 "
      "--min-prompt 4 --max-prompt 20 --max-seqs 2" +
      model + window);
  ASSERT_EQ(bench.exit_code, 0) << bench.err << bench.out;  // 2: the static batch differed

  for (const std::string& args :
       {"demo" + model + " --max-new 60", "logits" + model + " --json --ids " + ids}) {
    const auto r = test::run_kvlm(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find("beyond the context length 32"), std::string::npos) << args << r.err;
  }
  const auto not_engine = test::run_kvlm("bench" + model + window);
  EXPECT_EQ(not_engine.exit_code, 1);
  EXPECT_NE(not_engine.err.find("--kv-window applies to kvlm bench --engine"), std::string::npos)
      << not_engine.err;

  test::TempDir gpt2_dir;
  ASSERT_TRUE(write_random_gpt2(gpt2_dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const std::string gpt2 = " --model " + gpt2_dir.path() + " --kv-window 8";
  for (const std::string& args : {"demo" + gpt2, "logits --json --ids 1,2" + gpt2,
                                  "bench --engine --requests 1" + gpt2, "serve --port 0" + gpt2}) {
    const auto r = test::run_kvlm(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find("--kv-window: this model's learned absolute position embeddings (GPT-2)"),
              std::string::npos)
        << args << "\n"
        << r.err;
  }
}

}  // namespace
}  // namespace kvlm
