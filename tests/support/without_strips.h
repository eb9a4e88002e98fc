// Loads without column strips for a scope (`KVLM_STRIPS=0`: ops/weight_strips.h), so that a test
// can compare a model read from its strips with the same checkpoint read as stored. Restores the
// default (on).
#pragma once

#include "ops/weight_strips.h"

namespace kvlm::test {

class WithoutStrips {
 public:
  WithoutStrips() { set_weight_strips_enabled(false); }
  ~WithoutStrips() { set_weight_strips_enabled(true); }
  WithoutStrips(const WithoutStrips&) = delete;
  WithoutStrips& operator=(const WithoutStrips&) = delete;
};

}  // namespace kvlm::test
