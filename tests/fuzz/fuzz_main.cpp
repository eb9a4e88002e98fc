// libFuzzer's entry point for one target of targets.h, chosen at build time by
// KVLM_FUZZ_TARGET (tests/fuzz/CMakeLists.txt builds one executable per target). A broken
// property aborts, which libFuzzer records as a crash with the input that caused it.
#include <cstdio>
#include <cstdlib>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kvlm::fuzz::FuzzTarget* target = kvlm::fuzz::find_fuzz_target(KVLM_FUZZ_TARGET);
  if (target == nullptr) {
    std::fprintf(stderr, "kvlm fuzz: no target named %s\n", KVLM_FUZZ_TARGET);
    std::abort();
  }
  const std::string broken = target->run(kvlm::fuzz::Bytes(data, size));
  if (!broken.empty()) {
    std::fprintf(stderr, "kvlm fuzz %s: %s\n", KVLM_FUZZ_TARGET, broken.c_str());
    std::abort();
  }
  return 0;
}
