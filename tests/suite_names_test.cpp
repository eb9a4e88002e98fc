// The suite's own hygiene: every parameterised case has a readable name and prints its
// parameter readably (a name generator and a PrintTo), so ctest lists
// "Models/Exactness.ThreadCountInvariance/llama_gqa_bin_f32_paged1", never
// "/3  # GetParam() = 40-byte object <01-00 ...>" (whose padding bytes change between builds).
#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace kvlm {
namespace {

TEST(SuiteNames, EveryParameterisedCaseIsNamedAndPrintsReadably) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  int parameterised = 0;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(j);
      if (test.value_param() == nullptr) continue;
      ++parameterised;
      const std::string name = std::string(suite.name()) + "." + test.name();
      const std::string suffix = name.substr(name.rfind('/') + 1);
      EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(suffix[0])))
          << name << ": give INSTANTIATE_TEST_SUITE_P a name generator";
      EXPECT_EQ(std::string(test.value_param()).find("-byte object"), std::string::npos)
          << name << ": give the parameter a PrintTo (" << test.value_param() << ")";
    }
  }
  EXPECT_GT(parameterised, 0);
}

}  // namespace
}  // namespace kvlm
