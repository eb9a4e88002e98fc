// The engine: many generation requests sharing one model and one paged KV cache, run by
// continuous batching. This header (with the others in include/kvlm/) is all an embedding
// program, the server or a binding needs; nothing here exposes src/.
//
// A request's life: submit() puts it in the waiting queue; each step() the scheduler gives
// running sequences their next token first, then admits waiting requests in arrival order
// (their prompts prefilled in chunks within the step's token budget, cached prefixes reused),
// runs ONE Model::forward over the mixed batch, samples, and returns what happened as events.
// A finished request gives its blocks back; its full blocks stay cached for later prompts.
// When the cache runs out mid-generation, the most recently admitted sequence is preempted
// (its blocks freed, itself put back at the head of the queue) and recomputed later.
//
// Exactness: a request's tokens and logits are bitwise the same whether it runs alone or among
// others, whenever it arrives, however its prompt is chunked, with or without a prefix hit,
// preempted or not, at any thread count (each sequence owns its sampler RNG, seeded from the
// request; every kernel's reduction order is fixed; see docs/ARCHITECTURE.md).
//
// Threads: one thread drives step(); submit() and cancel() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvlm/sampling.h"
#include "kvlm/status.h"

namespace kvlm {

class Model;        // src/model/model.h: an architecture's forward pass
class Tokenizer;    // src/tokenizer/tokenizer.h: text <-> ids
struct Completion;  // below

// What to load: a Hugging Face folder, a llama2.c .bin (or any format the loader knows).
struct ModelSource {
  std::string path;
  std::string tokenizer_path;  // empty: the model folder's own tokenizer files, if any
  std::string weights;         // "" (as stored) or a --weights type: convert matrices on load
  int n_threads = 0;           // threads that convert them (0: every core); same bytes at any
};

// A model with its tokenizer (which may be absent: ids-only use) and the generation
// conventions decided from both in one place: BOS, end-of-sequence ids, llama2.c's run.c rules.
class LoadedModel {
 public:
  static Result<std::shared_ptr<LoadedModel>> load(const ModelSource& source);
  // For tests and the demo: a model already in memory.
  static Result<std::shared_ptr<LoadedModel>> from_parts(
      std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tokenizer);

  Model& model() const { return *model_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  int n_ctx() const;
  int n_vocab() const;
  // Ids that end a sequence (all of the config's eos ids; llama2.c models: BOS, as run.c).
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  // True for llama2.c tokenizers: run.c's conventions (text printed = prompt + new text,
  // the BOS that ends a run is neither kept nor printed).
  bool run_c_conventions() const { return run_c_; }
  // The prompt a text becomes: encoded, BOS first when the tokenizer's post-processor (or
  // run.c) says so, the beginning-of-text token for an empty GPT-2 prompt. Needs a tokenizer.
  Result<std::vector<int32_t>> encode_prompt(const std::string& text, bool allow_special) const;
  // What a terminal shows for a finished request: its new text, or for run.c conventions
  // exactly what run.c prints (the prompt and the new text, then "\n").
  Result<std::string> display_text(const Completion& completion) const;

 private:
  LoadedModel() = default;
  std::shared_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> end_ids_;
  bool run_c_ = false;
};

using RequestId = uint64_t;

struct Request {
  // The prompt: text, encoded by LoadedModel::encode_prompt (an empty text starts from BOS),
  // or, when prompt_text is unset, ids used as they are.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;
  bool allow_special = false;  // text such as <|endoftext|> becomes that token
  int max_new_tokens = 16;
  SamplingParams sampling;
  // This sequence's RNG is Rng(sequence_seed(sampling.seed, seed_index)): choice i of a request
  // (the CLI's i-th prompt, the server's n-th choice) draws from its own stream.
  uint64_t seed_index = 0;
  std::vector<std::string> stop;  // stop strings (the stop text is not part of the output)
  std::vector<int32_t> stop_ids;  // more ids that end the sequence, beside the model's own
  bool ignore_eos = false;        // the model's end ids do not stop it (stop_ids still do)
  // Log-probabilities of each new token (from the raw model distribution): unset, none; 0, the
  // chosen token's only (OpenAI's logprobs: true, top_logprobs: 0); n in 1..20, with the n most
  // likely alternatives too.
  std::optional<int> logprobs;
};

enum class FinishReason { kNone, kLength, kEos, kStop, kCancelled, kError };
const char* finish_reason_name(FinishReason reason);  // "length", "eos", "stop", ...

// One thing that happened to a request during a step.
struct Event {
  RequestId id = 0;
  int32_t token = -1;  // the new token; -1 when the event carries none (cancel, final flush)
  std::string text;    // text completed by this event: whole UTF-8 characters only
  std::optional<LogprobInfo> logprobs;        // when the request asked for them
  FinishReason finish = FinishReason::kNone;  // set on the request's last event
  std::string error;                          // with kError: what went wrong
};

struct EngineOptions {
  size_t kv_memory_bytes = 0;  // paged cache arena in bytes; or:
  int64_t kv_tokens = 0;       // room for this many positions; both 0: max_running contexts
                               // (both given: the arena holds at most kv_tokens positions)
  int block_size = 16;         // positions per cache block
  int max_batch_tokens = 512;  // token budget of one step (decode tokens + prefill chunks)
  int max_running = 16;        // sequences running at once
  int threads = 0;             // 0: all cores
  bool prefix_caching = true;  // reuse cached blocks of earlier prompts
  // How the cache stores keys and values: "f32", "f16", "bf16", "q8_0" (int8 + an fp16 scale
  // per 32 values) or "fp8" (e4m3, scales per layer and KV head calibrated once per model when
  // the engine is made). Exactness holds per dtype (docs/kv_cache_quantization.md).
  std::string kv_dtype = "f32";
  // Attention sinks + sliding window (StreamingLLM; rotary models only, docs/sliding_window.md):
  // each row attends over the first sink_tokens positions and the last kv_window - sink_tokens,
  // renumbered within the window; blocks nobody reads again are evicted, so a sequence may run
  // past the context with its cache bounded by the window. kv_window 0: off. Needs
  // kv_window > sink_tokens and kv_window >= block_size.
  int kv_window = 0;
  int sink_tokens = 0;
  // The uncached baseline: every step recomputes each running sequence from position 0 (same
  // forward code, so the same bits as the cache; only the work differs).
  bool recompute_every_step = false;
  // Sees every logits row a request samples from, before sampling ([n_vocab]; `step` counts the
  // request's tokens generated before this one). For tests, perplexity and tools; optional.
  std::function<void(RequestId id, int step, std::span<const float> logits)> on_logits;
};

// Counters for metrics and benchmarks (monotonic, except the gauges).
struct EngineStats {
  int running = 0;           // gauge
  int waiting = 0;           // gauge
  double kv_usage = 0;       // gauge: fraction of cache blocks held by sequences
  size_t kv_bytes_peak = 0;  // most cache bytes held at once
  // The cache's capacity, fixed when the engine is made, and its blocks as of the last step
  // (valid before the first step too). Free blocks include those holding cached prefixes that
  // no sequence holds: they are handed out again when needed.
  int kv_block_size = 0;      // positions per block
  int kv_blocks_total = 0;    // blocks in the arena
  int kv_blocks_used = 0;     // gauge: held by at least one sequence
  int kv_blocks_free = 0;     // gauge: total - used
  size_t kv_bytes_total = 0;  // the arena's bytes (K and V, every layer)
  int64_t steps = 0;
  int64_t prompt_tokens = 0;  // prompt tokens of admitted requests
  int64_t generated_tokens = 0;
  int64_t rows_computed = 0;   // token positions run through the model
  int64_t prefix_queries = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hits = 0;     // of those, found cached
  int64_t preemptions = 0;
  double prefill_seconds = 0;      // steps that computed prompt positions
  double decode_seconds = 0;       // steps that only decoded
  int64_t decode_step_tokens = 0;  // tokens sampled in those steps
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<LoadedModel> model,
                                                const EngineOptions& options);
  ~Engine();

  // Queues a request. Refused at once, with both numbers, when it could never run: an empty
  // prompt, ids outside the vocabulary, prompt + max_new_tokens beyond the context or beyond
  // the whole cache; bad sampling values; text without a tokenizer. Thread-safe.
  Result<RequestId> submit(Request request);
  // Ends a request: its next step() reports kCancelled and frees its blocks. Unknown or
  // finished ids are ignored. Thread-safe.
  void cancel(RequestId id);
  // One iteration: schedule, one forward over the mixed batch, sample. Returns the step's
  // events (empty when there was nothing to do). Call from one thread only.
  std::vector<Event> step();
  // Requests submitted and not finished (their final event not yet returned by step()).
  bool has_unfinished() const;
  EngineStats stats() const;
  const LoadedModel& model() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A request's whole result, for callers that do not stream.
struct Completion {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> ids;  // new tokens (an end id that stopped it included, except run.c's BOS)
  std::string text;          // new text (stop string excluded)
  FinishReason finish = FinishReason::kNone;
  std::vector<LogprobInfo> logprobs;
};

// Submits every request, steps until all finish, returns their completions in order.
// on_event (optional) sees each event as it happens (streaming).
Result<std::vector<Completion>> run_to_completion(
    Engine& engine, std::vector<Request> requests,
    const std::function<void(const Event&)>& on_event = {});

}  // namespace kvlm
