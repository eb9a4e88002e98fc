// Broken Llama checkpoints must fail with a clear error naming the file and the field, what
// was expected and what was found: truncated or padded llama2.c files, headers with impossible
// values, Hugging Face folders with a missing shard, a missing tensor or a wrong shape, and
// config.json values kvlm cannot run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/llama2c.h"
#include "model/llama_config.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string load_error(const std::string& path) {
  auto model = load_model(path, {});
  EXPECT_FALSE(model.is_ok()) << path << " loaded but should not have";
  return model.is_ok() ? "" : model.message();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

class Llama2cBadInput : public ::testing::Test {
 protected:
  void SetUp() override { bytes_ = llama2c_bytes(random_llama_weights(tiny_llama_config(), 1)); }
  // The valid file with header field `index` (0 dim .. 6 seq_len) set to `value`.
  std::string with_header(int index, int32_t value) {
    std::vector<uint8_t> b = bytes_;
    std::memcpy(b.data() + 4 * index, &value, 4);
    // (Built with append: GCC 12 warns falsely (-Wrestrict) on a chain of string +.)
    std::string name = "h";
    name.append(std::to_string(index)).append("_").append(std::to_string(value)).append(".bin");
    const std::string path = dir_.file(name);
    write_bytes(path, b);
    return path;
  }
  test::TempDir dir_;
  std::vector<uint8_t> bytes_;
};

TEST_F(Llama2cBadInput, ValidFileLoads) {
  write_bytes(dir_.file("ok.bin"), bytes_);
  auto model = load_model(dir_.file("ok.bin"), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
}

TEST_F(Llama2cBadInput, TruncatedFiles) {
  const std::string expected = "needs exactly " + std::to_string(bytes_.size());
  for (size_t n : {size_t{28}, size_t{1000}, bytes_.size() / 2, bytes_.size() - 1}) {
    const std::string path = dir_.file("cut" + std::to_string(n) + ".bin");
    write_bytes(path, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + n));
    EXPECT_THAT(load_error(path), AllOf(HasSubstr(path), HasSubstr(std::to_string(n) + " bytes"),
                                        HasSubstr(expected), HasSubstr("truncated")));
  }
  const std::string tiny = dir_.file("tiny.bin");
  write_bytes(tiny, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + 10));
  EXPECT_THAT(load_error(tiny), AllOf(HasSubstr(tiny), HasSubstr("10 bytes"),
                                      HasSubstr("too short for llama2.c's 28-byte header")));
}

TEST_F(Llama2cBadInput, TrailingBytes) {
  std::vector<uint8_t> b = bytes_;
  b.resize(b.size() + 8);
  write_bytes(dir_.file("long.bin"), b);
  EXPECT_THAT(load_error(dir_.file("long.bin")), HasSubstr("trailing bytes"));
}

TEST_F(Llama2cBadInput, HeadsMustDivide) {
  // tiny_llama_config: dim 24, hidden 40, 2 layers, 4 heads, 2 KV heads, vocab 48, seq 32.
  EXPECT_THAT(load_error(with_header(3, 5)), HasSubstr("n_heads (5) must divide dim (24)"));
  EXPECT_THAT(load_error(with_header(4, 3)), HasSubstr("n_kv_heads (3) must divide n_heads (4)"));
  EXPECT_THAT(load_error(with_header(4, 8)), HasSubstr("n_kv_heads (8) must divide n_heads (4)"));
  // 24 / 8 = 3: rotary pairs need an even head size.
  EXPECT_THAT(load_error(with_header(3, 8)), HasSubstr("head size dim / n_heads = 3 must be even"));
}

TEST_F(Llama2cBadInput, ZeroAndNegativeSizes) {
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "", "seq_len"};
  for (int index : {0, 1, 2, 3, 4, 6}) {
    for (int32_t value : {0, -4}) {
      const std::string path = with_header(index, value);
      EXPECT_THAT(load_error(path),
                  AllOf(HasSubstr(path), HasSubstr(std::string(names[index]) + " (" +
                                                   std::to_string(value) + ") must be positive")));
    }
  }
  EXPECT_THAT(load_error(with_header(5, 0)), HasSubstr("vocab_size (0) must be non-zero"));
}

TEST_F(Llama2cBadInput, AbsurdSizesAreNotAllocated) {
  EXPECT_THAT(load_error(with_header(0, 1 << 30)), HasSubstr("not a real file"));
  // Plausible sizes that the file is far too short for: caught by the size check.
  EXPECT_THAT(load_error(with_header(2, 1000)), HasSubstr("truncated"));
  // A negative vocab size (unshared classifier) the file does not hold.
  EXPECT_THAT(load_error(with_header(5, -48)), HasSubstr("classifier included"));
}

TEST_F(Llama2cBadInput, NewerExportFormatIsNamed) {
  std::vector<uint8_t> b = bytes_;
  const uint32_t magic = 0x616b3432u;
  const int32_t version = 1;
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &version, 4);
  write_bytes(dir_.file("v1.bin"), b);
  EXPECT_THAT(load_error(dir_.file("v1.bin")), HasSubstr("llama2.c version-1 export"));
}

TEST(LlamaLoader, OtherFilesAreNotModels) {
  test::TempDir dir;
  test::write_text(dir.file("weights.pt"), "not a model");
  EXPECT_THAT(load_error(dir.file("weights.pt")), HasSubstr("or a llama2.c model .bin file"));
  EXPECT_THAT(load_error(dir.file("absent.bin")), HasSubstr("no such file"));
}

// ---------------------------------------------------------------- Hugging Face folders

class LlamaHfBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    LlamaConfig lc = tiny_llama_config();
    lc.model.tied_embeddings = false;
    weights_ = random_llama_weights(lc, 2);
    ASSERT_TRUE(write_llama_hf(dir_.path(), weights_, HfWriteOptions{}).is_ok());
    ASSERT_TRUE(load_model(dir_.path(), {}).is_ok());
  }
  void edit_config(const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(test::read_text(dir_.file("config.json")));
    edit(j);
    test::write_text(dir_.file("config.json"), j.dump());
  }
  // Rewrites model.safetensors through `edit`, which may drop or replace tensors.
  void edit_tensors(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    std::vector<TensorToWrite> tensors;
    {
      auto file = SafetensorsFile::open(dir_.file("model.safetensors"));
      ASSERT_TRUE(file.is_ok()) << file.message();
      for (const auto& [name, e] : file->tensors())
        tensors.push_back(
            {name, e.dtype, e.shape, std::vector<uint8_t>(e.data, e.data + e.n_bytes)});
    }
    edit(tensors);
    const std::vector<uint8_t> bytes = serialize_safetensors(tensors);
    write_bytes(dir_.file("model.safetensors"), bytes);
  }
  test::TempDir dir_;
  LlamaHostWeights weights_;
};

TEST_F(LlamaHfBadInput, MissingTensor) {
  edit_tensors([](std::vector<TensorToWrite>& t) {
    std::erase_if(t, [](const auto& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  EXPECT_THAT(
      load_error(dir_.path()),
      AllOf(HasSubstr("missing tensor 'layers.1.mlp.up_proj.weight'"), HasSubstr("[40, 24]")));
}

TEST_F(LlamaHfBadInput, WrongShape) {
  edit_tensors([](std::vector<TensorToWrite>& t) {
    for (auto& x : t)
      if (x.name == "model.layers.0.self_attn.k_proj.weight") {
        x.shape = {24, 12};  // transposed
      }
  });
  EXPECT_THAT(load_error(dir_.path()), AllOf(HasSubstr("'layers.0.self_attn.k_proj.weight'"),
                                             HasSubstr("has shape [24, 12], expected [12, 24]")));
}

TEST_F(LlamaHfBadInput, UntiedHeadWithoutLmHead) {
  edit_tensors([](std::vector<TensorToWrite>& t) {
    std::erase_if(t, [](const auto& x) { return x.name == "lm_head.weight"; });
  });
  EXPECT_THAT(load_error(dir_.path()), AllOf(HasSubstr("missing tensor 'lm_head.weight'"),
                                             HasSubstr("tie_word_embeddings")));
  // Saying the head is tied makes the same files valid.
  edit_config([](nlohmann::json& j) { j["tie_word_embeddings"] = true; });
  EXPECT_TRUE(load_model(dir_.path(), {}).is_ok());
}

TEST_F(LlamaHfBadInput, BiasesTheConfigPromises) {
  edit_config([](nlohmann::json& j) { j["attention_bias"] = true; });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("missing tensor 'layers.0.self_attn.q_proj.bias'"));
}

TEST_F(LlamaHfBadInput, ShardIndexNamingAMissingFile) {
  test::TempDir sharded;
  HfWriteOptions options;
  options.n_shards = 2;
  ASSERT_TRUE(write_llama_hf(sharded.path(), weights_, options).is_ok());
  ASSERT_TRUE(load_model(sharded.path(), {}).is_ok());
  std::filesystem::remove(sharded.file("model-00002-of-00002.safetensors"));
  EXPECT_THAT(load_error(sharded.path()),
              AllOf(HasSubstr("model.safetensors.index.json"),
                    HasSubstr("names shard 'model-00002-of-00002.safetensors', which is missing")));
}

TEST_F(LlamaHfBadInput, ImpossibleConfigs) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["num_key_value_heads"] = 3; },
       "num_key_value_heads (3) must divide num_attention_heads (4)"},
      {[](auto& j) { j["num_attention_heads"] = 0; }, "'num_attention_heads' must be a positive"},
      {[](auto& j) { j["num_hidden_layers"] = -1; }, "'num_hidden_layers' must be a positive"},
      {[](auto& j) { j.erase("hidden_size"); }, "missing required field 'hidden_size'"},
      {[](auto& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 5;
         j["num_key_value_heads"] = 5;
       },
       "num_attention_heads (5) must divide hidden_size (24)"},
      {[](auto& j) { j["head_dim"] = 5; }, "must be even for rotary embeddings"},
      {[](auto& j) { j["hidden_act"] = "gelu"; }, "hidden_act is \"gelu\""},
      {[](auto& j) { j["rms_norm_eps"] = -1; }, "'rms_norm_eps' must be a positive number"},
      {[](auto& j) {
         j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}};
       },
       "rope_scaling: type \"yarn\" is not supported"},
      {[](auto& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8}};
       },
       "missing field 'low_freq_factor'"},
      {[](auto& j) { j["eos_token_id"] = 99; }, "eos_token_id 99 is outside the vocabulary"},
      {[](auto& j) { j["tie_word_embeddings"] = "yes"; }, "'tie_word_embeddings' must be true"},
  };
  const std::string original = test::read_text(dir_.file("config.json"));
  for (const Case& c : cases) {
    test::write_text(dir_.file("config.json"), original);
    edit_config(c.edit);
    EXPECT_THAT(load_error(dir_.path()), AllOf(HasSubstr("config.json"), HasSubstr(c.message)));
  }
  test::write_text(dir_.file("config.json"), "{\"model_type\": \"llama\", ");
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("not valid JSON"));
}

TEST(LlamaConfig, DefaultsAndRopeScaling) {
  const std::string base = R"({"model_type": "mistral", "vocab_size": 100, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8,
      "num_key_value_heads": 2, "eos_token_id": [2, 3])";
  auto c = parse_llama_config(base + "}", "c.json");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->model.head_dim, 8);
  EXPECT_EQ(c->model.kv_dim(), 16);
  EXPECT_EQ(c->model.norm_eps, 1e-6f);     // MistralConfig's default
  EXPECT_EQ(c->sliding_window, 4096);      // MistralConfig's default window
  EXPECT_FALSE(c->model.tied_embeddings);  // tie_word_embeddings defaults to false
  EXPECT_EQ(c->model.eos_token_id, 2);     // first of a list
  auto no_window = parse_llama_config(base + R"(, "sliding_window": null})", "c.json");
  ASSERT_TRUE(no_window.is_ok());
  EXPECT_EQ(no_window->sliding_window, 0);

  // llama3 scaling (Llama 3.1): high frequencies kept, low ones divided by factor, the band
  // between blended.
  auto scaled = parse_llama_config(
      base + R"(, "rope_theta": 500000, "rope_scaling": {"rope_type": "llama3", "factor": 8,
      "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
      "c.json");
  ASSERT_TRUE(scaled.is_ok()) << scaled.message();
  LlamaConfig plain = scaled.value();
  plain.rope_scaling = RopeScaling{};
  const std::vector<float> f = llama_rope_frequencies(scaled.value());
  const std::vector<float> f0 = llama_rope_frequencies(plain);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0], f0[0]);            // wavelength 2 pi: untouched
  EXPECT_FLOAT_EQ(f[3], f0[3] / 8);  // wavelength 2 pi * 500000^(3/4) > 8192: divided
  auto linear =
      parse_llama_config(base + R"(, "rope_scaling": {"type": "linear", "factor": 2}})", "c.json");
  ASSERT_TRUE(linear.is_ok()) << linear.message();
  EXPECT_FLOAT_EQ(llama_rope_frequencies(linear.value())[1],
                  llama_rope_frequencies(no_window.value())[1] / 2);
}

TEST(LlamaConfig, Llama2cHeaderAsConfigJson) {
  test::TempDir dir;
  LlamaConfig lc = tiny_llama_config();
  lc.model.tied_embeddings = false;
  ASSERT_TRUE(write_llama2c(dir.file("m.bin"), random_llama_weights(lc, 4)).is_ok());
  auto text = llama2c_config_json(dir.file("m.bin"));
  ASSERT_TRUE(text.is_ok()) << text.message();
  auto parsed = parse_llama_config(text.value(), "derived");
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  EXPECT_EQ(parsed->model.n_kv_head, 2);
  EXPECT_EQ(parsed->model.n_head, 4);
  EXPECT_EQ(parsed->model.n_ctx, 32);
  EXPECT_EQ(parsed->model.norm_eps, 1e-5f);
  EXPECT_FALSE(parsed->model.tied_embeddings);
}

}  // namespace
}  // namespace kvlm
