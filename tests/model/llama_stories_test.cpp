// The acceptance check for the Llama path: karpathy's stories260K (a real model trained on
// TinyStories, GQA with 8 query heads over 4 KV heads) and its tok512 tokenizer, run through
// kvlm's library pipeline (load model.bin + tokenizer.bin, encode the prompt as run.c does,
// greedy generation stopping on BOS, output printed as run.c prints it) must reproduce
// llama2.c's run.c byte for byte: ../shared/data/stories260K/golden.json. (The same through
// the kvlm program: tests/cli/cli_stories_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kvlm/engine.h"
#include "model/llama.h"
#include "model/llama2c.h"
#include "model/loader.h"
#include "support/stories.h"
#include "support/test_support.h"
#include "tokenizer/llama2c_tokenizer.h"

namespace kvlm {
namespace {

// run.c's generate() through the engine: the prompt encoded as run.c does (BOS first), greedy
// tokens until max_new or until the model produces BOS, the text run.c prints.
struct RunC {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;  // the BOS that stopped the run excluded
  bool stopped_on_bos = false;
  std::string output;  // exactly what run.c writes to stdout, its final "\n" included
};

RunC run_c(const std::string& dir, const std::string& prompt, int max_new, bool cached = true,
           int threads = 1) {
  auto model = LoadedModel::load({dir + "/stories260K.bin", dir + "/tok512.bin", ""});
  EXPECT_TRUE(model.is_ok()) << model.message();
  EXPECT_TRUE(model.value()->run_c_conventions());
  EngineOptions options;
  options.max_running = 1;
  options.threads = threads;
  options.recompute_every_step = !cached;
  auto engine = Engine::create(model.value(), options);
  EXPECT_TRUE(engine.is_ok()) << engine.message();
  Request request;
  request.prompt_text = prompt;
  request.max_new_tokens = max_new;
  request.sampling.temperature = 0.0f;  // run.c's -t 0: argmax, lowest id on ties
  std::vector<Request> one;
  one.push_back(request);
  auto done = run_to_completion(*engine.value(), std::move(one));
  EXPECT_TRUE(done.is_ok()) << done.message();
  const Completion& c = done.value().at(0);
  RunC run{c.prompt_ids, c.ids, c.finish == FinishReason::kEos, ""};
  run.output = model.value()->display_text(c).value();
  return run;
}

TEST(LlamaStories, HeaderIsTheDocumentedGqaModel) {
  KVLM_REQUIRE_STORIES(dir);
  auto model = load_model(dir + "/stories260K.bin", {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  const ModelConfig& c = model.value()->config();
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.n_layer, 5);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_kv_head, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_ctx, 512);
  EXPECT_TRUE(c.tied_embeddings);
  // The GQA lever: K and V for 4 heads, not 8: 2 * 5 layers * 4 heads * 8 * 4 bytes per token.
  EXPECT_EQ(c.kv_bytes_per_token(sizeof(float)), 1280);
}

TEST(LlamaStories, PromptIdsMatchRunC) {
  KVLM_REQUIRE_STORIES(dir);
  auto tokenizer = Llama2cTokenizer::load(dir + "/tok512.bin", 512);
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.message();
  for (const test::StoriesCase& c : test::stories_cases(dir))
    EXPECT_EQ(tokenizer.value()->encode(c.prompt, true, false), c.prompt_ids) << c.prompt;
  EXPECT_EQ(tokenizer.value()->encode("", true, false), std::vector<int32_t>{1});
}

TEST(LlamaStories, GoldenTokensAndStdoutByteForByte) {
  KVLM_REQUIRE_STORIES(dir);
  const std::vector<test::StoriesCase> cases = test::stories_cases(dir);
  ASSERT_GE(cases.size(), 2u);
  for (const test::StoriesCase& c : cases) {
    const std::string& prompt = c.prompt;
    const int max_new = c.max_new();
    const RunC run = run_c(dir, prompt, max_new);
    // The golden holds at any thread count (GQA's 8 heads over 4 KV heads split across 3).
    EXPECT_EQ(run_c(dir, prompt, max_new, /*cached=*/true, /*threads=*/3).generated_ids,
              run.generated_ids)
        << prompt << ", 3 threads";
    EXPECT_EQ(run.prompt_ids, c.prompt_ids) << prompt;
    EXPECT_EQ(run.generated_ids, c.generated_ids) << prompt;
    EXPECT_EQ(run.stopped_on_bos, c.stopped_on_bos) << prompt;
    EXPECT_EQ(run.output, c.stdout_text) << prompt;
    // token_ids is the prompt followed by what was generated.
    std::vector<int32_t> all = run.prompt_ids;
    all.insert(all.end(), run.generated_ids.begin(), run.generated_ids.end());
    EXPECT_EQ(all, c.token_ids) << prompt;

    // Uncached generation recomputes everything each step (quadratic), so a prefix suffices.
    const int n_uncached = std::min(max_new, 40);
    const RunC uncached = run_c(dir, prompt, n_uncached, /*cached=*/false);
    EXPECT_EQ(uncached.generated_ids, std::vector<int32_t>(run.generated_ids.begin(),
                                                           run.generated_ids.begin() + n_uncached))
        << prompt;
  }
}

TEST(LlamaStories, EmptyPromptStartsFromBos) {
  KVLM_REQUIRE_STORIES(dir);
  const RunC run = run_c(dir, "", 40);
  EXPECT_EQ(run.prompt_ids, std::vector<int32_t>{1});
  ASSERT_FALSE(run.generated_ids.empty());
  // run.c's first printed piece follows BOS, so its leading space is dropped.
  ASSERT_FALSE(run.output.empty());
  EXPECT_NE(run.output[0], ' ');
  EXPECT_EQ(run.output.back(), '\n');
}

}  // namespace
}  // namespace kvlm
