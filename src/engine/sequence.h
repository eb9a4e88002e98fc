// Sequence: a request inside the engine. Its tokens are the prompt followed by what it has
// generated; n_computed counts the leading positions whose K/V sit in the cache. Prefill and
// decode are one rule (as in vLLM v1): each step moves n_computed toward tokens.size(), and a
// step that reaches the end yields logits to sample the next token from.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/generation_state.h"
#include "kvlm/engine.h"

namespace kvlm {

struct Sequence {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // [n_prompt + generated]
  size_t n_prompt = 0;
  int n_computed = 0;  // positions [0, n_computed) are in the cache
  int slot = -1;       // its slot in the paged cache while admitted; -1 while waiting
  GenerationState state;

  int remaining() const { return static_cast<int>(tokens.size()) - n_computed; }
  TokenHistory history() const {
    std::span<const int32_t> all(tokens);
    return {all.first(n_prompt), all.subspan(n_prompt)};
  }
};

}  // namespace kvlm
