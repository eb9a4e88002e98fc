// The fuzz targets in the ordinary suite: every seed and every input that ever made a target
// fail (tests/fuzz/corpus/<target>/) runs through its target and must keep all properties.
// Inputs that once crashed are also named tests below, so a regression says what came back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/targets.h"

namespace kvlm::fuzz {
namespace {

namespace fs = std::filesystem;

fs::path corpus_dir(const std::string& target) {
  return fs::path(KVLM_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / target;
}

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string run_file(const std::string& target, const std::string& file) {
  const FuzzTarget* t = find_fuzz_target(target);
  if (t == nullptr) return "no target " + target;
  const fs::path path = corpus_dir(target) / file;
  if (!fs::exists(path)) return "missing " + path.string();
  const std::vector<uint8_t> bytes = read_bytes(path);
  return t->run(Bytes(bytes.data(), bytes.size()));
}

TEST(FuzzCorpus, EveryTargetHasSeedsAndKeepsItsPropertiesOnThem) {
  for (const FuzzTarget& t : fuzz_targets()) {
    const fs::path dir = corpus_dir(t.name);
    ASSERT_TRUE(fs::is_directory(dir)) << "no seed corpus for " << t.name << " at " << dir;
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      const std::vector<uint8_t> bytes = read_bytes(entry.path());
      EXPECT_EQ(t.run(Bytes(bytes.data(), bytes.size())), "") << entry.path();
    }
    EXPECT_GT(files, 0) << t.name;
  }
}

TEST(FuzzCorpus, EmptyInputIsFineEverywhere) {
  for (const FuzzTarget& t : fuzz_targets()) EXPECT_EQ(t.run(Bytes()), "") << t.name;
}

// Inputs that found the defects of issue 15 before the fuzzers existed, kept by name.
TEST(FuzzRegression, TokenizerJsonSplitMatchingEmptyStringTerminates) {
  EXPECT_EQ(run_file("tokenizer_json", "seed_split_matches_empty"), "");
}

TEST(FuzzRegression, TokenizerJsonCatastrophicSplitIsReportedNotMisSplit) {
  EXPECT_EQ(run_file("tokenizer_json", "seed_split_catastrophic"), "");
}

TEST(FuzzRegression, ConfigJsonBillionLayersAndHugeWidths) {
  for (const char* file :
       {"seed_gpt2_billion_layers", "seed_gpt2_huge_embd", "seed_llama_huge_head_dim"})
    EXPECT_EQ(run_file("config_json", file), "") << file;
}

// The first libFuzzer runs' finds.
TEST(FuzzRegression, GgufCutInsideThePaddingBeforeTheData) {
  // Empty tensors of a file cut before its aligned data section would point past its end.
  EXPECT_EQ(run_file("gguf", "crash-data-section-past-end"), "");
}

TEST(FuzzRegression, GgufF32TensorMisalignedByAnAlignmentOf2) {
  // general.alignment 2 put an F32 tensor at an address 2 mod 4; reading it as float* was
  // undefined behaviour (UBSan stops CI's sanitized run of this test without the fix).
  EXPECT_EQ(run_file("gguf", "crash-f32-tensor-misaligned-by-alignment-2"), "");
}

TEST(FuzzRegression, SamplerPenaltyOverflowingAFiniteLogit) {
  // Repetition penalty 1.5e-38 and temperature 0.003 made a finite logit +inf, then NaN
  // probabilities: the draw picked from them.
  EXPECT_EQ(run_file("sampler", "crash-penalty-temperature-overflow-to-inf"), "");
}

TEST(FuzzRegression, SamplerFrequencyPenaltyOnAMaskedLogit) {
  // Frequency penalty -3e38 on a token generated 4 times: 4 * -3e38 overflows to -inf, and a
  // masked logit (-inf) minus -inf was NaN: the draw could pick the masked token.
  EXPECT_EQ(run_file("sampler", "crash-frequency-penalty-masked-logit"), "");
}

}  // namespace
}  // namespace kvlm::fuzz
