// Runs a test body once per SIMD target this CPU can run, with every kernel pinned to it, and
// restores the default dispatch afterwards (also when the body fails an assertion).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "ops/dispatch.h"

namespace kvlm {

class PinnedTarget {
 public:
  explicit PinnedTarget(const SimdTarget& t) { pin_simd_target(t.id); }
  ~PinnedTarget() { pin_simd_target(0); }
  PinnedTarget(const PinnedTarget&) = delete;
  PinnedTarget& operator=(const PinnedTarget&) = delete;
};

template <class F>
void for_each_target(F&& body) {
  const std::vector<SimdTarget> targets = available_simd_targets();
  ASSERT_FALSE(targets.empty());
  for (const SimdTarget& t : targets) {
    SCOPED_TRACE("SIMD target " + t.name);
    PinnedTarget pin(t);
    ASSERT_EQ(active_simd_target(), t.name) << "pinning the target did not reach dispatch";
    body(t);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace kvlm
