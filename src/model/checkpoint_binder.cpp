#include "model/checkpoint_binder.h"

namespace kvlm {

CheckpointBinder::CheckpointBinder(const Checkpoint& checkpoint, std::vector<std::string> prefixes,
                                   const LoadOptions& options, OwnedTensors* owned)
    : checkpoint_(checkpoint),
      prefixes_(std::move(prefixes)),
      convert_(options.convert_weights),
      n_threads_(options.n_threads),
      owned_(owned) {}

Status CheckpointBinder::matrix(const std::string& name, int rows, int cols, WeightLayout layout,
                                WeightMatrix* out) const {
  return matrix(name, rows, cols, layout, prefixes_, out);
}

Status CheckpointBinder::matrix(const std::string& name, int rows, int cols, WeightLayout layout,
                                const std::vector<std::string>& prefixes, WeightMatrix* out) const {
  KVLM_ASSIGN_OR_RETURN(
      *out, checkpoint_.matrix(name, prefixes, rows, cols, layout, convert_, owned_, n_threads_));
  return Status::ok();
}

Status CheckpointBinder::vector(const std::string& name, const std::vector<int64_t>& shape,
                                const float** out) const {
  KVLM_ASSIGN_OR_RETURN(*out, checkpoint_.vector_f32(name, prefixes_, shape, owned_));
  return Status::ok();
}

Status CheckpointBinder::check_last_layer(const std::string& tensor, const std::string& field,
                                          int n_layer) const {
  if (checkpoint_.find(tensor, prefixes_)) return Status::ok();
  return Status::error(checkpoint_.description() + ": missing tensor '" + tensor +
                       "' (config.json says " + field + " " + std::to_string(n_layer) + ")");
}

}  // namespace kvlm
