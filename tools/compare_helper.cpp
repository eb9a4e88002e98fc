// kvlm_compare_helper: the two things scripts/compare_ggml.sh needs from kvlm besides
// `kvlm bench`, so another engine can run the same model on the same machine state:
//
//   kvlm_compare_helper write-model --out DIR [--dtype f32|f16|bf16] [--seed N]
//       writes the GPT-2 124M-shaped model with seeded random weights that `kvlm bench` runs
//       without --model (seed 1234), as a Hugging Face folder (config.json + model.safetensors)
//   kvlm_compare_helper bandwidth [--threads N] [--seconds S]
//       prints {"bandwidth_gbs": G, "peak_gbs": P}: the read bandwidth sustained over S seconds
//       (default 0.3) and the best single pass, with the probe `kvlm bench` reads beside each of
//       its decode windows (src/bench/machine_limits.h), so the other engine's windows are
//       judged against the same measurement
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "bench/machine_limits.h"
#include "model/random_gpt2.h"

namespace kvlm {
namespace {

struct Flags {
  std::string out;
  std::string dtype = "f32";
  uint64_t seed = 1234;
  int threads = 0;
  double seconds = 0.3;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "kvlm_compare_helper: %s\n", message.c_str());
  return 1;
}

int write_model(const Flags& f) {
  RandomGpt2Options options;
  options.seed = f.seed;
  options.dtype = f.dtype == "f16" ? DType::kF16 : f.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  if (ec) return fail("--out: cannot create '" + f.out + "': " + ec.message());
  const Status s = write_random_gpt2(f.out, gpt2_small_config(), options);
  if (!s.is_ok()) return fail(s.message());
  std::fprintf(stderr, "kvlm_compare_helper: wrote %s (GPT-2 124M shape, %s, seed %llu)\n",
               f.out.c_str(), f.dtype.c_str(), static_cast<unsigned long long>(f.seed));
  return 0;
}

int bandwidth(const Flags& f) {
  Parallel par;
  par.n_threads = f.threads > 0
                      ? f.threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // 256 MB, as kvlm bench's probe: 8x a 32 MB last-level cache.
  auto probe = ReadBandwidthProbe::create(size_t{256} << 20, par);
  if (!probe) return fail(probe.message());
  const double sustained = probe.value().measure_sustained(f.seconds);
  const double peak = probe.value().measure(3);
  std::printf("{\"bandwidth_gbs\": %.3f, \"peak_gbs\": %.3f, \"threads\": %d}\n", sustained / 1e9,
              peak / 1e9, par.n_threads);
  return 0;
}

}  // namespace
}  // namespace kvlm

int main(int argc, char** argv) {
  using kvlm::Flags;
  CLI::App app{"What scripts/compare_ggml.sh needs from kvlm besides kvlm bench"};
  app.require_subcommand(1);
  Flags f;
  CLI::App* write = app.add_subcommand(
      "write-model", "Write kvlm bench's random GPT-2 124M-shaped model as a Hugging Face folder");
  write->add_option("--out", f.out, "Folder to write (created if missing)")->required();
  write->add_option("--dtype", f.dtype, "Storage type of every tensor (default f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  write->add_option("--seed", f.seed, "Random seed (default 1234, kvlm bench's)");
  CLI::App* bw = app.add_subcommand(
      "bandwidth", "Print the memory read bandwidth now, as kvlm bench's decode probe reads it");
  bw->add_option("--threads", f.threads, "Threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  bw->add_option("--seconds", f.seconds, "Sustained window (default 0.3)")
      ->check(CLI::Range(0.01, 10.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // bad input exits with 1, as kvlm does (not CLI11's codes)
  }
  return write->parsed() ? kvlm::write_model(f) : kvlm::bandwidth(f);
}
