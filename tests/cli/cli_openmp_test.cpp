// kvlm runs itself again once to set how idle OpenMP workers wait (tools/kvlm/openmp_wait.h).
// Where threads are bound, the program run again must still see every CPU it was started on.
#include <gtest/gtest.h>
#include <omp.h>

#include <regex>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace kvlm {
namespace {

// The tests read GNU libgomp's OMP_DISPLAY_ENV lines, printed as the library loads in each run of
// the program (LLVM's libomp, the sanitizer build's runtime, prints them in another form and
// only once a program calls into it). kvlm and the tests are built against the same runtime.
#ifdef _LIBGOMP_OMP_LOCK_DEFINED
constexpr bool kGnuOpenmp = true;
#else
constexpr bool kGnuOpenmp = false;
#endif
constexpr const char* kNotGnuOpenmp = "the test reads GNU libgomp's OMP_DISPLAY_ENV output";

// The OMP_PLACES lines libgomp prints (OMP_DISPLAY_ENV) as each run of the program starts.
std::vector<std::string> places_printed(const std::string& environment) {
  const auto r = test::run_program(
      "env", "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + environment +
                 " OMP_DISPLAY_ENV=true '" KVLM_BINARY "' kv-size --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> places;
  const std::regex line("OMP_PLACES = '([^']*)'");
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), line);
       it != std::sregex_iterator(); ++it)
    places.push_back((*it)[1]);
  return places;
}

TEST(CliOpenmp, BoundThreadsKeepEveryPlaceWhenTheProgramRunsAgain) {
  if (!kGnuOpenmp) GTEST_SKIP() << kNotGnuOpenmp;
  for (const std::string bind : {"OMP_PROC_BIND=true", "OMP_PROC_BIND=close OMP_PLACES=cores"}) {
    const auto places = places_printed(bind);
    ASSERT_EQ(places.size(), 2u) << bind << ": the program should run once more, with "
                                 << "GOMP_SPINCOUNT set";
    if (places[0].find("},{") == std::string::npos)
      GTEST_SKIP() << "one place (" << places[0] << "): nothing to lose on this machine";
    EXPECT_EQ(places[1], places[0]) << bind << ": the second run sees fewer CPUs";
  }
}

TEST(CliOpenmp, AWaitPolicyOfTheUsersOwnRunsOnce) {
  if (!kGnuOpenmp) GTEST_SKIP() << kNotGnuOpenmp;
  const auto places = places_printed("OMP_PROC_BIND=true OMP_WAIT_POLICY=passive");
  EXPECT_EQ(places.size(), 1u);
}

}  // namespace
}  // namespace kvlm
