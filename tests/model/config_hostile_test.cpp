// config.json values that claim more than the files hold: a billion layers must fail on the
// missing tensors before anything is sized by the claim, and widths whose products overflow must
// be refused with a message naming the field that is too large.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kv/kv_size.h"
#include "model/config.h"
#include "model/llama_config.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/expect_error.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

using test::expect_error;

// Rewrites DIR/config.json with `change` applied.
void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = nlohmann::json::parse(test::read_text(dir + "/config.json"));
  change(j);
  test::write_text(dir + "/config.json", j.dump());
}

Result<std::unique_ptr<Model>> load(const std::string& dir) {
  return load_model(dir, LoadOptions{});
}

TEST(ConfigHostile, Gpt2BillionLayersFailsOnTheMissingLayer) {
  test::TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  edit_config(dir.path(), [](nlohmann::json& j) { j["n_layer"] = 1000000000; });
  expect_error(load(dir.path()),
               {"missing tensor 'h.999999999.ln_1.weight'", "n_layer 1000000000"});
}

TEST(ConfigHostile, LlamaBillionLayersFailsOnTheMissingLayer) {
  test::TempDir dir;
  ASSERT_TRUE(write_llama_hf(dir.path(), random_llama_weights(tiny_llama_config(), 1), {}).is_ok());
  edit_config(dir.path(), [](nlohmann::json& j) { j["num_hidden_layers"] = 1000000000; });
  expect_error(load(dir.path()), {"missing tensor 'layers.999999999.input_layernorm.weight'",
                                  "num_hidden_layers 1000000000"});
}

const char kGpt2[] = R"({"vocab_size": 64, "n_layer": 2, "n_head": 4, "n_embd": 32)";

TEST(ConfigHostile, Gpt2HugeEmbeddingNamesNembdNotNinner) {
  // 4 * n_embd used to overflow int (undefined behaviour), then blame n_inner.
  const std::string text = R"({"vocab_size": 64, "n_layer": 2, "n_head": 4, "n_embd": 1000000000})";
  auto c = parse_gpt2_config(text, "c.json");
  expect_error(c, {"c.json", "n_embd 1000000000 is too large", "4 * n_embd"});
  EXPECT_EQ(c.message().find("n_inner"), std::string::npos) << c.message();
}

TEST(ConfigHostile, IntegersAboveTwoToThe30AreRefused) {
  expect_error(parse_gpt2_config(std::string(kGpt2) + R"(, "n_positions": 4294967296})", "c.json"),
               {"c.json", "'n_positions' must be a positive integer", "4294967296", "2^30"});
  expect_error(
      parse_gpt2_config(std::string(kGpt2) + R"(, "n_positions": 18446744073709551615})", "c.json"),
      {"'n_positions' must be a positive integer", "18446744073709551615"});
}

TEST(ConfigHostile, LlamaHeadDimTimesHeadsAboveTwoToThe30) {
  const std::string text = R"({"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4096, "head_dim": 1048576})";
  expect_error(parse_llama_config(text, "c.json"),
               {"c.json", "head count 4096 x head dimension 1048576 is above 2^30"});
}

TEST(ConfigHostile, GptTwoTokenIdListTakesTheFirst) {
  auto c = parse_gpt2_config(std::string(kGpt2) + R"(, "eos_token_id": [3, 4]})", "c.json");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->eos_token_id, 3);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{3, 4}));
  expect_error(parse_gpt2_config(std::string(kGpt2) + R"(, "bos_token_id": "x"})", "c.json"),
               {"'bos_token_id' must be a token id, found \"x\""});
}

TEST(ConfigHostile, KvSizeReadsFieldsTheSameWay) {
  // kv-size shares the reader: the same bound, the same words.
  expect_error(kv::kv_geometry_from_config_text(
                   R"({"n_layer": 1000000000000, "n_head": 12, "n_embd": 768})", "k.json"),
               {"k.json", "'n_layer' must be a positive integer", "2^30"});
}

}  // namespace
}  // namespace kvlm

namespace kvlm {
namespace {

TEST(ConfigHostile, NumberTooLargeForJsonIsAnErrorNotAnException) {
  // Found by the config_json seed int_overflow: nlohmann throws out_of_range for 1e400, which
  // kv-size's reader let escape the library.
  expect_error(kv::kv_geometry_from_config_text(R"({"n_layer": 1e400})", "k.json"),
               {"k.json", "not valid JSON", "1e400"});
  expect_error(parse_gpt2_config(R"({"n_layer": 1e400})", "c.json"), {"c.json", "not valid JSON"});
  expect_error(parse_llama_config(R"({"n_layer": 1e400})", "c.json"), {"c.json", "not valid JSON"});
}

}  // namespace
}  // namespace kvlm
