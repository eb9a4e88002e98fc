// Binding a Hugging Face checkpoint's tensors into weight views, one way for every architecture.
// A loader reads its architecture's tensor names into a plain weights struct (Gpt2Weights,
// LlamaWeights) through a CheckpointBinder, then hands the weights and the WeightStorage that
// keeps them valid to the model's create(). Every call checks the tensor's presence and shape
// (errors name the tensor, the checkpoint, expected and found), uses it in place from the mapping
// when it can, and otherwise converts it into the storage's owned tensors.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/status.h"
#include "model/checkpoint.h"
#include "util/mapped_file.h"

namespace kvlm {

// What every loader takes.
struct LoadOptions {
  std::optional<DType> convert_weights;  // --weights: convert matrices on load
  // --weights q4_k_mix: `kvlm convert --type q4_k_mix`'s per-tensor choice (load_model only:
  // the model is loaded as stored, then re-stored by gguf_model.h's restore_as_gguf).
  bool q4_k_mix = false;
  int n_threads = 0;  // --threads: what quantizes at load (0: omp_get_max_threads())
};

// What keeps a model's weight views valid: the mapped file (llama2.c model.bin), the open
// safetensors files, another loader's storage (a parsed GGUF file), and whatever the loader had
// to copy (permuted q/k, converted matrices, fp32 norm vectors).
struct WeightStorage {
  MappedFile file;
  std::optional<Checkpoint> checkpoint;
  std::shared_ptr<const void> other;
  OwnedTensors owned;
};

class CheckpointBinder {
 public:
  // `prefixes`: what the architecture's tensor names may start with, tried in order ("" = as
  // given). `options`: --weights, applied to matrices only, on options.n_threads.
  CheckpointBinder(const Checkpoint& checkpoint, std::vector<std::string> prefixes,
                   const LoadOptions& options, OwnedTensors* owned);

  // A 2-D weight [rows, cols] as a matrix view. `prefixes` overrides the binder's (lm_head sits
  // outside a model's prefix).
  Status matrix(const std::string& name, int rows, int cols, WeightLayout layout,
                WeightMatrix* out) const;
  Status matrix(const std::string& name, int rows, int cols, WeightLayout layout,
                const std::vector<std::string>& prefixes, WeightMatrix* out) const;
  // A tensor of exactly `shape`, widened to an owned fp32 array.
  Status vector(const std::string& name, const std::vector<int64_t>& shape,
                const float** out) const;
  // config.json's layer count is a claim, the tensors are what the files hold: the last layer's
  // `tensor` must exist before anything is sized by it. `field` names the config field.
  Status check_last_layer(const std::string& tensor, const std::string& field, int n_layer) const;

  const Checkpoint& checkpoint() const { return checkpoint_; }
  OwnedTensors* owned() const { return owned_; }

 private:
  const Checkpoint& checkpoint_;
  std::vector<std::string> prefixes_;
  std::optional<DType> convert_;
  int n_threads_;
  OwnedTensors* owned_;
};

}  // namespace kvlm
