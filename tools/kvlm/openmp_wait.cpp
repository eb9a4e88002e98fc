#include "openmp_wait.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace kvlm::cli {

namespace {

// Where thread binding was asked for (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY), libgomp
// bound this thread to the first place before main, and execv keeps that mask: the program run
// again would start on one place's CPUs and put every thread there (measured on 2 cores with
// OMP_PROC_BIND=true: both threads on CPU 0, half the tokens/s). The places list the CPUs
// libgomp started with, so the mask set here is theirs. False where it cannot be set.
bool give_back_every_place() {
  const int n_places = omp_get_num_places();
  if (n_places <= 0) return true;  // no binding: the mask is as the program started
  std::vector<int> cpus;
  for (int p = 0; p < n_places; ++p) {
    std::vector<int> ids(static_cast<size_t>(std::max(omp_get_place_num_procs(p), 0)));
    omp_get_place_proc_ids(p, ids.data());
    cpus.insert(cpus.end(), ids.begin(), ids.end());
  }
  if (cpus.empty()) return false;
  const int n_cpus = *std::max_element(cpus.begin(), cpus.end()) + 1;
  cpu_set_t* set = CPU_ALLOC(n_cpus);
  if (set == nullptr) return false;
  const size_t size = CPU_ALLOC_SIZE(n_cpus);
  CPU_ZERO_S(size, set);
  for (int cpu : cpus)
    if (cpu >= 0) CPU_SET_S(cpu, size, set);
  const bool ok = sched_setaffinity(0, size, set) == 0;
  CPU_FREE(set);
  return ok;
}

}  // namespace

void set_openmp_wait_and_reexec(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (!give_back_every_place()) return;  // run on with the library's defaults, bound as asked
  if (setenv("GOMP_SPINCOUNT", "10000", /*overwrite=*/0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: go on as we are
}

}  // namespace kvlm::cli
