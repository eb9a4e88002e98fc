// load_model: opens whatever checkpoint the user points at and returns the matching Model.
// A Hugging Face folder is recognised by config.json's model_type.
#pragma once

#include <memory>
#include <string>

#include "model/gpt2.h"
#include "model/model.h"

namespace kvlm {

Result<std::unique_ptr<Model>> load_model(const std::string& path, const LoadOptions& options);

// The LoadOptions of `--weights NAME`: "" (as stored), a type name (f32, f16, bf16, q8_0, q4_0,
// q5_0, q4_k, q6_k) or q4_k_mix; anything else is an error naming the flag.
Result<LoadOptions> load_options_for_weights(const std::string& name);

}  // namespace kvlm
