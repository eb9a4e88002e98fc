// `--weights` on a model whose rows are not whole blocks (stories260K: 64 wide, `w2` 172): the
// program says on standard error which types the matrices took (llama.cpp's fallbacks) and runs.
#include <gtest/gtest.h>

#include "support/stories.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(CliWeights, FallbackTypesAreReported) {
  KVLM_REQUIRE_STORIES(dir);
  const std::string files =
      "--model '" + dir + "/stories260K.bin' --tokenizer '" + dir + "/tok512.bin' ";
  const std::pair<const char*, const char*> kCases[] = {
      {"q4_k", "--weights q4_k: matrices stored as Q5_0 x 31, F16 x 5"},
      {"q6_k", "--weights q6_k: matrices stored as Q8_0 x 31, F16 x 5"},
      {"q8_0", "--weights q8_0: matrices stored as Q8_0 x 31, F32 x 5"}};
  for (const auto& [type, line] : kCases) {
    const test::CommandResult r =
        test::run_kvlm("generate " + files +
                       "--prompt 'Lily wanted to' --max-new 8 --threads 1 --weights " + type);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
    EXPECT_FALSE(r.out.empty()) << type;
  }
  // Every matrix as asked: nothing to report.
  const test::CommandResult f16 =
      test::run_kvlm("generate " + files + "--prompt 'Lily' --max-new 2 --weights f16");
  EXPECT_EQ(f16.exit_code, 0) << f16.err;
  EXPECT_EQ(f16.err.find("matrices stored as"), std::string::npos) << f16.err;
}

}  // namespace
}  // namespace kvlm
