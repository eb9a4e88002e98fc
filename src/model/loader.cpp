#include "model/loader.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/gguf_model.h"
#include "model/gpt2_hf.h"
#include "model/llama2c.h"
#include "model/llama_hf.h"
#include "util/mapped_file.h"

namespace kvlm {

Result<std::unique_ptr<Model>> load_model(const std::string& path, const LoadOptions& options) {
  if (options.q4_k_mix) {
    KVLM_ASSIGN_OR_RETURN(auto stored, load_model(path, LoadOptions{}));
    const int n_threads = options.n_threads > 0 ? options.n_threads : omp_get_max_threads();
    auto mixed = restore_as_gguf(*stored, GgufTypes{DType::kQ4_K, true}, n_threads, path);
    if (!mixed) return Status::error("--weights q4_k_mix: " + mixed.status().message());
    return mixed;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Status::error(path + ": no such file or folder");
  if (!S_ISDIR(st.st_mode)) {
    if (has_gguf_magic(path)) return load_gguf_model(path, options);
    if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".bin") == 0) {
      KVLM_ASSIGN_OR_RETURN(auto model, load_llama2c(path, options));  // llama2.c's model.bin
      return std::unique_ptr<Model>(std::move(model));
    }
    return Status::error(path +
                         ": expected a model folder holding config.json and "
                         "model.safetensors, a GGUF file or a llama2.c model .bin file");
  }
  const std::string config_path = path + "/config.json";
  KVLM_ASSIGN_OR_RETURN(const std::string text, read_text_file(config_path));
  std::string model_type = "gpt2";  // GPT-2 configs predate the field in some fine-tunes
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.is_object() && j.contains("model_type") && j["model_type"].is_string())
      model_type = j["model_type"].get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return Status::error(config_path + ": not valid JSON: " + e.what());
  }
  if (model_type == "gpt2") {
    KVLM_ASSIGN_OR_RETURN(auto model, load_gpt2(path, options));
    return std::unique_ptr<Model>(std::move(model));
  }
  if (model_type == "llama" || model_type == "mistral") {
    KVLM_ASSIGN_OR_RETURN(auto model, load_llama_hf(path, options));
    return std::unique_ptr<Model>(std::move(model));
  }
  return Status::error(config_path + ": model_type \"" + model_type +
                       "\" is not supported (supported: gpt2, llama, mistral)");
}

Result<LoadOptions> load_options_for_weights(const std::string& name) {
  LoadOptions options;
  if (name.empty()) return options;
  const std::optional<GgufTypes> types = parse_gguf_types(name);
  if (!types)
    return Status::error("--weights: unknown type '" + name +
                         "' (expected f32, f16, bf16, q8_0, q4_0, q5_0, q4_k, q6_k or q4_k_mix)");
  if (types->q4_k_mix)
    options.q4_k_mix = true;
  else
    options.convert_weights = types->type;
  return options;
}

}  // namespace kvlm
