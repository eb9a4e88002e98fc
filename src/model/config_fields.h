// ConfigFields: the one reader of config.json members (Hugging Face model configs). GPT-2's and
// the Llama family's configs (model/config.cpp, model/llama_config.cpp) and `kvlm kv-size`
// (kv/kv_size.cpp) all read their fields through it, so every field is checked the same way and
// every error names the file and the field, what was expected and what was found.
//
// Integers are bounded by kMaxInt (2^30): no real model has a dimension, layer count or
// vocabulary that large, and the bound keeps products of two of them (n_head * head_dim,
// 4 * n_embd) inside 64 bits and sizes computed from a file's claims small enough to check
// against the bytes the file really has.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

class ConfigFields {
 public:
  static constexpr int64_t kMaxInt = int64_t{1} << 30;

  // `object` must outlive the reader. `needs`, when given, is added to a missing-field error
  // ("GPT-2 configs need n_layer, n_head, n_embd").
  ConfigFields(const nlohmann::json& object, std::string source, std::string needs = "");

  // Parses `text` as JSON and checks that it is an object; errors name `source`.
  static Result<nlohmann::json> parse_object(std::string_view text, const std::string& source);

  bool has(const char* field) const;  // present and not null
  const nlohmann::json& at(const char* field) const { return object_.at(field); }
  const std::string& source() const { return source_; }
  // "<source>: <what>".
  Status error(const std::string& what) const;

  // A required integer in [1, kMaxInt].
  Result<int64_t> positive(const char* field) const;
  // An integer in [1, kMaxInt], or `fallback` when absent or null.
  Result<int64_t> positive_or(const char* field, int64_t fallback) const;
  // An integer in [0, kMaxInt], or `fallback` when absent or null.
  Result<int64_t> non_negative_or(const char* field, int64_t fallback) const;
  // A finite number > 0, or `fallback` when absent or null.
  Result<double> positive_number_or(const char* field, double fallback) const;
  Result<bool> boolean_or(const char* field, bool fallback) const;
  // The string, or `fallback` when absent, null or not a string.
  std::string string_or(const char* field, std::string fallback) const;
  // A list of integers in [0, kMaxInt] (layer indices); empty when absent or null.
  Result<std::set<int64_t>> index_set(const char* field) const;
  // A token id in [0, n_vocab), or a non-empty list of them (Llama 3.1 lists several eos
  // ids); empty when absent or null.
  Result<std::vector<int32_t>> token_ids(const char* field, int64_t n_vocab) const;

  // The same into a config's fields.
  Status positive(const char* field, int* out) const;
  Status positive_or(const char* field, int64_t fallback, int* out) const;
  Status positive_number_or(const char* field, float fallback, float* out) const;
  Status boolean_or(const char* field, bool fallback, bool* out) const;
  // token_ids: *first gets the first (left as it was when absent), *all (when given) every one.
  Status token_id(const char* field, int64_t n_vocab, int* first,
                  std::vector<int32_t>* all = nullptr) const;

 private:
  Result<int64_t> integer_in(const char* field, int64_t low) const;

  const nlohmann::json& object_;
  std::string source_;
  std::string needs_;
};

}  // namespace kvlm
