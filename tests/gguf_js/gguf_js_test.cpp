// What `kvlm convert` writes, read back by an independent parser: Hugging Face's
// @huggingface/gguf (tests/gguf_js/check_gguf.mjs). A GPT-2 (with its byte-level tokenizer)
// and a Llama, both with 256-wide matrices so every type really applies, are converted with
// every --type; the reader must find the architecture keys, exactly the tensor names and
// shapes the format prescribes (listed here, not taken from kvlm's writer), each in the type
// kvlm chose, at the offsets kvlm's own reader finds, laid out back to back on the alignment
// and ending at the end of the file (the script checks the layout itself).
//
// The reader is installed like the e2e tests' openai client: from the committed
// package-lock.json with `npm ci` into the build folder (once). Without node >= 20 or a registry
// the test skips saying why, except under KVLM_REQUIRE_SHARED_DATA=1 (CI), where it fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/llama_random.h"
#include "model/random_gpt2.h"
#include "support/node_package.h"
#include "support/test_support.h"
#include "tokenizer/byte_unicode.h"

namespace kvlm {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // ggml's ne: [n_in, n_out] for a matrix
  bool matrix;
};

// The tensors a GGUF of each architecture holds (llama.cpp's names), with their shapes.
std::vector<Tensor> gpt2_tensors(const ModelConfig& c) {
  const int64_t C = c.n_embd, F = c.n_ff;
  std::vector<Tensor> t = {{"token_embd.weight", {C, c.n_vocab}, true},
                           {"position_embd.weight", {C, c.n_ctx}, false},
                           {"output_norm.weight", {C}, false},
                           {"output_norm.bias", {C}, false}};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const Tensor& x : std::vector<Tensor>{{"attn_norm.weight", {C}, false},
                                               {"attn_norm.bias", {C}, false},
                                               {"attn_qkv.weight", {C, 3 * C}, true},
                                               {"attn_qkv.bias", {3 * C}, false},
                                               {"attn_output.weight", {C, C}, true},
                                               {"attn_output.bias", {C}, false},
                                               {"ffn_norm.weight", {C}, false},
                                               {"ffn_norm.bias", {C}, false},
                                               {"ffn_up.weight", {C, F}, true},
                                               {"ffn_up.bias", {F}, false},
                                               {"ffn_down.weight", {F, C}, true},
                                               {"ffn_down.bias", {C}, false}})
      t.push_back({p + x.name, x.shape, x.matrix});
  }
  return t;
}

std::vector<Tensor> llama_tensors(const ModelConfig& c) {
  const int64_t C = c.n_embd, F = c.n_ff, Q = c.q_dim(), KV = c.kv_dim();
  std::vector<Tensor> t = {{"token_embd.weight", {C, c.n_vocab}, true},
                           {"output_norm.weight", {C}, false},
                           {"output.weight", {C, c.n_vocab}, true}};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const Tensor& x : std::vector<Tensor>{{"attn_norm.weight", {C}, false},
                                               {"attn_q.weight", {C, Q}, true},
                                               {"attn_k.weight", {C, KV}, true},
                                               {"attn_v.weight", {C, KV}, true},
                                               {"attn_output.weight", {Q, C}, true},
                                               {"ffn_norm.weight", {C}, false},
                                               {"ffn_gate.weight", {C, F}, true},
                                               {"ffn_up.weight", {C, F}, true},
                                               {"ffn_down.weight", {F, C}, true}})
      t.push_back({p + x.name, x.shape, x.matrix});
  }
  return t;
}

ModelConfig gpt2_config() {
  ModelConfig c = test::tiny_gpt2_config();
  c.n_vocab = 257;  // the 256 bytes and <|endoftext|>
  c.eos_token_id = 256;
  c.n_embd = 256;
  c.head_dim = 64;
  c.n_ff = 512;
  c.tied_embeddings = true;  // GPT-2's head is its embedding (written without lm_head)
  return c;
}

LlamaConfig llama_config() {
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_embd = 256;
  lc.model.n_head = 4;
  lc.model.n_kv_head = 2;
  lc.model.head_dim = 64;
  lc.model.n_ff = 512;
  lc.model.n_layer = 2;
  lc.model.tied_embeddings = false;
  return lc;
}

struct ConvertedFile {
  std::string path, arch, type;
  const ModelConfig* config;
};

// Installs the reader beside the test binary (once); "" when it is ready, else why not.
// The GPT-2 (with a byte-level vocabulary: the 256 bytes and <|endoftext|>) and the Llama as
// Hugging Face folders.
void write_models(const std::string& gpt2_dir, const std::string& llama_dir) {
  fs::create_directories(gpt2_dir);
  fs::create_directories(llama_dir);
  ASSERT_TRUE(write_random_gpt2(gpt2_dir, gpt2_config(), RandomGpt2Options{}).is_ok());
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["<|endoftext|>"] = 256;
  test::write_text(gpt2_dir + "/vocab.json", vocab.dump());
  test::write_text(gpt2_dir + "/merges.txt", "#version: 0.2\n");
  ASSERT_TRUE(write_llama_hf(llama_dir, random_llama_weights(llama_config(), 4), {}).is_ok());
}

// What the reader saw in one file (`s`) against what the format and the --type rule say.
void check_file(const ConvertedFile& f, const nlohmann::json& s) {
  const ModelConfig& c = *f.config;
  SCOPED_TRACE(f.path);
  const nlohmann::json& m = s["metadata"];
  EXPECT_EQ(m["version"], 3);
  EXPECT_EQ(m["general.architecture"], f.arch);
  const std::string a = f.arch + ".";
  EXPECT_EQ(m[a + "block_count"], c.n_layer);
  EXPECT_EQ(m[a + "embedding_length"], c.n_embd);
  EXPECT_EQ(m[a + "context_length"], c.n_ctx);
  EXPECT_EQ(m[a + "feed_forward_length"], c.n_ff);
  EXPECT_EQ(m[a + "attention.head_count"], c.n_head);
  EXPECT_EQ(m[a + "attention.head_count_kv"], c.n_kv_head);
  if (f.arch == "llama") {
    EXPECT_EQ(m["llama.rope.dimension_count"], c.head_dim);
    EXPECT_TRUE(m.contains("llama.attention.layer_norm_rms_epsilon"));
    EXPECT_FALSE(m.contains("tokenizer.ggml.model"));  // --no-tokenizer
  } else {
    EXPECT_TRUE(m.contains("gpt2.attention.layer_norm_epsilon"));
    EXPECT_EQ(m["tokenizer.ggml.model"], "gpt2");
    EXPECT_EQ(m["tokenizer.ggml.tokens"]["length"], 257);
    EXPECT_EQ(m["tokenizer.ggml.eos_token_id"], 256);
  }
  EXPECT_EQ(m.contains("general.quantization_version"), f.type[0] == 'q');
  // llama.cpp's llama_ftype numbers (its include/llama.h), what it shows as the model's type.
  const std::map<std::string, int> kLlamaFileType = {
      {"f32", 0}, {"f16", 1},  {"bf16", 32}, {"q8_0", 7},     {"q4_0", 2},
      {"q5_0", 8}, {"q4_k", 14}, {"q6_k", 18}, {"q4_k_mix", 15}};
  EXPECT_EQ(m["general.file_type"], kLlamaFileType.at(f.type));

  const auto expected = f.arch == "gpt2" ? gpt2_tensors(c) : llama_tensors(c);
  const GgufTypes types = parse_gguf_types(f.type).value();
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& t : s["tensors"]) by_name[t["name"].get<std::string>()] = t;
  EXPECT_EQ(by_name.size(), expected.size());
  auto file = GgufFile::open(f.path);
  ASSERT_TRUE(file) << file.message();
  for (const Tensor& t : expected) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(by_name.count(t.name));
    const nlohmann::json& x = by_name[t.name];
    EXPECT_EQ(x["shape"].get<std::vector<int64_t>>(), t.shape);
    DType type = DType::kF32;
    if (t.matrix)
      type = gguf_stored_type(types, gguf_matrix_type(types, t.name, c.n_layer, c.tied_embeddings),
                              t.shape[0], DType::kF32);
    EXPECT_EQ(x["type"], dtype_name(type));
    const GgufTensor* ours = file->tensor(t.name);
    ASSERT_NE(ours, nullptr);
    EXPECT_EQ(x["offset"].get<uint64_t>(), ours->offset);
    EXPECT_EQ(x["bytes"].get<uint64_t>(), ours->n_bytes);
  }
}

TEST(GgufJs, HuggingFaceReaderAgreesWithWhatConvertWrites) {
  const fs::path work = fs::path(KVLM_BINARY).parent_path() / "gguf_js";
  const std::string not_ready = test::prepare_node_package(
      "gguf_js", work, {"package.json", "package-lock.json", "check_gguf.mjs"},
      "@huggingface/gguf");
  KVLM_REQUIRE_TOOL(not_ready.empty(), not_ready);
  test::TempDir dir;
  const std::string gpt2_dir = dir.file("gpt2"), llama_dir = dir.file("llama");
  ASSERT_NO_FATAL_FAILURE(write_models(gpt2_dir, llama_dir));
  const ModelConfig g = gpt2_config(), l = llama_config().model;

  std::vector<ConvertedFile> files;
  std::string paths;
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_mix"})
    for (const auto& [arch, folder, config] :
         {std::tuple{"gpt2", gpt2_dir, &g}, std::tuple{"llama", llama_dir, &l}}) {
      const std::string out = dir.file(std::string(arch) + "-" + type + ".gguf");
      const auto r = test::run_kvlm("convert --model " + folder + " --out " + out + " --type " +
                                    type + (std::string(arch) == "llama" ? " --no-tokenizer" : ""));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      files.push_back({out, arch, type, config});
      paths += " '" + out + "'";
    }
  std::string output;
  const int code = test::run_shell(
      "cd '" + work.string() + "' && node check_gguf.mjs" + paths + " 2>/dev/null", &output);
  ASSERT_EQ(code, 0) << "check_gguf.mjs refused a file:\n" << output;
  const auto seen = nlohmann::json::parse(output);
  ASSERT_EQ(seen.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) check_file(files[i], seen[i]);

  // Spot checks of the mix, spelled out: GPT-2's tied embedding is its head (Q6_K); the Llama's
  // second (last) layer takes Q6_K for attn_v and ffn_down, its first keeps Q4_K.
  const auto type_in = [&](const std::string& arch, const std::string& name) {
    for (size_t i = 0; i < files.size(); ++i)
      if (files[i].arch == arch && files[i].type == "q4_k_mix")
        for (const auto& t : seen[i]["tensors"])
          if (t["name"] == name) return t["type"].get<std::string>();
    return std::string("absent");
  };
  EXPECT_EQ(type_in("gpt2", "token_embd.weight"), "Q6_K");
  EXPECT_EQ(type_in("gpt2", "blk.0.attn_qkv.weight"), "Q4_K");
  EXPECT_EQ(type_in("llama", "output.weight"), "Q6_K");
  EXPECT_EQ(type_in("llama", "token_embd.weight"), "Q4_K");
  EXPECT_EQ(type_in("llama", "blk.1.ffn_down.weight"), "Q6_K");
  EXPECT_EQ(type_in("llama", "blk.0.ffn_down.weight"), "Q4_K");
  EXPECT_EQ(type_in("llama", "blk.1.attn_v.weight"), "Q6_K");
}

}  // namespace
}  // namespace kvlm
