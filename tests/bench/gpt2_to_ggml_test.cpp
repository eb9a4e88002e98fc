// scripts/gpt2_to_ggml.py: tiny random GPT-2 folders (F32, F16, BF16; tied and untied heads;
// with and without the "transformer." prefix) converted to the legacy ggml GPT-2 file, read
// back here by an independent reader written from the loader of ggml's examples/gpt-2
// (main-backend.cpp, gpt2_model_load) and compared with the safetensors tensor by tensor, bit
// for bit. With KVLM_GGML_BUILD set to a ggml build with its gpt-2 examples, ggml itself runs
// the converted file and its greedy tokens must equal kvlm's. Needs python3 (skips without it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "model/safetensors.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

using test::CommandResult;
using test::TempDir;

#define SKIP_WITHOUT_PYTHON3()                                              \
  KVLM_REQUIRE_TOOL(std::system("command -v python3 >/dev/null 2>&1") == 0, \
                    "python3 not found: scripts/gpt2_to_ggml.py needs it")

struct GgmlTensor {
  int32_t type = -1;        // ggml_type: 0 F32, 1 F16, 30 BF16
  std::vector<int32_t> ne;  // ne[0] is the contiguous dimension
  std::string data;
};

struct GgmlFile {
  int32_t n_vocab = 0, n_ctx = 0, n_embd = 0, n_head = 0, n_layer = 0, ftype = -1;
  std::vector<std::string> vocab;
  std::vector<std::string> order;  // tensor names as written
  std::map<std::string, GgmlTensor> tensors;
};

int32_t read_i32(std::istream& in) {
  int32_t v = 0;
  in.read(reinterpret_cast<char*>(&v), 4);
  return v;
}

size_t element_bytes(int32_t type) {
  return type == 0 ? 4 : 2;
}

// The reads of gpt2_model_load: magic, six hparams, the vocabulary, then tensors to the end.
GgmlFile read_ggml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GgmlFile f;
  EXPECT_EQ(static_cast<uint32_t>(read_i32(in)), 0x67676d6cu) << path;
  f.n_vocab = read_i32(in), f.n_ctx = read_i32(in), f.n_embd = read_i32(in);
  f.n_head = read_i32(in), f.n_layer = read_i32(in), f.ftype = read_i32(in);
  EXPECT_EQ(read_i32(in), f.n_vocab);
  for (int i = 0; i < f.n_vocab && in; ++i) {
    std::string word(static_cast<size_t>(read_i32(in)), '\0');
    in.read(word.data(), static_cast<std::streamsize>(word.size()));
    f.vocab.push_back(word);
  }
  while (true) {
    const int32_t n_dims = read_i32(in), length = read_i32(in), type = read_i32(in);
    if (in.eof()) break;
    GgmlTensor t;
    t.type = type;
    size_t n = 1;
    for (int i = 0; i < n_dims; ++i) {
      t.ne.push_back(read_i32(in));
      n *= static_cast<size_t>(t.ne.back());
    }
    std::string name(static_cast<size_t>(length), '\0');
    in.read(name.data(), length);
    t.data.resize(n * element_bytes(type));
    in.read(t.data.data(), static_cast<std::streamsize>(t.data.size()));
    EXPECT_TRUE(in.good()) << path << ": tensor " << name << " runs past the end";
    f.order.push_back(name);
    f.tensors[name] = std::move(t);
  }
  return f;
}

// A safetensors tensor's bytes in the ggml file's layout: Conv1D matrices [in, out] transposed,
// vectors and the position embedding widened to F32 (exactly), matrices as stored.
std::string expected_bytes(const SafetensorsEntry& e, bool transpose, bool widen) {
  const size_t n = e.n_bytes / (e.dtype == "F32" ? 4 : 2);
  std::string bytes;
  if (widen && e.dtype != "F32") {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, e.data + 2 * i, 2);
      const float f = e.dtype == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
      bytes.append(reinterpret_cast<const char*>(&f), 4);
    }
    return bytes;
  }
  const size_t size = e.dtype == "F32" ? 4 : 2;
  if (!transpose) return std::string(reinterpret_cast<const char*>(e.data), e.n_bytes);
  const size_t rows = static_cast<size_t>(e.shape[0]), cols = static_cast<size_t>(e.shape[1]);
  for (size_t j = 0; j < cols; ++j)
    for (size_t i = 0; i < rows; ++i)
      bytes.append(reinterpret_cast<const char*>(e.data + (i * cols + j) * size), size);
  return bytes;
}

CommandResult convert(const std::string& model_dir, const std::string& out,
                      const std::string& extra = "") {
  return test::run_program(
      "python3", test::shell_quote(test::source_dir() + "/scripts/gpt2_to_ggml.py") + " " +
                     test::shell_quote(model_dir) + " " + test::shell_quote(out) + extra);
}

// Converts a tiny random GPT-2 written with `options` and checks every tensor of the result.
void check_round_trip(const RandomGpt2Options& options, int32_t want_ftype,
                      int32_t want_matrix_type) {
  TempDir dir;
  const ModelConfig c = test::tiny_gpt2_config();
  ASSERT_TRUE(write_random_gpt2(dir.path(), c, options).is_ok());
  const CommandResult r = convert(dir.path(), dir.file("model.bin"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgmlFile f = read_ggml(dir.file("model.bin"));
  EXPECT_EQ(f.n_vocab, c.n_vocab);
  EXPECT_EQ(f.n_ctx, c.n_ctx);
  EXPECT_EQ(f.n_embd, c.n_embd);
  EXPECT_EQ(f.n_head, c.n_head);
  EXPECT_EQ(f.n_layer, c.n_layer);
  EXPECT_EQ(f.ftype, want_ftype);
  ASSERT_EQ(f.vocab.size(), static_cast<size_t>(c.n_vocab));
  EXPECT_EQ(f.vocab[0], " 0");
  EXPECT_EQ(f.vocab[63], " 63");

  auto st = SafetensorsFile::open(dir.file("model.safetensors"));
  ASSERT_TRUE(st.is_ok()) << st.message();
  const std::string p = options.transformer_prefix ? "transformer." : "";
  // ggml name -> (safetensors name, Conv1D, vector or position embedding)
  std::map<std::string, std::tuple<std::string, bool, bool>> want = {
      {"model/wte", {p + "wte.weight", false, false}},
      {"model/wpe", {p + "wpe.weight", false, true}},
      {"model/ln_f/g", {p + "ln_f.weight", false, true}},
      {"model/ln_f/b", {p + "ln_f.bias", false, true}}};
  if (options.separate_lm_head) want["model/lm_head"] = {"lm_head.weight", false, false};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string g = "model/h" + std::to_string(l) + "/";
    const std::string h = p + "h." + std::to_string(l) + ".";
    for (const char* n : {"ln_1", "ln_2"}) {
      want[g + n + "/g"] = {h + n + ".weight", false, true};
      want[g + n + "/b"] = {h + n + ".bias", false, true};
    }
    for (const char* n : {"attn/c_attn", "attn/c_proj", "mlp/c_fc", "mlp/c_proj"}) {
      std::string hf = n;
      hf[hf.find('/')] = '.';
      want[g + n + "/w"] = {h + hf + ".weight", true, false};
      want[g + n + "/b"] = {h + hf + ".bias", false, true};
    }
  }
  EXPECT_EQ(f.tensors.size(), want.size());
  // The examples tie the head to model/wte unless model/lm_head comes first.
  if (options.separate_lm_head) {
    EXPECT_EQ(f.order.front(), "model/lm_head");
  }
  for (const auto& [name, spec] : want) {
    const auto& [hf_name, conv1d, widen] = spec;
    SCOPED_TRACE(name);
    const auto found = f.tensors.find(name);
    ASSERT_NE(found, f.tensors.end());
    const SafetensorsEntry* e = st.value().find(hf_name);
    ASSERT_NE(e, nullptr) << hf_name;
    const GgmlTensor& t = found->second;
    EXPECT_EQ(t.type, widen ? 0 : want_matrix_type);
    // ne is the safetensors shape reversed, after the Conv1D transpose: [out, in] -> (in, out).
    std::vector<int32_t> ne;
    for (auto d = e->shape.rbegin(); d != e->shape.rend(); ++d)
      ne.push_back(static_cast<int32_t>(*d));
    if (conv1d) std::swap(ne[0], ne[1]);
    EXPECT_EQ(t.ne, ne);
    EXPECT_TRUE(t.data == expected_bytes(*e, conv1d, widen)) << "data differ";
  }
}

TEST(Gpt2ToGgmlTest, F32FolderRoundTripsBitForBit) {
  SKIP_WITHOUT_PYTHON3();
  check_round_trip(RandomGpt2Options{}, /*ftype=*/0, /*matrix type=*/0);
}

TEST(Gpt2ToGgmlTest, F16AndBf16MatricesAreCopiedAndVectorsWidened) {
  SKIP_WITHOUT_PYTHON3();
  RandomGpt2Options options;
  options.dtype = DType::kF16;
  check_round_trip(options, 1, 1);
  options.dtype = DType::kBF16;
  check_round_trip(options, 24, 30);
}

TEST(Gpt2ToGgmlTest, PrefixedNamesAndAnUntiedHead) {
  SKIP_WITHOUT_PYTHON3();
  RandomGpt2Options options;
  options.transformer_prefix = true;
  options.separate_lm_head = true;
  check_round_trip(options, 0, 0);
}

// --type f16 from F32 matrices: round to nearest even, the bits kvlm's f32_to_f16 gives.
TEST(Gpt2ToGgmlTest, TypeF16RoundsLikeKvlm) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const CommandResult r = convert(dir.path(), dir.file("model.bin"), " --type f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgmlFile f = read_ggml(dir.file("model.bin"));
  EXPECT_EQ(f.ftype, 1);
  auto st = SafetensorsFile::open(dir.file("model.safetensors"));
  ASSERT_TRUE(st.is_ok());
  const SafetensorsEntry* e = st.value().find("h.1.mlp.c_fc.weight");  // [32, 128]
  ASSERT_NE(e, nullptr);
  const GgmlTensor& t = f.tensors.at("model/h1/mlp/c_fc/w");
  ASSERT_EQ(t.type, 1);
  ASSERT_EQ(t.data.size(), 32u * 128u * 2u);
  for (size_t j = 0; j < 128; ++j)
    for (size_t i = 0; i < 32; ++i) {
      float x;
      std::memcpy(&x, e->data + (i * 128 + j) * 4, 4);
      uint16_t h;
      std::memcpy(&h, t.data.data() + (j * 32 + i) * 2, 2);
      ASSERT_EQ(h, f32_to_f16(x)) << "row " << j << " column " << i;
    }
  EXPECT_EQ(f.tensors.at("model/h1/ln_1/g").type, 0);  // vectors stay F32
}

TEST(Gpt2ToGgmlTest, InputItCannotConvertIsNamed) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  ModelConfig c = test::tiny_gpt2_config();
  ASSERT_TRUE(write_random_gpt2(dir.path(), c, {}).is_ok());
  const std::string config = test::read_text(dir.file("config.json"));
  // A config whose width disagrees with the tensors.
  c.n_embd = 48;
  c.head_dim = 12;
  c.n_ff = 192;
  test::write_text(dir.file("config.json"), gpt2_config_json(c));
  CommandResult r = convert(dir.path(), dir.file("model.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model.safetensors: tensor 'wte.weight' has shape [64, 32], expected "
                       "[64, 48] from config.json"),
            std::string::npos)
      << r.err;
  // An MLP width the examples cannot hold.
  c = test::tiny_gpt2_config();
  c.n_ff = 96;
  test::write_text(dir.file("config.json"), gpt2_config_json(c));
  r = convert(dir.path(), dir.file("model.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config.json: field 'n_inner' is 96; ggml's GPT-2 examples need "
                       "4 * n_embd = 128"),
            std::string::npos)
      << r.err;
  // A missing field, and a folder without a config.
  test::write_text(dir.file("config.json"), "{\"n_embd\": 32}");
  r = convert(dir.path(), dir.file("model.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config.json: field 'vocab_size' must be a positive integer, found null"),
            std::string::npos)
      << r.err;
  TempDir empty;
  r = convert(empty.path(), dir.file("model.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config.json: cannot read"), std::string::npos) << r.err;
  // --type bf16 is not offered; f16 from a BF16 folder cannot be made.
  test::write_text(dir.file("config.json"), config);
  r = convert(dir.path(), dir.file("model.bin"), " --type bf16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--type: expected f32 or f16"), std::string::npos) << r.err;
  RandomGpt2Options bf16;
  bf16.dtype = DType::kBF16;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), bf16).is_ok());
  r = convert(dir.path(), dir.file("model.bin"), " --type f16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--type f16: cannot convert BF16 matrices"), std::string::npos) << r.err;
}

// ggml itself on the converted file: its greedy tokens are kvlm's (F32: the same math in
// float32, up to summation order; a random tiny model's top logits are far apart enough).
TEST(Gpt2ToGgmlTest, GgmlRunsTheConvertedModelToKvlmsTokens) {
  SKIP_WITHOUT_PYTHON3();
  const char* build = std::getenv("KVLM_GGML_BUILD");
  if (build == nullptr || *build == '\0')
    GTEST_SKIP() << "KVLM_GGML_BUILD is not set (a ggml build with -DGGML_BUILD_EXAMPLES=ON; "
                    "see docs/performance.md, \"Side by side with ggml\")";
  const std::string batched = std::string(build) + "/bin/gpt-2-batched";
  ASSERT_EQ(::access(batched.c_str(), X_OK), 0) << batched << " is not an executable";
  TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  ASSERT_EQ(convert(dir.path(), dir.file("model.bin")).exit_code, 0);
  const CommandResult g = test::run_program(
      batched, "-m " + test::shell_quote(dir.file("model.bin")) +
                   " -p ' 7 3 19 1 25 8' -n 13 -np 1 -c 64 --top_k 1 -t 1 --ignore-eos");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  // The generated tokens follow the prompt line and a blank line: " a b c ...".
  const size_t at = g.out.find("first 8 tokens: 7 3 19 1 25 8 \n\n");
  ASSERT_NE(at, std::string::npos) << g.out;
  std::istringstream generated(g.out.substr(g.out.find("\n\n", at) + 2));
  std::string line, ids;
  std::getline(generated, line);
  std::istringstream words(line);
  for (std::string w; words >> w;) ids += (ids.empty() ? "" : ",") + w;
  const CommandResult k = test::run_kvlm("generate --model " + test::shell_quote(dir.path()) +
                                         " --ids 7,3,19,1,25,8 --max-new 12 --ignore-eos "
                                         "--threads 1 --json");
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_NE(k.out.find("\"ids\":[" + ids + "]"), std::string::npos)
      << "ggml: " << ids << "\nkvlm: " << k.out;
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 11) << ids;
}

}  // namespace
}  // namespace kvlm
