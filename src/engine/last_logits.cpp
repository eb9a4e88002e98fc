#include "engine/last_logits.h"

#include <map>

#include "generate/generate.h"  // validate_request
#include "model/model.h"

namespace kvlm {

namespace {

// Runs one request per prompt (prompt_ids, one new token) to the end, recording the logits
// row each samples from into rows[prompt index].
Status run_requests(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                    std::map<RequestId, size_t>* index) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt_ids = prompts[i];
    r.max_new_tokens = 1;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    KVLM_ASSIGN_OR_RETURN(const RequestId id, engine.submit(std::move(r)));
    (*index)[id] = i;
  }
  while (engine.has_unfinished())
    for (const Event& event : engine.step())
      if (event.finish == FinishReason::kError) return Status::error(event.error);
  return Status::ok();
}

}  // namespace

Result<std::vector<std::vector<float>>> last_logits(
    std::shared_ptr<LoadedModel> model, const std::vector<std::vector<int32_t>>& prompts,
    const LastLogitsOptions& options) {
  if (!model) return Status::error("last_logits: no model");
  KVLM_RETURN_IF_ERROR(validate_request(model->model(), prompts, 1, options.kv_window > 0));
  int64_t n_tokens = 0;
  for (const auto& p : prompts) n_tokens += static_cast<int64_t>(p.size());

  std::vector<std::vector<float>> out(prompts.size());
  std::map<RequestId, size_t> wanted;  // the requests whose logits are the answer
  EngineOptions eo;
  eo.block_size = 1;  // every computed position is a full block, findable by the second request
  // Room for the first requests' positions, kept cached, and the second requests' last ones.
  eo.kv_tokens = 2 * n_tokens + static_cast<int64_t>(prompts.size());
  eo.max_running = static_cast<int>(prompts.size());
  eo.max_batch_tokens = static_cast<int>(std::min<int64_t>(n_tokens, 1 << 30));
  eo.threads = options.threads;
  eo.kv_dtype = options.kv_dtype;
  eo.kv_window = options.kv_window;
  eo.sink_tokens = options.sink_tokens;
  eo.recompute_every_step = !options.cached;
  eo.on_logits = [&](RequestId id, int, std::span<const float> row) {
    auto it = wanted.find(id);
    if (it != wanted.end()) out[it->second].assign(row.begin(), row.end());
  };
  KVLM_ASSIGN_OR_RETURN(auto engine, Engine::create(std::move(model), eo));

  int64_t expected_hits = 0;
  if (options.cached) {  // first, every prompt but its last token, where there is one
    std::vector<std::vector<int32_t>> heads;
    for (const auto& p : prompts)
      if (p.size() > 1) {
        heads.emplace_back(p.begin(), p.end() - 1);
        expected_hits += static_cast<int64_t>(heads.back().size());
      }
    std::map<RequestId, size_t> ignored;
    KVLM_RETURN_IF_ERROR(run_requests(*engine, heads, &ignored));
  }
  const int64_t hits_before = engine->stats().prefix_hits;
  KVLM_RETURN_IF_ERROR(run_requests(*engine, prompts, &wanted));
  // The promise is that the last token was computed against the cache; a miss would compute
  // the same bits in one pass and prove nothing, so it is an error, not a silent fallback.
  const int64_t hits = engine->stats().prefix_hits - hits_before;
  if (hits != expected_hits)
    return Status::error("last_logits: " + std::to_string(hits) +
                         " prompt positions found in the prefix cache, expected " +
                         std::to_string(expected_hits));
  return out;
}

}  // namespace kvlm
