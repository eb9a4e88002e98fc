// Whole forward steps of the embedded GPT-2 124M-shaped model (random weights), to see where a
// prefill or a decode step spends its time next to the kernel microbenchmarks:
//
//   build-*/forward_bench --benchmark_filter=Prefill/512
//
// Arguments: tokens (prefill) or cached positions (decode), threads.
#include <benchmark/benchmark.h>

#include <memory>

#include "bench/model_bench.h"
#include "model/random_gpt2.h"

namespace kvlm {
namespace {

Model& model() {
  static std::unique_ptr<Gpt2Model> m = [] {
    auto made = make_random_gpt2(gpt2_small_config(), RandomGpt2Options{});
    return made ? std::move(made.value()) : nullptr;
  }();
  return *m;
}

void BM_Prefill(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Parallel par{static_cast<int>(state.range(1))};
  double flops = 0;
  for (auto _ : state) {
    auto run = time_prefill(model(), n, 1, par);
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
  for (auto _ : state) {
    auto run = time_decode(model(), batch, ctx, 8, 1, par);
    if (!run) {
      state.SkipWithError(run.message().c_str());
      return;
    }
    state.SetIterationTime(run->seconds / 8);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(batch * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)
    ->Args({128, 1, 1})
    ->Args({900, 1, 1})
    ->Args({128, 1, 8})
    ->Args({128, 2, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvlm

BENCHMARK_MAIN();
