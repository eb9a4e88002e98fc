// expect_error(result, {"part", ...}): the result failed, and its message names every part (the
// file, the field, what was expected, what was found). Loader and flag tests all ask this.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvlm::test {

template <typename R>
void expect_error(const R& r, const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.is_ok()) << "succeeded, but expected an error mentioning " << parts.at(0);
  for (const std::string& p : parts) {
    EXPECT_NE(r.message().find(p), std::string::npos)
        << "missing \"" << p << "\" in: " << r.message();
  }
}

}  // namespace kvlm::test
