// The bench library: the roofline's arithmetic pinned on GPT-2 124M's shape, the step shapes of
// cached and uncached generation (the seed's counts), and a whole `kvlm bench` run on a tiny
// model with small settings: every required JSON key present, the figures sane, the cached and
// uncached runs identical. No timing is asserted beyond "positive".
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "bench/bench_suite.h"
#include "bench/machine_limits.h"
#include "bench/model_bench.h"
#include "bench/resident_memory.h"
#include "bench/roofline.h"
#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(RooflineTest, CostOfAGpt2SmallDecodeStep) {
  const ModelConfig c = gpt2_small_config();
  const ChunkShape decode{128, 1};  // one new token after 128 cached
  const StepCost cost = forward_step_cost(c, 1000, {&decode, 1});
  // 12 layers x (768 x 2304 + 768 x 768 + 2 x 768 x 3072) = 84,934,656 weights per row, 2 flops
  // each; the head 2 x 50257 x 768; attention 4 x 12 layers x 768 x 129 positions.
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 84934656 + 2.0 * 50257 * 768 + 4.0 * 12 * 768 * 129);
  // Weights once, plus K and V of 129 positions: 2 x 12 x 768 x 4 = 73,728 bytes each.
  EXPECT_DOUBLE_EQ(cost.bytes, 1000.0 + 73728.0 * 129);
}

TEST(RooflineTest, CacheBytesAreThoseOfTheStoredType) {
  const ModelConfig c = gpt2_small_config();
  const ChunkShape decode{128, 1};
  KvStorageOptions kv;
  kv.dtype = KvDtype::f16;  // 2 x 12 x 768 x 2 bytes a position
  EXPECT_DOUBLE_EQ(forward_step_cost(c, 1000, {&decode, 1}, kv).bytes, 1000.0 + 36864.0 * 129);
  kv.dtype = KvDtype::q8_0;  // 768 int8 and 24 fp16 scales a row
  EXPECT_DOUBLE_EQ(forward_step_cost(c, 1000, {&decode, 1}, kv).bytes,
                   1000.0 + 2.0 * 12 * (768 + 48) * 129);
  // The arithmetic does not depend on how the cache stores its rows.
  EXPECT_DOUBLE_EQ(forward_step_cost(c, 1000, {&decode, 1}, kv).flops,
                   forward_step_cost(c, 1000, {&decode, 1}).flops);
}

TEST(RooflineTest, SlidingWindowBoundsWhatARowReadsAndAttends) {
  const ModelConfig c = gpt2_small_config();
  KvStorageOptions kv;
  kv.window = {64, 4};  // 4 sinks + 60 recent positions
  // The row at position 200 attends the sinks and positions 141..200: 64 positions.
  const ChunkShape decode{200, 1};
  const StepCost cost = forward_step_cost(c, 1000, {&decode, 1}, kv);
  EXPECT_DOUBLE_EQ(cost.bytes, 1000.0 + 73728.0 * 64);
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 84934656 + 2.0 * 50257 * 768 + 4.0 * 12 * 768 * 64);
  // A prefill of 100 rows: rows 0..63 see 1..64 positions, rows 64..99 64 each; between them
  // they read every position once.
  const ChunkShape prefill{0, 100};
  const StepCost p = forward_step_cost(c, 0, {&prefill, 1}, kv);
  EXPECT_DOUBLE_EQ(p.bytes, 73728.0 * 100);
  EXPECT_DOUBLE_EQ(p.flops, 100 * 2.0 * 84934656 + 2.0 * 50257 * 768 +
                                4.0 * 12 * 768 * (64.0 * 65 / 2 + 36 * 64));
}

TEST(RooflineTest, PrefillCountsEveryRowButTheHeadOnce) {
  const ModelConfig c = gpt2_small_config();
  const ChunkShape prefill{0, 4};
  const StepCost cost = forward_step_cost(c, 0, {&prefill, 1});
  // Rows at positions 0..3 see 1 + 2 + 3 + 4 = 10 positions.
  EXPECT_DOUBLE_EQ(cost.flops, 4 * 2.0 * 84934656 + 2.0 * 50257 * 768 + 4.0 * 12 * 768 * 10);
  EXPECT_DOUBLE_EQ(cost.bytes, 73728.0 * 4);
}

TEST(RooflineTest, TimeIsTheLargerOfTheTwoBounds) {
  const MachineRates rates{10e9, 100e9};
  EXPECT_DOUBLE_EQ(roofline_seconds({1e9, 20e9}, rates), 2.0);  // bandwidth-bound
  EXPECT_DOUBLE_EQ(roofline_seconds({50e9, 1e9}, rates), 0.5);  // compute-bound
}

// 16-bit weights: batch 1 reads 2 bytes per 2 FLOP, batch 8 the same bytes for 16 FLOP. With
// 10 GB/s and 40 GFLOP/s batch 8 is compute-bound and can give only 40 / 10 = 4x batch 1.
TEST(RooflineTest, BatchSpeedupIsBoundedByPeakOverBandwidth) {
  const MachineRates rates{10e9, 40e9};
  const double one = roofline_tokens_per_second({2e9, 2e9}, 1, rates);     // 0.2 s: 5 tokens/s
  const double eight = roofline_tokens_per_second({16e9, 2e9}, 8, rates);  // 0.4 s: 20 tokens/s
  EXPECT_DOUBLE_EQ(one, 5.0);
  EXPECT_DOUBLE_EQ(eight, 20.0);
  EXPECT_DOUBLE_EQ(eight / one, 4.0);
  // With 80 GFLOP/s the batch is bandwidth-bound again: the full 8x.
  EXPECT_DOUBLE_EQ(roofline_tokens_per_second({16e9, 2e9}, 8, {10e9, 80e9}) / one, 8.0);
}

TEST(RooflineTest, GenerationStepsMatchTheSeedsCounts) {
  const std::vector<int> lengths = {10, 2, 4};
  int64_t uncached_rows = 0, cached_rows = 0;
  const auto uncached = generation_steps(lengths, 20, false);
  const auto cached = generation_steps(lengths, 20, true);
  ASSERT_EQ(uncached.size(), 20u);
  ASSERT_EQ(cached.size(), 20u);
  for (const auto& step : uncached)
    for (const ChunkShape& c : step) {
      EXPECT_EQ(c.start_pos, 0);
      uncached_rows += c.n_tokens;
    }
  for (const auto& step : cached)
    for (const ChunkShape& c : step) cached_rows += c.n_tokens;
  // What `kvlm demo` reports as "token positions kvlm computed".
  EXPECT_EQ(uncached_rows, 890);
  EXPECT_EQ(cached_rows, 73);
  // The last cached step decodes the 20th token of the 2-token prompt after 20 positions.
  EXPECT_EQ(cached.back()[1].start_pos, 2 + 19 - 1);
  EXPECT_EQ(cached.back()[1].n_tokens, 1);
}

TEST(MachineLimitsTest, MeasuresPositiveRatesAndRejectsATinyArray) {
  auto gbs = measure_read_bandwidth(size_t{8} << 20, 1, Parallel{2});
  ASSERT_TRUE(gbs) << gbs.message();
  EXPECT_GT(gbs.value(), 0.0);
  EXPECT_GT(measure_fma_throughput(1, 0.005, Parallel{2}), 0.0);
  auto tiny = measure_read_bandwidth(16, 1, Parallel{2});
  ASSERT_FALSE(tiny);
  EXPECT_NE(tiny.message().find("too small"), std::string::npos) << tiny.message();
}

TEST(ResidentMemoryTest, PeakSeesATouchedBufferAndResetForgetsIt) {
  // 64 MB mapped, touched and unmapped by hand (malloc might keep it): the peak must count it
  // while the current size no longer does, and a reset must bring the peak back below it.
  // Margins are half the buffer, since the kernel updates these counters in batches.
  constexpr size_t kBytes = size_t{64} << 20;
  auto before = read_resident_memory();
  ASSERT_TRUE(before) << before.message();
  EXPECT_GT(before->current_bytes, 0u);
  EXPECT_GE(before->peak_bytes, before->current_bytes);
  void* buffer = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(buffer, MAP_FAILED);
  std::memset(buffer, 1, kBytes);
  auto touched = read_resident_memory();
  ASSERT_TRUE(touched) << touched.message();
  EXPECT_GE(touched->current_bytes, before->current_bytes + kBytes / 2);
  ASSERT_EQ(munmap(buffer, kBytes), 0);
  auto freed = read_resident_memory();
  ASSERT_TRUE(freed) << freed.message();
  EXPECT_GE(freed->peak_bytes, freed->current_bytes + kBytes / 2);
  ASSERT_TRUE(reset_peak_resident_memory().is_ok());
  auto after = read_resident_memory();
  ASSERT_TRUE(after) << after.message();
  EXPECT_LT(after->peak_bytes, freed->peak_bytes - kBytes / 2);
}

TEST(ModelBenchTest, RunsBeyondTheContextFailNamingIt) {
  auto model = make_random_gpt2(test::tiny_gpt2_config(), RandomGpt2Options{});
  ASSERT_TRUE(model) << model.message();
  auto prefill = time_prefill(*model.value(), 65, 1, Parallel{1});
  ASSERT_FALSE(prefill);
  EXPECT_NE(prefill.message().find("context length 64"), std::string::npos) << prefill.message();
  auto decode = time_decode(*model.value(), 1, 60, 4, 1, Parallel{1});
  ASSERT_FALSE(decode);
  EXPECT_NE(decode.message().find("context length 64"), std::string::npos) << decode.message();
}

TEST(BenchSuiteTest, TinyRunReportsEveryKeyAndIdenticalCachedResults) {
  auto model = make_random_gpt2(test::tiny_gpt2_config(), RandomGpt2Options{});
  ASSERT_TRUE(model) << model.message();
  BenchOptions o;
  o.bandwidth_bytes = size_t{4} << 20;
  o.limit_repeats = 1;
  o.bandwidth_repeats = 1;
  o.fma_seconds = 0.005;
  o.prefill_repeats = 1;
  o.decode_steps = 2;
  o.decode_repeats = 1;
  o.probe_bytes = size_t{4} << 20;
  o.probe_seconds = 0.001;
  o.short_prompt = 8;
  o.long_prompt = 16;
  o.short_context = 8;
  o.long_context = 100;  // beyond the tiny context: shortened to fit
  o.batch = 3;
  int progress_lines = 0;
  o.progress = [&](const std::string&) { ++progress_lines; };
  auto report = run_bench(*model.value(), o, Parallel{2});
  ASSERT_TRUE(report) << report.message();
  const BenchReport& r = report.value();
  EXPECT_GT(progress_lines, 5);
  EXPECT_EQ(r.long_context, 64 - 3);  // n_ctx - (1 warm-up + 2 timed steps)
  EXPECT_TRUE(r.seed.identical);
  EXPECT_TRUE(r.run_64.identical);
  EXPECT_NEAR(r.seed.position_ratio, 390.0 / 29.0, 1e-12);   // the seed's 13.4x
  EXPECT_EQ(r.run_64.prompt_lengths, std::vector<int>{32});  // min(64, (n_ctx + 1) / 2)
  EXPECT_NEAR(r.run_64.position_ratio, (32 * 32 + 31 * 32 / 2.0) / 63.0, 1e-12);
  EXPECT_GT(r.kv_bytes_peak, 0u);
  EXPECT_GE(r.memory.peak_bytes, r.memory.current_bytes);

  const auto json = nlohmann::json::parse(bench_report_json(r));
  for (const char* key :
       {"bandwidth_gbs", "fma_gflops", "prefill_tps_128", "prefill_tps_512", "decode_tps_b1_ctx128",
        "decode_tps_b1_ctx900", "decode_tps_b8", "decode_roofline_frac", "prefill_fma_frac",
        "seed_speedup", "seed_work_ratio"}) {
    ASSERT_TRUE(json.contains(key)) << key;
    EXPECT_GT(json[key].get<double>(), 0.0) << key;
  }
  EXPECT_EQ(json["weights"], "F32");
  EXPECT_EQ(json["decode_batch"], 3);
  // Each decode fraction is against the bandwidth read beside its own window.
  for (const TimedRun* run : {&r.decode_short, &r.decode_long, &r.decode_batch})
    EXPECT_GT(run->bandwidth, 0.0);
  EXPECT_NEAR(r.decode_roofline_frac,
              r.decode_short.cost.bytes / r.decode_short.seconds / r.decode_short.bandwidth, 1e-12);
  EXPECT_GT(json["decode_bandwidth_gbs_ctx900"].get<double>(), 0.0);
  // The batch's speedup bound: its roofline tokens/s over batch 1's, each window with its own
  // bandwidth; never more than the batch size, and in the JSON beside the measured ratio.
  auto roofline_tps = [&](const TimedRun& run) {
    return run.tokens /
           std::max(run.cost.bytes / run.bandwidth, run.cost.flops / (r.fma_gflops * 1e9));
  };
  EXPECT_NEAR(r.decode_batch_speedup_bound,
              roofline_tps(r.decode_batch) / roofline_tps(r.decode_short),
              1e-9 * r.decode_batch_speedup_bound);
  EXPECT_GT(r.decode_batch_speedup_bound, 0.0);
  EXPECT_DOUBLE_EQ(json["decode_b8_over_b1_roofline"].get<double>(), r.decode_batch_speedup_bound);
  EXPECT_NEAR(r.decode_batch_fma_frac,
              r.decode_batch.cost.flops / r.decode_batch.seconds / (r.fma_gflops * 1e9), 1e-9);
  const std::string text = bench_report_text(r);
  EXPECT_NE(text.find("the rooflines\n  allow"), std::string::npos) << text;
  EXPECT_NE(text.find("Why not 13.4x"), std::string::npos) << text;
  EXPECT_NE(text.find("of bandwidth"), std::string::npos) << text;
}

TEST(BenchSuiteTest, DecodeOnlySkipsPrefillAndExperiments) {
  auto model = make_random_gpt2(test::tiny_gpt2_config(), RandomGpt2Options{});
  ASSERT_TRUE(model) << model.message();
  BenchOptions o;
  o.bandwidth_bytes = o.probe_bytes = size_t{4} << 20;
  o.limit_repeats = o.bandwidth_repeats = 1;
  o.probe_seconds = 0.001;
  o.fma_seconds = 0.005;
  o.decode_steps = 2;
  o.decode_repeats = 2;
  o.short_context = 8;
  o.long_context = 20;
  o.batch = 2;
  o.decode_only = true;
  auto report = run_bench(*model.value(), o, Parallel{1});
  ASSERT_TRUE(report) << report.message();
  EXPECT_EQ(report->prefill_long.seconds, 0.0);
  EXPECT_EQ(report->seed.cached_seconds, 0.0);
  EXPECT_GT(report->decode_long.tokens_per_second(), 0.0);
  EXPECT_GT(report->decode_batch_roofline_frac, 0.0);
  const std::string text = bench_report_text(report.value());
  EXPECT_EQ(text.find("prefill"), std::string::npos) << text;
  EXPECT_NE(text.find("decode, batch 2"), std::string::npos) << text;
}

TEST(ReadBandwidthProbeTest, MeasuresRepeatedlyOnOneArray) {
  auto probe = ReadBandwidthProbe::create(size_t{8} << 20, Parallel{2});
  ASSERT_TRUE(probe) << probe.message();
  EXPECT_LE(probe->bytes(), size_t{8} << 20);
  EXPECT_GT(probe->bytes(), size_t{7} << 20);
  EXPECT_GT(probe->measure(1), 0.0);
  EXPECT_GT(probe->measure(2), 0.0);
  EXPECT_GT(probe->measure_sustained(0.0), 0.0);  // at least one pass, whatever the time
  EXPECT_GT(probe->measure_sustained(0.01), 0.0);
  EXPECT_FALSE(ReadBandwidthProbe::create(16, Parallel{2}));
}

}  // namespace
}  // namespace kvlm
