#include "generate/generate.h"

#include <algorithm>
#include <chrono>

#include "kv/contiguous_kv_cache.h"
#include "kv/paged_kv_cache.h"

namespace kvlm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

Status validate_request(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                        int max_new_tokens, bool windowed) {
  const ModelConfig& c = model.config();
  if (prompts.empty()) return Status::error("no prompts given");
  if (max_new_tokens < 1)
    return Status::error("--max-new must be at least 1, found " + std::to_string(max_new_tokens));
  for (size_t s = 0; s < prompts.size(); ++s) {
    const std::string which = "prompt " + std::to_string(s + 1);
    if (prompts[s].empty()) return Status::error(which + " is empty: give at least one token");
    for (int32_t id : prompts[s])
      if (id < 0 || id >= c.n_vocab)
        return Status::error(which + ": token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(c.n_vocab) + ")");
    // The last new token is never fed back, so the model sees prompt + max_new - 1 positions.
    const int64_t needed = static_cast<int64_t>(prompts[s].size()) + max_new_tokens - 1;
    if (!windowed && needed > c.n_ctx)
      return Status::error(which + ": " + std::to_string(prompts[s].size()) + " tokens + " +
                           std::to_string(max_new_tokens) + " new tokens need " +
                           std::to_string(needed) + " positions, beyond the context length " +
                           std::to_string(c.n_ctx));
  }
  return Status::ok();
}

Result<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                const GenerateOptions& options, const Parallel& par) {
  KVLM_RETURN_IF_ERROR(validate_request(model, prompts, options.max_new_tokens,
                                        options.kv_storage.window.enabled()));
  const ModelConfig& c = model.config();
  const int n_seq = static_cast<int>(prompts.size());
  const size_t V = c.n_vocab;

  // One cache for the whole run, each sequence sized for prompt + max_new - 1 positions.
  std::vector<int> capacities;
  GenerateResult result;
  for (const auto& p : prompts) {
    capacities.push_back(static_cast<int>(p.size()) + options.max_new_tokens - 1);
    result.stats.prompt_tokens += static_cast<int64_t>(p.size());
  }
  // The cache: contiguous (one slab per sequence, sized for its whole run) or paged.
  KvStorageOptions storage = options.kv_storage;
  if (storage.dtype == KvDtype::fp8 && storage.fp8_k_scales.empty())
    storage.n_kv_head = c.n_kv_head;
  KVLM_RETURN_IF_ERROR(validate_kv_storage(storage, c.n_layer, c.kv_dim()));
  std::unique_ptr<PagedKvCache> owned_paged;
  PagedKvCache* paged = options.use_cache ? options.paged_cache : nullptr;
  if (options.use_cache && !paged && options.paged) {
    PagedKvCacheOptions po{options.paged->block_size, options.paged->kv_memory_bytes, 0, storage};
    const int B = std::max(options.paged->block_size, 1);  // create() rejects a bad size
    for (int capacity : capacities) po.token_budget += (capacity + B - 1) / B * B;
    KVLM_ASSIGN_OR_RETURN(auto made, PagedKvCache::create(c.n_layer, c.kv_dim(), po));
    owned_paged = std::move(made);
    paged = owned_paged.get();
  }
  const bool share = paged && (!options.paged || options.paged->share_prefixes);
  if (paged) {
    if (paged->n_layer() != c.n_layer || paged->kv_dim() != c.kv_dim())
      return Status::error("paged KV cache was made for another model shape");
    for (int s = 0; s < n_seq; ++s)
      if (paged->holds(s))
        return Status::error("paged KV cache: slot " + std::to_string(s) + " is in use");
    paged->reset_peak();
  }
  // Whatever happens, this request's sequences give their blocks back (cached prefixes stay).
  struct FreeOnExit {
    PagedKvCache* cache;
    int n;
    ~FreeOnExit() {
      for (int s = 0; cache && s < n; ++s) cache->free_sequence(s);
    }
  } free_on_exit{paged, n_seq};
  // With a window, cached: the prompts' prefill is the largest step, so each slab is a ring of
  // W - 1 + the longest prompt (the uncached mode writes whole sequences: no ring).
  int longest_prompt = 0;
  for (const auto& p : prompts)
    longest_prompt = std::max(longest_prompt, static_cast<int>(p.size()));
  ContiguousKvCache contiguous(c.n_layer, c.kv_dim(), paged ? std::vector<int>{} : capacities,
                               storage, options.use_cache ? longest_prompt : 0);
  KvCache& cache = paged ? static_cast<KvCache&>(*paged) : contiguous;

  std::vector<std::vector<int32_t>> sequences = prompts;  // prompt + generated so far
  result.tokens.assign(n_seq, {});
  std::vector<bool> done(n_seq, false);
  std::vector<float> logits;
  std::vector<SequenceChunk> chunks;
  std::vector<PositionsRequest> needs;
  for (int step = 0; step < options.max_new_tokens; ++step) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int> pending;
    for (int s = 0; s < n_seq; ++s)
      if (!done[s]) pending.push_back(s);  // finished sequences stop costing compute
    if (pending.empty()) break;
    // One forward per step, except a sharing prefill: a prompt waits for the wave computing
    // the blocks it shares with an earlier prompt, then starts after them.
    while (!pending.empty()) {
      std::vector<int> later;
      if (share && step == 0) later = defer_shared_prefills(*paged, sequences, &pending);
      chunks.clear();
      needs.clear();
      for (int s : pending) {
        const auto& tokens = sequences[s];
        SequenceChunk chunk{s, 0, tokens};
        if (options.use_cache && step > 0) {  // decode: only the newest token
          chunk.start_pos = static_cast<int>(tokens.size()) - 1;
        } else if (share) {  // prefill from the first position not cached
          KVLM_ASSIGN_OR_RETURN(auto cached, paged->match_prefix(s, tokens));
          chunk.start_pos = cached;
          result.stats.prompt_tokens_cached += cached;
        }
        chunk.tokens = std::span<const int32_t>(tokens).subspan(chunk.start_pos);
        result.stats.rows_computed += static_cast<int64_t>(chunk.tokens.size());
        chunks.push_back(chunk);
        needs.push_back({s, static_cast<int>(tokens.size())});
      }
      if (paged) KVLM_RETURN_IF_ERROR(paged->reserve_all(needs));  // the whole step, or none
      logits.resize(chunks.size() * V);
      KVLM_RETURN_IF_ERROR(model.forward(logits.data(), chunks, cache, par));
      for (size_t k = 0; k < chunks.size(); ++k) {
        const int s = chunks[k].seq;
        if (share) paged->register_full_blocks(s, sequences[s]);  // its full blocks become findable
        std::span<const float> row(logits.data() + k * V, V);
        if (options.observe) options.observe(step, s, row);
        const int32_t next = argmax(row);
        result.tokens[s].push_back(next);
        sequences[s].push_back(next);
        ++result.stats.generated_tokens;
        if (options.on_token && options.on_token(s, next)) done[s] = true;
        if (done[s] && paged) paged->free_sequence(s);
      }
      pending = std::move(later);
    }
    (step == 0 ? result.stats.prefill_seconds : result.stats.decode_seconds) +=
        seconds_since(start);
  }
  return result;
}

}  // namespace kvlm
