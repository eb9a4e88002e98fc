// scripts/compare.sh and its table (scripts/compare_table.py) on committed fixtures
// (tests/bench/compare_fixtures): llama-bench and `kvlm bench --json` outputs recorded side by
// side on one machine. The table's medians, ranges and per-round ratios are checked to the
// digit; malformed input gets a message naming the file and field; the script runs the two benches interleaved with the depth flag, driven here by
// stand-in programs that record their arguments. Needs python3 (skips without it).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>

#include "support/test_support.h"

namespace kvlm {
namespace {

using test::CommandResult;
using test::TempDir;

bool have_python3() {
  return std::system("command -v python3 >/dev/null 2>&1") == 0;
}

// python3 is an install-deps.sh dependency: CI fails rather than skips without it.
#define SKIP_WITHOUT_PYTHON3() \
  KVLM_REQUIRE_TOOL(have_python3(), "python3 not found: scripts/compare_table.py needs it")

CommandResult run(const std::string& command) {
  TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("err");
  const int status = std::system((command + " >'" + out + "' 2>'" + err + "' </dev/null").c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, test::read_text(out), test::read_text(err)};
}

std::string fixture(const std::string& name) {
  return test::source_dir() + "/tests/bench/compare_fixtures/" + name;
}

void copy(const std::string& from, const std::string& to) {
  test::write_text(to, test::read_text(from));
}

std::string table_command(const std::string& dir) {
  return "python3 '" + test::source_dir() + "/scripts/compare_table.py' '" + dir + "'";
}

// Two rounds: llama_1/2.json (prefill and decode runs, two JSON arrays each) and kvlm_1/2.json.
void write_two_rounds(const TempDir& dir) {
  for (const char* name : {"llama_1.json", "llama_2.json", "kvlm_1.json", "kvlm_2.json"})
    copy(fixture(name), dir.file(name));
}

TEST(CompareScriptTest, TableHasMediansRangesAndPerRoundRatios) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  write_two_rounds(dir);
  const CommandResult r = run(table_command(dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Recorded (compare_fixtures/README.md). kvlm_1: prefill 128 / 512 = 2207.68 / 1919.35 tok/s,
  // decode 94.39 / 74.73 tok/s, run bandwidth 26.39 GB/s, beside the decode windows 24.20 /
  // 24.45; kvlm_2: 2266.07 / 1873.87, 94.90 / 73.84, 25.39, 24.07 / 23.58. llama_1: avg_ts
  // 836.83 / 834.21, 57.16 / 35.50; llama_2: 845.72 / 831.44, 56.29 / 34.58. Ratios per round:
  // 2207.68 / 836.83 = 2.64, 2266.07 / 845.72 = 2.68, median 2.66.
  EXPECT_NE(r.out.find("2 interleaved round(s), threads 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| prefill 128 tokens | 2236.9 [2207.7-2266.1] | 841.3 [836.8-845.7] | "
                       "2.66x [2.64x-2.68x] | 25.9 [25.4-26.4] |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| prefill 512 tokens | 1896.6 [1873.9-1919.4] | 832.8 [831.4-834.2] | "
                       "2.28x [2.25x-2.30x] | 25.9 [25.4-26.4] |"),
            std::string::npos)
      << r.out;
  // Decode rows: the bandwidth measured next to their own window, not the run's.
  EXPECT_NE(r.out.find("| decode, 128 cached | 94.6 [94.4-94.9] | 56.7 [56.3-57.2] | "
                       "1.67x [1.65x-1.69x] | 24.1 [24.1-24.2] |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| decode, 900 cached | 74.3 [73.8-74.7] | 35.0 [34.6-35.5] | "
                       "2.12x [2.11x-2.14x] | 24.0 [23.6-24.4] |"),
            std::string::npos)
      << r.out;
}

// A kvlm build from before the bandwidth was measured next to each decode window (no
// decode_bandwidth_gbs_ctx128/900): decode rows show the run's bandwidth.
TEST(CompareScriptTest, DecodeRowsFallBackToTheRunsBandwidth) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  write_two_rounds(dir);
  for (const char* name : {"kvlm_1.json", "kvlm_2.json"}) {
    std::string kvlm = test::read_text(dir.file(name));
    for (const char* key : {"\"decode_bandwidth_gbs_ctx128\"", "\"decode_bandwidth_gbs_ctx900\""}) {
      const size_t at = kvlm.find(key);
      ASSERT_NE(at, std::string::npos) << name << " lacks " << key;
      kvlm.replace(at, std::string(key).size(), "\"old_build_had_no_such_key\"");
    }
    test::write_text(dir.file(name), kvlm);
  }
  const CommandResult r = run(table_command(dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1.67x [1.65x-1.69x] | 25.9 [25.4-26.4] |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2.12x [2.11x-2.14x] | 25.9 [25.4-26.4] |"), std::string::npos) << r.out;
}

TEST(CompareScriptTest, MalformedInputNamesTheFileAndField) {
  SKIP_WITHOUT_PYTHON3();
  {
    TempDir dir;
    write_two_rounds(dir);
    std::string kvlm = test::read_text(dir.file("kvlm_2.json"));
    const size_t at = kvlm.find("\"bandwidth_gbs\"");
    ASSERT_NE(at, std::string::npos);
    kvlm.replace(at, 15, "\"bandwidth_gb\"");
    test::write_text(dir.file("kvlm_2.json"), kvlm);
    const CommandResult r = run(table_command(dir.path()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("kvlm_2.json: field 'bandwidth_gbs' must be a number, found null"),
              std::string::npos)
        << r.err;
  }
  {
    TempDir dir;
    write_two_rounds(dir);
    test::write_text(dir.file("llama_1.json"), "[\n  {\n    \"n_prompt\": 512,\n");
    const CommandResult r = run(table_command(dir.path()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("llama_1.json: not JSON at line"), std::string::npos) << r.err;
  }
  {
    TempDir dir;
    const CommandResult r = run(table_command(dir.path()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no kvlm_<i>.json files"), std::string::npos) << r.err;
  }
}

// compare.sh with stand-ins for llama-bench and kvlm that log their arguments and print the
// fixtures: the rounds alternate the engines, llama-bench gets the depth flag, and the table
// comes out of what they printed.
TEST(CompareScriptTest, ScriptInterleavesTheBenchesWithTheDepthFlag) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  const std::string log = dir.file("calls.log");
  ASSERT_EQ(::mkdir(dir.file("llama").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.file("llama/bin").c_str(), 0755), 0);
  const std::string bench = dir.file("llama/bin/llama-bench"), kvlm = dir.file("kvlm");
  // The prefill call prints llama_1.json's first array, the decode call its second.
  test::write_text(bench, "#!/bin/sh\necho \"llama-bench $*\" >> '" + log +
                              "'\ncase \"$*\" in *'-d 128,900'*) n=2;; *) n=1;; esac\n"
                              "awk -v n=$n '/^\\[/{k++} k==n' '" +
                              fixture("llama_1.json") + "'\n");
  test::write_text(
      kvlm, "#!/bin/sh\necho \"kvlm $*\" >> '" + log + "'\ncat '" + fixture("kvlm_1.json") + "'\n");
  ASSERT_EQ(::chmod(bench.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(kvlm.c_str(), 0755), 0);
  test::write_text(dir.file("m.gguf"), "stand-in");
  const std::string script = "bash '" + test::source_dir() + "/scripts/compare.sh'";
  const CommandResult r =
      run(script + " --llama-build '" + dir.file("llama") + "' --gguf '" + dir.file("m.gguf") +
          "' --weights bf16 --rounds 2 --threads 2 --kvlm '" + kvlm + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string m = dir.file("m.gguf");
  const std::string prefill = "llama-bench -m " + m + " -t 2 -p 128,512 -n 0 -r 2 -o json\n";
  const std::string decode = "llama-bench -m " + m + " -t 2 -p 0 -n 32 -d 128,900 -r 2 -o json\n";
  const std::string kvlm_call = "kvlm bench --json --threads 2 --model " + m + " --weights bf16\n";
  EXPECT_EQ(test::read_text(log), prefill + decode + kvlm_call + prefill + decode + kvlm_call);
  EXPECT_NE(r.out.find("| prefill 512 tokens | 1919.4 [1919.4-1919.4] | 834.2 [834.2-834.2] | "
                       "2.30x [2.30x-2.30x] |"),
            std::string::npos)
      << r.out;
}

TEST(CompareScriptTest, BadArgumentsAreRefusedWithTheFlagNamed) {
  TempDir dir;
  const std::string script = "bash '" + test::source_dir() + "/scripts/compare.sh'";
  CommandResult r = run(script + " --gguf x.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--llama-build DIR is required"), std::string::npos) << r.err;
  test::write_text(dir.file("m.gguf"), "stand-in");
  r = run(script + " --llama-build '" + dir.path() + "' --gguf '" + dir.file("m.gguf") + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--llama-build: no llama-bench in"), std::string::npos) << r.err;
  r = run(script + " --llama-build '" + dir.path() + "' --gguf '" + dir.file("m.gguf") +
          "' --rounds 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--rounds: expected a positive integer, found '0'"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace kvlm
