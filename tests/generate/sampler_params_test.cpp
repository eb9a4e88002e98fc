// SamplingParams::validate: every bad value is rejected with an error naming its flag and the
// value found; the boundaries of each range are exact.
#include "kvlm/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "generate/sampler.h"

namespace kvlm {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

void expect_rejected(const std::function<void(SamplingParams&)>& edit, const std::string& flag,
                     const std::string& found) {
  SamplingParams p;
  edit(p);
  const Status s = p.validate();
  ASSERT_FALSE(s.is_ok()) << "expected " << flag << " to be rejected";
  EXPECT_NE(s.message().find(flag), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("found " + found), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("expected"), std::string::npos) << s.message();
  // The chain builder refuses the same params with the same message.
  auto chain = SamplerChain::from_params(p);
  ASSERT_FALSE(chain.is_ok());
  EXPECT_EQ(chain.message(), s.message());
}

void expect_accepted(const std::function<void(SamplingParams&)>& edit) {
  SamplingParams p;
  edit(p);
  EXPECT_TRUE(p.validate().is_ok()) << p.validate().message();
}

TEST(SamplingParams, DefaultsAreValid) {
  EXPECT_TRUE(SamplingParams{}.validate().is_ok());
}

TEST(SamplingParams, Temperature) {
  expect_rejected([](SamplingParams& p) { p.temperature = -0.5f; }, "--temperature", "-0.5");
  expect_rejected([](SamplingParams& p) { p.temperature = kNaN; }, "--temperature", "nan");
  expect_rejected([](SamplingParams& p) { p.temperature = kInf; }, "--temperature", "inf");
  expect_accepted([](SamplingParams& p) { p.temperature = 0.0f; });
  expect_accepted([](SamplingParams& p) { p.temperature = 2.5f; });
}

TEST(SamplingParams, TopK) {
  expect_rejected([](SamplingParams& p) { p.top_k = -1; }, "--top-k", "-1");
  expect_accepted([](SamplingParams& p) { p.top_k = 0; });
  expect_accepted([](SamplingParams& p) { p.top_k = 1; });
}

TEST(SamplingParams, TopP) {
  expect_rejected([](SamplingParams& p) { p.top_p = 0.0f; }, "--top-p", "0");
  expect_rejected([](SamplingParams& p) { p.top_p = -0.1f; }, "--top-p", "-0.1");
  expect_rejected([](SamplingParams& p) { p.top_p = 1.5f; }, "--top-p", "1.5");
  expect_rejected([](SamplingParams& p) { p.top_p = kNaN; }, "--top-p", "nan");
  expect_accepted([](SamplingParams& p) { p.top_p = 1.0f; });
  expect_accepted([](SamplingParams& p) { p.top_p = 1e-6f; });
}

TEST(SamplingParams, MinP) {
  expect_rejected([](SamplingParams& p) { p.min_p = 1.0f; }, "--min-p", "1");
  expect_rejected([](SamplingParams& p) { p.min_p = -0.25f; }, "--min-p", "-0.25");
  expect_rejected([](SamplingParams& p) { p.min_p = kNaN; }, "--min-p", "nan");
  expect_accepted([](SamplingParams& p) { p.min_p = 0.0f; });
  expect_accepted([](SamplingParams& p) { p.min_p = 0.99f; });
}

TEST(SamplingParams, RepetitionPenalty) {
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "--repeat-penalty", "0");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "--repeat-penalty",
                  "-1");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = kNaN; }, "--repeat-penalty",
                  "nan");
  expect_accepted([](SamplingParams& p) { p.repetition_penalty = 0.5f; });
  expect_accepted([](SamplingParams& p) { p.repetition_penalty = 1.3f; });
}

TEST(SamplingParams, PresenceAndFrequencyPenalties) {
  expect_rejected([](SamplingParams& p) { p.presence_penalty = kNaN; }, "--presence-penalty",
                  "nan");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = kNaN; }, "--frequency-penalty",
                  "nan");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = -kInf; }, "--frequency-penalty",
                  "-inf");
  expect_accepted([](SamplingParams& p) { p.presence_penalty = -2.0f; });
  expect_accepted([](SamplingParams& p) { p.frequency_penalty = 2.0f; });
}

TEST(SamplingParams, ChainOrderFollowsTheDocumentedOrder) {
  SamplingParams p;
  p.repetition_penalty = 1.1f;
  p.presence_penalty = 0.5f;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  auto chain = SamplerChain::from_params(p);
  ASSERT_TRUE(chain.is_ok()) << chain.message();
  // Top-k before temperature: they commute, and this way only k logits are scaled.
  const char* expected[] = {"repetition-penalty",
                            "presence-frequency-penalty",
                            "top-k",
                            "temperature",
                            "top-p",
                            "min-p",
                            "dist"};
  ASSERT_EQ(chain->size(), std::size(expected));
  for (size_t i = 0; i < chain->size(); ++i) EXPECT_EQ(chain->at(i).name(), expected[i]);

  // Greedy: the filters are irrelevant and left out; penalties still apply.
  p.temperature = 0.0f;
  chain = SamplerChain::from_params(p);
  ASSERT_TRUE(chain.is_ok());
  ASSERT_EQ(chain->size(), 3u);
  EXPECT_EQ(chain->at(2).name(), "greedy");

  // Defaults: just the draw.
  chain = SamplerChain::from_params(SamplingParams{});
  ASSERT_TRUE(chain.is_ok());
  ASSERT_EQ(chain->size(), 1u);
  EXPECT_EQ(chain->at(0).name(), "dist");
}

}  // namespace
}  // namespace kvlm
