// The tools on GGUF files: `kvlm kv-size --model FILE.gguf` sizes the cache from the file's keys
// (the same figures as for the folder it was converted from) and refuses a broken file naming
// it; `kvlm bench` on a quantized GGUF counts the bytes a decode step really reads (the file's
// matrices as stored, Q4_K here), which is what its roofline divides by.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/bench_suite.h"
#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

// A Llama with K-quant-sized widths (256), GQA (4 query heads, 2 KV heads of 64), untied head.
LlamaConfig k_llama_config() {
  LlamaConfig c = tiny_llama_config();
  c.model.n_embd = 256;
  c.model.n_head = 4;
  c.model.n_kv_head = 2;
  c.model.head_dim = 64;
  c.model.n_ff = 256;
  c.model.tied_embeddings = false;
  return c;
}

struct Converted {
  test::TempDir dir;
  std::string gguf;
  std::unique_ptr<Model> source;
};

void convert(Converted* out, DType type) {
  ASSERT_TRUE(
      write_llama_hf(out->dir.path(), random_llama_weights(k_llama_config(), 9), {}).is_ok());
  auto model = load_model(out->dir.path(), LoadOptions{});
  ASSERT_TRUE(model) << model.message();
  out->source = std::move(model.value());
  out->gguf = out->dir.file("model.gguf");
  ASSERT_TRUE(write_gguf(*out->source, nullptr, type, out->gguf).is_ok());
}

TEST(GgufTools, KvSizeReadsTheFilesKeys) {
  Converted c;
  ASSERT_NO_FATAL_FAILURE(convert(&c, DType::kQ4_K));
  const auto from_gguf = test::run_kvlm("kv-size --model " + c.gguf + " --seq-len 100 --json");
  ASSERT_EQ(from_gguf.exit_code, 0) << from_gguf.err;
  const auto j = nlohmann::json::parse(from_gguf.out);
  const LlamaConfig lc = k_llama_config();
  // 2 (K and V) x layers x 2 KV heads x 64 x 100 tokens x 4 bytes
  EXPECT_EQ(j["bytes"].get<int64_t>(), 2LL * lc.model.n_layer * 2 * 64 * 100 * 4);
  EXPECT_EQ(j["n_kv_head"], 2);
  EXPECT_EQ(j["n_head"], 4);
  EXPECT_EQ(j["n_ctx"], lc.model.n_ctx);
  EXPECT_TRUE(j["checkpoint_dtype"].is_null());  // quantized: no torch_dtype to claim
  const auto from_folder =
      test::run_kvlm("kv-size --model " + c.dir.path() + " --seq-len 100 --json");
  ASSERT_EQ(from_folder.exit_code, 0) << from_folder.err;
  const auto f = nlohmann::json::parse(from_folder.out);
  for (const char* key : {"bytes", "mha_bytes", "n_layer", "head_dim", "n_params"})
    EXPECT_EQ(j[key], f[key]) << key;

  // A GGUF cut short: an error naming the file, exit code 1.
  std::ifstream in(c.gguf, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string cut = c.dir.file("cut.gguf");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 200);
  const auto broken = test::run_kvlm("kv-size --model " + cut + " --seq-len 100");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("cut.gguf"), std::string::npos) << broken.err;
}

TEST(GgufTools, BenchCountsTheBytesStored) {
  Converted c;
  ASSERT_NO_FATAL_FAILURE(convert(&c, DType::kQ4_K));
  auto file = GgufFile::open(c.gguf);
  ASSERT_TRUE(file) << file.message();
  // What one decode step reads: every tensor as stored except the embedding (a row per token).
  size_t stored = 0;
  for (const GgufTensor& t : file->tensors())
    if (t.name != "token_embd.weight") stored += t.n_bytes;
  auto model = load_model(c.gguf, LoadOptions{});
  ASSERT_TRUE(model) << model.message();
  EXPECT_EQ(model.value()->weight_bytes(), stored);
  EXPECT_LT(stored * 5, c.source->weight_bytes());  // 4.5 bits a weight against 32

  BenchOptions o;  // a tiny run: the figures are noise, the accounting is not
  o.bandwidth_bytes = size_t{4} << 20;
  o.limit_repeats = o.bandwidth_repeats = o.prefill_repeats = o.decode_repeats = 1;
  o.fma_seconds = 0.005;
  o.decode_steps = 2;
  o.short_prompt = o.short_context = 8;
  o.long_prompt = 16;
  o.long_context = 20;
  o.batch = 2;
  auto report = run_bench(*model.value(), o, Parallel{1});
  ASSERT_TRUE(report) << report.message();
  EXPECT_EQ(report->weights, "Q4_K");
  EXPECT_EQ(report->weight_bytes, stored);
  EXPECT_GE(report->decode_short.cost.bytes, static_cast<double>(stored));
  EXPECT_TRUE(report->seed.identical);
}

}  // namespace
}  // namespace kvlm
