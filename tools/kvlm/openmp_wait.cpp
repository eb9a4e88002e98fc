#include "openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace kvlm::cli {

void set_openmp_wait_and_reexec(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", "10000", /*overwrite=*/0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: go on as we are
}

}  // namespace kvlm::cli
