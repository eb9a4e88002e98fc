// Bad checkpoints get a clear error naming the file, the tensor or field, and what was
// expected against what was found; never a crash or a silently wrong model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "model/loader.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

using ::testing::HasSubstr;

std::string load_error(const std::string& dir) {
  auto model = load_model(dir, {});
  EXPECT_FALSE(model.is_ok()) << "loading " << dir << " should fail";
  return model.is_ok() ? "" : model.message();
}

// A valid tiny model folder whose files each test then breaks.
class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_random_gpt2(dir_.path(), test::tiny_gpt2_config(), {}).is_ok());
    ASSERT_TRUE(load_model(dir_.path(), {}).is_ok());
  }
  std::string weights() const { return dir_.file("model.safetensors"); }
  std::string config() const { return dir_.file("config.json"); }
  // Rewrites the safetensors header through `edit`, keeping the data bytes.
  void edit_header(const std::function<void(nlohmann::json&)>& edit) {
    std::string bytes = test::read_text(weights());
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    edit(header);
    std::string text = header.dump();
    while ((8 + text.size()) % 8) text += ' ';
    const uint64_t m = text.size();
    std::string out(reinterpret_cast<const char*>(&m), 8);
    test::write_text(weights(), out + text + bytes.substr(8 + n));
  }
  void edit_config(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(test::read_text(config()));
    edit(j);
    test::write_text(config(), j.dump());
  }
  test::TempDir dir_;
};

TEST(LoaderErrors, MissingFolder) {
  EXPECT_THAT(load_error("/nonexistent/kvlm-model"), HasSubstr("no such file or folder"));
}

TEST(LoaderErrors, FolderWithoutWeights) {
  test::TempDir dir;
  test::write_text(dir.file("config.json"), gpt2_config_json(test::tiny_gpt2_config()));
  EXPECT_THAT(load_error(dir.path()), HasSubstr("no model.safetensors"));
}

TEST(LoaderErrors, FolderWithoutConfig) {
  test::TempDir dir;
  EXPECT_THAT(load_error(dir.path()), HasSubstr("config.json: no such file"));
}

TEST_F(BrokenCheckpoint, MalformedConfigJson) {
  test::write_text(config(), "{\"n_embd\": 32,");
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("config.json: not valid JSON"));
}

TEST_F(BrokenCheckpoint, ConfigMissingField) {
  edit_config([](nlohmann::json& j) { j.erase("n_layer"); });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("missing required field 'n_layer'"));
}

TEST_F(BrokenCheckpoint, ConfigHeadsNotDividingWidth) {
  edit_config([](nlohmann::json& j) { j["n_head"] = 5; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("n_head (5) must divide n_embd (32)"));
}

TEST_F(BrokenCheckpoint, ConfigZeroOrNegativeSizes) {
  edit_config([](nlohmann::json& j) { j["n_embd"] = 0; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("'n_embd' must be a positive integer"));
  edit_config([](nlohmann::json& j) {
    j["n_embd"] = 32;
    j["vocab_size"] = -3;
  });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("'vocab_size' must be a positive integer"));
  edit_config([](nlohmann::json& j) {
    j["vocab_size"] = 64;
    j["n_layer"] = "two";
  });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("'n_layer' must be a positive integer, found \"two\""));
}

TEST_F(BrokenCheckpoint, ConfigUnsupportedModelType) {
  edit_config([](nlohmann::json& j) { j["model_type"] = "bert"; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("model_type \"bert\" is not supported"));
}

TEST_F(BrokenCheckpoint, ConfigShapeDisagreesWithTensors) {
  edit_config([](nlohmann::json& j) { j["n_layer"] = 3; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("missing tensor 'h.2.ln_1.weight'"));
  edit_config([](nlohmann::json& j) {
    j["n_layer"] = 2;
    j["vocab_size"] = 65;
  });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("tensor 'wte.weight' has shape [64, 32], expected [65, 32]"));
}

TEST_F(BrokenCheckpoint, FileShorterThanLengthField) {
  test::write_text(weights(), "abc");
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("too short for the 8-byte"));
}

TEST_F(BrokenCheckpoint, HeaderLongerThanFile) {
  std::string bytes = test::read_text(weights());
  const uint64_t huge = bytes.size() * 2;
  std::memcpy(bytes.data(), &huge, 8);
  test::write_text(weights(), bytes);
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("exceeds the file"));
}

TEST_F(BrokenCheckpoint, HeaderNotJson) {
  std::string bytes = test::read_text(weights());
  bytes[8] = '!';
  test::write_text(weights(), bytes);
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("header is not valid JSON"));
}

TEST_F(BrokenCheckpoint, OffsetsBeyondData) {
  edit_header([](nlohmann::json& h) { h["ln_f.bias"]["data_offsets"][1] = 1u << 30; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("tensor 'ln_f.bias': data_offsets end at byte"));
}

TEST_F(BrokenCheckpoint, OffsetsReversed) {
  edit_header([](nlohmann::json& h) {
    auto& o = h["ln_f.bias"]["data_offsets"];
    std::swap(o[0], o[1]);
  });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("end before they begin"));
}

TEST_F(BrokenCheckpoint, OverlappingTensors) {
  edit_header(
      [](nlohmann::json& h) { h["ln_f.bias"]["data_offsets"] = h["ln_f.weight"]["data_offsets"]; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("overlap"));
}

TEST_F(BrokenCheckpoint, DtypeShapeMismatch) {
  edit_header([](nlohmann::json& h) { h["ln_f.bias"]["dtype"] = "F16"; });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("tensor 'ln_f.bias': dtype F16 and shape [32] need 64 bytes, but "
                        "data_offsets span 128"));
}

TEST_F(BrokenCheckpoint, UnknownDtype) {
  edit_header([](nlohmann::json& h) { h["ln_f.bias"]["dtype"] = "Q4_K"; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("unknown dtype 'Q4_K'"));
}

TEST_F(BrokenCheckpoint, UnsupportedDtypeForWeight) {
  edit_header([](nlohmann::json& h) {
    h["ln_f.bias"]["dtype"] = "I32";  // 4 bytes like F32: the header is consistent
  });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("tensor 'ln_f.bias' has dtype I32, expected F32, F16 or BF16"));
}

TEST_F(BrokenCheckpoint, MissingTensor) {
  edit_header([](nlohmann::json& h) {
    // Keep the data tiled: turn the tensor into an ignored one under another name.
    h["renamed"] = h["h.1.mlp.c_fc.bias"];
    h.erase("h.1.mlp.c_fc.bias");
  });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("missing tensor 'h.1.mlp.c_fc.bias' of shape [128]"));
}

TEST_F(BrokenCheckpoint, WrongShape) {
  edit_header([](nlohmann::json& h) { h["h.0.attn.c_proj.weight"]["shape"] = {16, 64}; });
  EXPECT_THAT(load_error(dir_.path()),
              HasSubstr("tensor 'h.0.attn.c_proj.weight' has shape [16, 64], expected [32, 32]"));
}

TEST_F(BrokenCheckpoint, NegativeShape) {
  edit_header([](nlohmann::json& h) { h["ln_f.bias"]["shape"] = {-32}; });
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("shape entries must be non-negative"));
}

TEST_F(BrokenCheckpoint, DataSectionWithGap) {
  std::string bytes = test::read_text(weights());
  test::write_text(weights(), bytes + std::string(16, '\0'));
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("tensors cover only"));
}

TEST_F(BrokenCheckpoint, TruncatedData) {
  std::string bytes = test::read_text(weights());
  test::write_text(weights(), bytes.substr(0, bytes.size() - 100));
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("but the data section holds only"));
}

TEST(LoaderErrors, ShardIndexNamingMissingFile) {
  test::TempDir dir;
  test::write_text(dir.file("config.json"), gpt2_config_json(test::tiny_gpt2_config()));
  test::write_text(
      dir.file("model.safetensors.index.json"),
      R"({"metadata":{},"weight_map":{"wte.weight":"model-00001-of-00002.safetensors"}})");
  EXPECT_THAT(load_error(dir.path()),
              HasSubstr("names shard 'model-00001-of-00002.safetensors', which is missing"));
}

// A model split over two shards loads and computes exactly what the single file does.
TEST(LoaderErrors, ShardedCheckpointLoads) {
  test::TempDir single, sharded;
  ASSERT_TRUE(write_random_gpt2(single.path(), test::tiny_gpt2_config(), {}).is_ok());
  auto file = SafetensorsFile::open(single.file("model.safetensors"));
  ASSERT_TRUE(file.is_ok());
  std::vector<TensorToWrite> parts[2];
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", nlohmann::json::object()}};
  int k = 0;
  for (const auto& [name, entry] : file->tensors()) {
    const int shard = (k++) % 2;
    parts[shard].push_back({name, entry.dtype, entry.shape,
                            std::vector<uint8_t>(entry.data, entry.data + entry.n_bytes)});
    index["weight_map"][name] = "part" + std::to_string(shard) + ".safetensors";
  }
  for (int s = 0; s < 2; ++s) {
    auto bytes = serialize_safetensors(parts[s]);
    ASSERT_TRUE(write_file(sharded.file("part" + std::to_string(s) + ".safetensors"), bytes.data(),
                           bytes.size())
                    .is_ok());
  }
  test::write_text(sharded.file("model.safetensors.index.json"), index.dump());
  test::write_text(sharded.file("config.json"), test::read_text(single.file("config.json")));
  auto model = load_model(sharded.path(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
}

}  // namespace
}  // namespace kvlm
