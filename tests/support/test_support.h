// Helpers shared by kvlm's tests: temporary folders, small GPT-2 models written as real files,
// running the built kvlm program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/random_gpt2.h"

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
// Runs the kvlm binary with `args` (a shell-quoted string), feeding `stdin_text`.
CommandResult run_kvlm(const std::string& args, const std::string& stdin_text = "");

std::string source_dir();
std::string shared_data_dir();  // empty when ../shared/data is absent

}  // namespace kvlm::test
