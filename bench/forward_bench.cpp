// Whole forward steps of the embedded GPT-2 124M-shaped model (random weights), to see where a
// prefill or a decode step spends its time next to the kernel microbenchmarks:
//
//   build-*/forward_bench --benchmark_filter=Prefill/512
//
// Arguments: tokens (prefill) or cached positions (decode), threads; decode also takes the batch
// and the weights' type (0 F32, 1 F16, 2 BF16). Under `perf record`, a decode benchmark's 32
// steps an iteration outweigh its untimed prefill, so the profile is the decode step's:
//
//   perf record -g build-*/forward_bench --benchmark_filter='Decode/128/2/1/1'   # F16
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "bench/model_bench.h"
#include "model/random_gpt2.h"
#include "ops/dtype.h"

namespace kvlm {
namespace {

constexpr DType kWeightTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// One model per weight type, made on first use; null if it could not be made.
Model* model(DType dtype = DType::kF32) {
  static std::map<DType, std::unique_ptr<Gpt2Model>> models;
  std::unique_ptr<Gpt2Model>& m = models[dtype];
  if (!m) {
    RandomGpt2Options options;
    options.dtype = dtype;
    auto made = make_random_gpt2(gpt2_small_config(), options);
    if (made) m = std::move(made.value());
  }
  return m.get();
}

void BM_Prefill(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Parallel par{static_cast<int>(state.range(1))};
  Model* m = model();
  if (!m) {
    state.SkipWithError("could not make the random model");
    return;
  }
  double flops = 0;
  for (auto _ : state) {
    auto run = time_prefill(*m, n, 1, par);
    if (!run) {
      state.SkipWithError(run.message().c_str());
      return;
    }
    flops = run->cost.flops;
    state.SetIterationTime(run->seconds);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(n * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill)
    ->Args({128, 1})
    ->Args({512, 1})
    ->Args({128, 2})
    ->Args({512, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0));
  const Parallel par{static_cast<int>(state.range(1))};
  const int batch = static_cast<int>(state.range(2));
  const DType dtype = kWeightTypes[state.range(3)];
  constexpr int kSteps = 32;
  Model* m = model(dtype);
  if (!m) {
    state.SkipWithError("could not make the random model");
    return;
  }
  for (auto _ : state) {
    auto run = time_decode(*m, batch, ctx, kSteps, 1, par);
    if (!run) {
      state.SkipWithError(run.message().c_str());
      return;
    }
    state.SetIterationTime(run->seconds / kSteps);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(batch * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)
    ->ArgsProduct({{128, 900}, {1, 2}, {1, 8}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvlm

BENCHMARK_MAIN();
