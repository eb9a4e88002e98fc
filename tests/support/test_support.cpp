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

CommandResult run_kvlm(const std::string& args, const std::string& stdin_text) {
  TempDir dir;
  const std::string in = dir.file("in"), out = dir.file("out"), err = dir.file("err");
  write_text(in, stdin_text);
  const std::string command = std::string("'") + KVLM_BINARY + "' " + args + " >'" + out + "' 2>'" +
                              err + "' <'" + in + "'";
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, read_text(out), read_text(err)};
}

std::string source_dir() {
  return KVLM_SOURCE_DIR;
}

std::string shared_data_dir() {
  struct stat st {};
  const std::string dir = KVLM_SHARED_DATA_DIR;
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? dir : "";
}

}  // namespace kvlm::test
