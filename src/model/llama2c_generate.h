// run.c's generate() on kvlm's engine: the prompt encoded as run.c encodes it (BOS first),
// tokens chosen until max_new or until the model produces BOS (id 1), and the text run.c would
// print. With greedy choice this reproduces `./run model.bin -z tokenizer.bin -t 0 -n STEPS
// -i PROMPT` byte for byte, where max_new = llama2c_steps_to_max_new(STEPS, prompt_ids.size()).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "generate/generate.h"
#include "model/model.h"
#include "tokenizer/llama2c_tokenizer.h"

namespace kvlm {

struct Llama2cRun {
  std::vector<int32_t> prompt_ids;     // BOS + encoded prompt (just BOS for an empty prompt)
  std::vector<int32_t> generated_ids;  // chosen tokens; the BOS that stopped the run excluded
  bool stopped_on_bos = false;
  std::string output;  // exactly what run.c writes to stdout, its final "\n" included
};

// `select` chooses each token (default: greedy argmax, lowest id on ties, as run.c's -t 0).
// Fails when the tokenizer's vocabulary size differs from the model's, or max_new < 1.
Result<Llama2cRun> llama2c_generate(Model& model, const Llama2cTokenizer& tokenizer,
                                    std::string_view prompt, int max_new, const Parallel& par,
                                    TokenSelector select = nullptr, bool use_cache = true);

}  // namespace kvlm
