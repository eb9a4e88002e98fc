// llama2.c's stories260K and what run.c printed for it (../shared/data/stories260K, outside the
// repository): the one guard every test that reads those files starts with, and golden.json's
// cases, shared by the library's goldens (tests/model/llama_stories_test.cpp) and the program's
// (tests/cli/cli_stories_test.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tokenizer/llama2c_tokenizer.h"

// The shared-data guard for the three stories260K files (skip with a message, or fail under
// KVLM_REQUIRE_SHARED_DATA=1), then `dir` names their folder.
#define KVLM_REQUIRE_STORIES(dir)                                                   \
  KVLM_REQUIRE_SHARED_DATA("stories260K/stories260K.bin", "stories260K/tok512.bin", \
                           "stories260K/golden.json");                              \
  const std::string dir = ::kvlm::test::shared_data_path("stories260K")

namespace kvlm::test {

// One case of golden.json: run.c -t 0 -n steps -i prompt.
struct StoriesCase {
  std::string prompt;
  int steps = 0;                       // run.c's -n: positions, prompt and BOS included
  std::vector<int32_t> prompt_ids;     // BOS first, as run.c encodes
  std::vector<int32_t> generated_ids;  // new tokens (the BOS that ended the run excluded)
  std::vector<int32_t> token_ids;      // prompt_ids + generated_ids
  bool stopped_on_bos = false;
  std::string stdout_text;  // what run.c printed, its final "\n" included
  // --max-new for the same run: steps + 1 - prompt ids.
  int max_new() const { return llama2c_steps_to_max_new(steps, prompt_ids.size()); }
};

inline std::vector<StoriesCase> stories_cases(const std::string& dir) {
  const auto golden = nlohmann::json::parse(read_text(dir + "/golden.json"));
  std::vector<StoriesCase> cases;
  for (const auto& c : golden["cases"]) {
    StoriesCase s;
    s.prompt = c["prompt"].get<std::string>();
    s.steps = c["steps"].get<int>();
    s.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    s.generated_ids = c["generated_ids"].get<std::vector<int32_t>>();
    s.token_ids = c["token_ids"].get<std::vector<int32_t>>();
    s.stopped_on_bos = c["stopped_on_bos"].get<bool>();
    s.stdout_text = c["stdout"].get<std::string>();
    cases.push_back(std::move(s));
  }
  return cases;
}

}  // namespace kvlm::test
