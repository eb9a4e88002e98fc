#include "support/node_package.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

#include "support/test_support.h"

namespace kvlm::test {

namespace fs = std::filesystem;

int run_shell(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string prepare_node_package(const std::string& test_folder, const fs::path& work,
                                 std::initializer_list<const char*> files,
                                 const std::string& package) {
  std::string version;
  if (run_shell("node -p 'process.versions.node.split(\".\")[0]'", &version) != 0 ||
      std::atoi(version.c_str()) < 20)
    return "node >= 20 is needed to run " + package +
           " (found: " + (version.empty() ? std::string("no node") : version) + ")";
  const fs::path source = fs::path(source_dir()) / "tests" / test_folder;
  fs::create_directories(work);
  for (const char* name : files)
    fs::copy_file(source / name, work / name, fs::copy_options::overwrite_existing);
  if (fs::exists(work / "node_modules" / package / "package.json")) return "";
  std::string npm;
  if (run_shell("cd '" + work.string() + "' && npm ci --no-audit --no-fund", &npm) != 0)
    return "npm ci could not install " + package + " from tests/" + test_folder +
           "/package-lock.json (no registry?):\n" + npm;
  return "";
}

}  // namespace kvlm::test
