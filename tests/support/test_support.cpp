#include "support/test_support.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kvlm::test {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kvlm_test_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

ModelConfig tiny_gpt2_config() {
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  c.n_vocab = 64;
  c.n_ctx = 64;
  c.n_embd = 32;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 4;
  c.head_dim = 8;
  c.n_ff = 128;
  c.eos_token_id = 63;
  return c;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

CommandResult run_kvlm(const std::string& args, const std::string& stdin_text) {
  return run_program(KVLM_BINARY, args, stdin_text);
}

CommandResult run_program(const std::string& binary, const std::string& args,
                          const std::string& stdin_text) {
  TempDir dir;
  const std::string in = dir.file("in"), out = dir.file("out"), err = dir.file("err");
  write_text(in, stdin_text);
  const std::string command =
      "'" + binary + "' " + args + " >'" + out + "' 2>'" + err + "' <'" + in + "'";
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, read_text(out), read_text(err)};
}

std::string source_dir() {
  return KVLM_SOURCE_DIR;
}

std::string shared_data_path(const std::string& relative) {
  const char* from_env = std::getenv("KVLM_SHARED_DATA");
  const std::string dir =
      from_env != nullptr && *from_env != '\0' ? from_env : KVLM_SHARED_DATA_DIR;
  return relative.empty() ? dir : dir + "/" + relative;
}

std::string missing_shared_data(std::initializer_list<std::string> relatives) {
  std::string missing;
  for (const std::string& relative : relatives) {
    struct stat st {};
    const std::string path = shared_data_path(relative);
    if (stat(path.c_str(), &st) == 0 && (S_ISDIR(st.st_mode) || st.st_size > 0)) continue;
    missing += (missing.empty() ? "" : ", ") + relative;
  }
  if (missing.empty()) return "";
  return "shared reference data missing under " + shared_data_path() + ": " + missing +
         (shared_data_required()
              ? " (KVLM_REQUIRE_SHARED_DATA=1: CI requires it; mount ../shared/data)"
              : " (skipped; KVLM_REQUIRE_SHARED_DATA=1 makes this a failure)");
}

bool shared_data_required() {
  const char* v = std::getenv("KVLM_REQUIRE_SHARED_DATA");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace kvlm::test
