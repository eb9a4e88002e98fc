// Helpers shared by kvlm's tests: temporary folders, small GPT-2 models written as real files,
// running the built kvlm program, and the one guard for the shared reference data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/random_gpt2.h"
#include "ops/dtype.h"

namespace kvlm {

// Parameterised suites over a weight dtype print it by name (SuiteNames checks every suite).
inline void PrintTo(DType dtype, std::ostream* os) {
  *os << dtype_name(dtype);
}

}  // namespace kvlm

namespace kvlm::test {

// A fresh empty folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A GPT-2 small enough for unit tests and sanitizer builds (vocab 64, 2 layers, 4 heads, 32 wide).
ModelConfig tiny_gpt2_config();

void write_text(const std::string& path, const std::string& text);
std::string read_text(const std::string& path);

struct CommandResult {
  int exit_code;
  std::string out;  // standard output
  std::string err;  // standard error
};
// `text` as one shell word (single-quoted, embedded quotes escaped).
std::string shell_quote(const std::string& text);
// Runs `binary` with `args` (a shell-quoted string), feeding `stdin_text`.
CommandResult run_program(const std::string& binary, const std::string& args,
                          const std::string& stdin_text = "");
// The same, for the kvlm binary.
CommandResult run_kvlm(const std::string& args, const std::string& stdin_text = "");

std::string source_dir();

// The shared reference data (real tokenizers, stories260K, their goldens): ../shared/data,
// or the folder named by the environment variable KVLM_SHARED_DATA (tests use it to hide the
// data). shared_data_path("stories260K/tok512.bin") is that file's path, present or not.
std::string shared_data_path(const std::string& relative = "");
// "" when every named file is there (and not empty); otherwise the one message saying which are
// missing, where they were looked for, and what to do.
std::string missing_shared_data(std::initializer_list<std::string> relatives);
// KVLM_REQUIRE_SHARED_DATA=1 (set by .ci/run): a missing file fails the test instead of
// skipping it, so nothing the README claims can vanish from CI unnoticed.
bool shared_data_required();

}  // namespace kvlm::test

// The guard every test that reads ../shared/data starts with (in its body or in SetUp):
//   KVLM_REQUIRE_SHARED_DATA("stories260K/stories260K.bin", "stories260K/golden.json");
// skips the test when a file is missing, or fails it under KVLM_REQUIRE_SHARED_DATA=1.
#define KVLM_REQUIRE_SHARED_DATA(...)                                                     \
  if (const std::string kvlm_missing_ = ::kvlm::test::missing_shared_data({__VA_ARGS__}); \
      kvlm_missing_.empty()) {                                                            \
  } else if (::kvlm::test::shared_data_required())                                        \
    FAIL() << kvlm_missing_;                                                              \
  else                                                                                    \
    GTEST_SKIP() << kvlm_missing_

// The same rule for a test that needs a tool rather than data (node and the openai package for
// the server's end-to-end test, python3 for scripts): skips with `why` when `ok` is false, or
// fails under KVLM_REQUIRE_SHARED_DATA=1, so CI cannot pass without running it.
#define KVLM_REQUIRE_TOOL(ok, why)                                      \
  if (ok) {                                                             \
  } else if (::kvlm::test::shared_data_required())                      \
    FAIL() << why << " (required: CI sets KVLM_REQUIRE_SHARED_DATA=1)"; \
  else                                                                  \
    GTEST_SKIP() << why

namespace kvlm::test {}  // namespace kvlm::test
