// Microbenchmarks of the SIMD kernels on GPT-2 124M's shapes, next to the machine's limits
// measured the same way: each matmul reports weight bytes/s (the decode roofline) and FLOP/s
// (the prefill roofline), so its fraction of either limit is one division.
//
//   build-*/kernels_bench --benchmark_filter='Matmul/.*/1/'      # decode shapes
//   build-*/kernels_bench --benchmark_filter='Limits'            # bandwidth and fma peak
//   build-*/kernels_bench --benchmark_filter='MatmulInCache/.*/8/' # batch 8 without the bus
//
// Arguments of BM_Matmul and BM_MatmulInCache: shape (0 c_attn, 1 attn.c_proj, 2 c_fc,
// 3 mlp.c_proj, 4 lm_head, 5-8 shapes 0-3 stored [n_out, n_in]), rows, dtype (0 F32, 1 F16,
// 2 BF16, 3 Q8_0: stored [n_out, n_in] as quantized weights always are), threads, path (0 auto,
// 1 row stream or, for [n_out, n_in], the dot-product tiles, 2 tiled).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "bench/machine_limits.h"
#include "kv/contiguous_kv_cache.h"
#include "model/attend_rows.h"
#include "ops/attention.h"
#include "ops/dtype.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16amx.h"
#include "ops/matmul_bf16dot.h"
#include "ops/matmul_internal.h"
#include "ops/quant.h"
#include "ops/weight_strips.h"
#include "util/huge_pages.h"

namespace kvlm {
namespace {

struct Shape {
  const char* name;
  int n_in, n_out;
  WeightLayout layout;
};
const Shape kShapes[] = {{"c_attn", 768, 2304, WeightLayout::kInOut},
                         {"attn.c_proj", 768, 768, WeightLayout::kInOut},
                         {"c_fc", 768, 3072, WeightLayout::kInOut},
                         {"mlp.c_proj", 3072, 768, WeightLayout::kInOut},
                         {"lm_head", 768, 50257, WeightLayout::kOutIn},
                         // The four layer matrices stored [n_out, n_in] (as nn.Linear stores
                         // them): the layouts' kernels side by side on one shape.
                         {"c_attn [O,I]", 768, 2304, WeightLayout::kOutIn},
                         {"attn.c_proj [O,I]", 768, 768, WeightLayout::kOutIn},
                         {"c_fc [O,I]", 768, 3072, WeightLayout::kOutIn},
                         {"mlp.c_proj [O,I]", 3072, 768, WeightLayout::kOutIn}};
const DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0};

std::vector<uint8_t> random_weights(size_t n, DType type) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  if (dtype_is_quantized(type)) {
    std::vector<float> values(n);
    for (float& v : values) v = normal(rng);
    std::vector<uint8_t> bytes(dtype_bytes(type, n));
    quantize_row(bytes.data(), values.data(), type, n);  // rows are whole blocks: one long row
    return bytes;
  }
  std::vector<uint8_t> bytes(n * dtype_size(type));
  for (size_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    if (type == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = type == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

// from_memory: several copies of the weights, used in turn, so decode-sized runs read them from
// memory and not from the last-level cache; otherwise one copy, which stays in L2 or L3 (the
// shapes here are 1.2-4.7 MB in F16): the kernel's arithmetic alone, apart from the bus.
void run_matmul(benchmark::State& state, bool from_memory) {
  const Shape& s = kShapes[state.range(0)];
  const int rows = static_cast<int>(state.range(1));
  const DType type = kTypes[state.range(2)];
  const Parallel par{static_cast<int>(state.range(3))};
  const auto path = static_cast<MatmulPath>(state.range(4));
  const size_t n = static_cast<size_t>(s.n_in) * s.n_out;
  const size_t n_bytes = dtype_bytes(type, n);
  const WeightLayout layout = dtype_is_quantized(type) ? WeightLayout::kOutIn : s.layout;
  const int n_copies = from_memory ? std::max<size_t>(1, (96u << 20) / n_bytes + 1) : 1;
  // In huge pages, as the engine's weights are (util/huge_pages.h): in 4 KiB pages the row
  // stream's 32-row tiles touch a new page every row and the TLB, not the kernel, is measured.
  std::vector<HugePageBuffer> weights;
  for (int c = 0; c < n_copies; ++c) {
    const std::vector<uint8_t> bytes = random_weights(n, type);
    weights.emplace_back(bytes.size());
    std::memcpy(weights.back().data(), bytes.data(), bytes.size());
  }
  // BF16 [n_in, n_out] on AMX or vdpbf16ps: also the tiles the loaders pack
  // (pack_bf16amx_tiles), which are what the engine's decode reads (without them the kernels
  // pair rows up per call). vdpbf16ps reads them only where the strips are on, as the loader.
  std::vector<HugePageBuffer> tiles;
  if (type == DType::kBF16 && layout == WeightLayout::kInOut &&
      (bf16_amx_active() || (bf16_dot_active() && weight_strips_enabled())))
    for (int c = 0; c < n_copies; ++c) {
      const WeightMatrix plain{weights[c].data(), type, layout, s.n_in, s.n_out};
      tiles.emplace_back(bf16amx_tiles_size(plain) * sizeof(uint16_t));
      pack_bf16amx_tiles(reinterpret_cast<uint16_t*>(tiles.back().data()), plain, 1);
    }
  // BF16 [n_out, n_in] (the output head) on vdpbf16ps without AMX: also the pairs by lane class
  // the GPT-2 loader packs (pack_bf16dot_head_strips), which batched decode reads.
  std::vector<HugePageBuffer> head_strips;
  if (type == DType::kBF16 && layout == WeightLayout::kOutIn && bf16_dot_active() &&
      !bf16_amx_active() && weight_strips_enabled())
    for (int c = 0; c < n_copies; ++c) {
      const WeightMatrix plain{weights[c].data(), type, layout, s.n_in, s.n_out};
      head_strips.emplace_back(bf16dot_head_strips_size(plain) * sizeof(uint16_t));
      pack_bf16dot_head_strips(reinterpret_cast<uint16_t*>(head_strips.back().data()), plain, 1);
    }
  // F16 and F32 [n_in, n_out]: also the column strips the GPT-2 loader packs
  // (pack_weight_strips), which decode reads (KVLM_STRIPS=0: the matrix as stored).
  std::vector<HugePageBuffer> strips;
  const char* strips_env = std::getenv("KVLM_STRIPS");
  if (wants_weight_strips({weights[0].data(), type, layout, s.n_in, s.n_out}) &&
      !(strips_env && std::string(strips_env) == "0"))
    for (int c = 0; c < n_copies; ++c) {
      const WeightMatrix plain{weights[c].data(), type, layout, s.n_in, s.n_out};
      strips.emplace_back(weight_strips_bytes(plain));
      pack_weight_strips(strips.back().data(), plain, 1);
    }
  std::vector<float> x(static_cast<size_t>(rows) * s.n_in, 0.5f), bias(s.n_out, 0.1f);
  std::vector<float> out(static_cast<size_t>(rows) * s.n_out);
  int c = 0;
  for (auto _ : state) {
    WeightMatrix w{weights[c].data(), type, layout, s.n_in, s.n_out};
    if (!tiles.empty()) w.amx_tiles = reinterpret_cast<const uint16_t*>(tiles[c].data());
    if (!strips.empty()) w.strips = strips[c].data();
    if (!head_strips.empty())
      w.bf16dot_pairs = reinterpret_cast<const uint16_t*>(head_strips[c].data());
    matmul_forward_path(out.data(), x.data(), w, bias.data(), rows, par, path);
    benchmark::DoNotOptimize(out.data());
    c = (c + 1) % n_copies;
  }
  state.SetLabel(std::string(s.name) + " " + dtype_name(type) + (from_memory ? "" : " in cache"));
  state.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(n_bytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * n * rows * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state) { run_matmul(state, true); }
void BM_MatmulInCache(benchmark::State& state) { run_matmul(state, false); }

void MatmulArgs(benchmark::internal::Benchmark* b) {
  for (int shape = 0; shape < 5; ++shape)
    for (int threads : {1, 2}) {
      for (int type = 0; type < 4; ++type) b->Args({shape, 1, type, threads, 0});
      b->Args({shape, 8, 2, threads, 0});
      b->Args({shape, 8, 3, threads, 0});
      for (int rows : {2, 4, 8}) {
        b->Args({shape, rows, 0, threads, 1});
        b->Args({shape, rows, 0, threads, 2});
      }
      if (shape < 4) {
        b->Args({shape, 512, 0, threads, 2});
        b->Args({shape, 512, 2, threads, 2});
      }
    }
  // Each shape in both layouts at 2 threads: a 128-row prefill and an 8-row decode; for
  // [n_out, n_in] also the prefill through the dot tiles (path 1), the 8-row decode through the
  // register tiles (path 2), and the 1-row decode.
  for (int shape = 0; shape < 9; ++shape)
    for (int type : {0, 1}) {
      b->Args({shape, 128, type, 2, 2});
      b->Args({shape, 8, type, 2, 0});
      if (shape < 4) continue;
      b->Args({shape, 128, type, 2, 1});
      b->Args({shape, 8, type, 2, 2});
      b->Args({shape, 1, type, 2, 0});
    }
}
BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The decode kernels' arithmetic with the weights in cache (all shapes but the 77 MB head):
// GFLOPs against BM_Limits_FmaThroughput says how far batch-8 decode could go on a fast bus.
void MatmulInCacheArgs(benchmark::internal::Benchmark* b) {
  for (int shape : {0, 1, 2, 3, 5, 6, 7, 8})
    for (int rows : {1, 8})
      for (int type : {0, 1, 2, 3})
        for (int threads : {1, 2}) b->Args({shape, rows, type, threads, 0});
}
BENCHMARK(BM_MatmulInCache)
    ->Apply(MatmulInCacheArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// One decode row attending over `ctx` cached positions, GPT-2's 12 heads of 64.
void BM_Attention(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0)), H = 12, D = 64;
  std::vector<float> k(static_cast<size_t>(ctx) * H * D, 0.1f), v(k.size(), 0.2f), q(H * D, 0.3f);
  std::vector<float> out(H * D), scratch(ctx);
  const KvRun run = f32_run(k.data(), v.data(), ctx);
  for (auto _ : state) {
    attention_forward(out.data(), q.data(), {&run, 1}, f32_rows(H * D), scratch.data(), H, H, D);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_GBps"] = benchmark::Counter(2.0 * k.size() * 4 * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Attention)->Arg(128)->Arg(900)->Unit(benchmark::kMicrosecond);

// A decode step's attention as the model runs it: `batch` rows (one per sequence, each with
// `ctx` positions cached) attending in each of GPT-2's 12 layers over a real fp32 cache of
// 12 x batch x ctx rows (66 MB at 900 positions, one sequence: more than the L3 of the Zen
// machines here; the Sapphire Rapids VM reports 480 MB of L3 and reads these at 36-51 GB/s
// against a 31-35 GB/s bus, so there the figure is an upper bound), on 2 threads. kv_GBps
// against BM_Limits_ReadBandwidth/2 is attention's fraction of the bus.
void BM_AttendRowsFromMemory(benchmark::State& state) {
  const int ctx = static_cast<int>(state.range(0)), batch = static_cast<int>(state.range(1));
  const int n_layer = 12, H = 12, D = 64, kv_dim = H * D;
  ContiguousKvCache cache(n_layer, kv_dim, std::vector<int>(batch, ctx));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(kv_dim), v(kv_dim);
  for (int s = 0; s < batch; ++s)
    for (int layer = 0; layer < n_layer; ++layer)
      for (int pos = 0; pos < ctx; ++pos) {
        for (int i = 0; i < kv_dim; ++i) k[i] = normal(rng), v[i] = normal(rng);
        cache.write_row(s, layer, pos, k.data(), v.data());
      }
  std::vector<AttentionRow> rows;
  for (int s = 0; s < batch; ++s) rows.push_back({s, ctx - 1});
  std::vector<float> q(static_cast<size_t>(batch) * kv_dim), out(q.size());
  for (float& x : q) x = normal(rng);
  const Parallel par{2};
  std::vector<float> scratch(static_cast<size_t>(par.n_threads) * ctx * H);
  const AttentionShape shape{H, H, D};
  for (auto _ : state) {
    for (int layer = 0; layer < n_layer; ++layer)
      attend_rows(out.data(), kv_dim, q.data(), kv_dim, rows, layer, cache, shape, scratch.data(),
                  static_cast<size_t>(ctx) * H, par);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_GBps"] =
      benchmark::Counter(2.0 * n_layer * batch * ctx * kv_dim * 4 * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttendRowsFromMemory)
    ->Args({900, 1})
    ->Args({128, 1})
    ->Args({900, 8})
    ->Args({128, 8})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_Limits_ReadBandwidth(benchmark::State& state) {
  for (auto _ : state) {
    auto gbs =
        measure_read_bandwidth(size_t{512} << 20, 3, Parallel{static_cast<int>(state.range(0))});
    state.counters["GBps"] = gbs ? gbs.value() / 1e9 : 0.0;
  }
}
BENCHMARK(BM_Limits_ReadBandwidth)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Limits_FmaThroughput(benchmark::State& state) {
  for (auto _ : state)
    state.counters["GFLOPs"] =
        measure_fma_throughput(3, 0.2, Parallel{static_cast<int>(state.range(0))}) / 1e9;
}
BENCHMARK(BM_Limits_FmaThroughput)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvlm

BENCHMARK_MAIN();
