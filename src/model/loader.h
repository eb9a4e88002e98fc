// load_model: opens whatever checkpoint the user points at and returns the matching Model.
// A Hugging Face folder is recognised by config.json's model_type.
#pragma once

#include <memory>
#include <string>

#include "model/gpt2.h"
#include "model/model.h"

namespace kvlm {

Result<std::unique_ptr<Model>> load_model(const std::string& path, const LoadOptions& options);

}  // namespace kvlm
