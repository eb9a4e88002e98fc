// scripts/compare_ggml.sh and its table (scripts/compare_ggml_table.py) on committed fixtures
// (tests/bench/compare_ggml_fixtures): a real recording of `scripts/compare_ggml.sh --out DIR`
// on the development machine, ggml's gpt-2 example programs' own output included. The table's
// medians, ranges and per-round ratios are checked to the digit; malformed input gets a message
// naming the file and the run; the script runs the engines interleaved, driven here by stand-in
// programs that record their arguments. Needs python3 (skips without it).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace kvlm {
namespace {

using test::CommandResult;
using test::TempDir;

#define SKIP_WITHOUT_PYTHON3()                                              \
  KVLM_REQUIRE_TOOL(std::system("command -v python3 >/dev/null 2>&1") == 0, \
                    "python3 not found: scripts/compare_ggml_table.py needs it")

// Three rounds of Q8_0 (the table in docs/performance.md, "Side by side with ggml").
std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (int i = 1; i <= 3; ++i) {
    const std::string round = std::to_string(i);
    names.push_back("kvlm_q8_0_" + round + ".json");
    for (const char* c : {"prefill128", "prefill512", "decode128", "decode900", "batch8"})
      names.push_back("ggml_q8_0_" + round + "_" + c + ".log");
  }
  return names;
}

std::string fixture(const std::string& name) {
  return test::source_dir() + "/tests/bench/compare_ggml_fixtures/" + name;
}

void write_fixtures(const TempDir& dir) {
  for (const std::string& name : fixture_names())
    test::write_text(dir.file(name), test::read_text(fixture(name)));
}

CommandResult table(const std::string& dir) {
  return test::run_program(
      "python3", test::shell_quote(test::source_dir() + "/scripts/compare_ggml_table.py") + " " +
                     test::shell_quote(dir));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CompareGgmlTest, TableOfARecordedRunHasMediansRangesAndRatios) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  write_fixtures(dir);
  const CommandResult r = table(dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Decode at 128 cached, round 1 (recorded): kvlm 329.1 tok/s, ggml's best of three runs
  // 16 tokens / 105.42 ms = 151.8; round 2: 307.1 against 16 / 112.32 ms = 142.5; round 3:
  // 275.0 against 16 / 114.77 ms = 139.4. Ratios 2.17, 2.16, 1.97: median 2.16.
  EXPECT_TRUE(has(r.out,
                  "q8_0: kvlm (Q8_0 weights) against ggml (Q8_0), 3 interleaved "
                  "round(s), threads 2; median [range], tokens/s"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "| prefill 128 tokens | 763.3 [734.5-783.6] | 777.5 [596.0-950.3] | "
                  "0.98x [0.82x-1.23x] | 46.0 [45.3-47.3] | 52.7 [45.4-67.5] |"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "| prefill 512 tokens | 734.0 [717.8-754.6] | 723.4 [656.2-874.3] | "
                  "0.99x [0.86x-1.12x] | 46.0 [45.3-47.3] | 44.1 [41.6-59.0] |"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "| decode, 128 cached | 307.1 [275.0-329.1] | 142.5 [139.4-151.8] | "
                  "2.16x [1.97x-2.17x] | 43.9 [43.8-81.2] | 43.9 [41.8-46.9] |"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "| decode, 900 cached | 170.1 [164.9-187.0] | 56.1 [54.2-62.5] | "
                  "3.03x [2.99x-3.04x] | 43.7 [41.7-70.3] | 45.2 [42.4-52.1] |"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "| decode, 8 sequences (sum) | 525.6 [507.1-527.7] | "
                  "336.9 [331.7-384.5] | 1.53x [1.37x-1.57x] | 41.0 [40.9-70.7] | "
                  "43.6 [39.8-44.6] |"))
      << r.out;
  EXPECT_FALSE(has(r.out, "warning")) << r.out;
}

TEST(CompareGgmlTest, MalformedInputNamesTheFileAndRun) {
  SKIP_WITHOUT_PYTHON3();
  {
    TempDir dir;
    write_fixtures(dir);
    std::string log = test::read_text(dir.file("ggml_q8_0_2_decode900.log"));
    const size_t at = log.rfind("predict time");
    ASSERT_NE(at, std::string::npos);
    log.replace(at, 12, "predict tme");
    test::write_text(dir.file("ggml_q8_0_2_decode900.log"), log);
    const CommandResult r = table(dir.path());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.err, "ggml_q8_0_2_decode900.log: run 3: no 'predict time = ... ms' line"))
        << r.err;
  }
  {
    TempDir dir;
    write_fixtures(dir);
    test::write_text(dir.file("ggml_q8_0_1_batch8.log"),
                     test::read_text(dir.file("ggml_q8_0_1_batch8.log")) +
                         "### run: gpt-2-batched\n### bandwidth before: {\"bandwidth_gbs\": 50}\n"
                         "### failed: exit 1\n### bandwidth after: {\"bandwidth_gbs\": 50}\n");
    const CommandResult r = table(dir.path());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.err, "ggml_q8_0_1_batch8.log: run 4: the program failed (failed: exit 1)"))
        << r.err;
  }
  {
    TempDir dir;
    write_fixtures(dir);
    std::string log = test::read_text(dir.file("ggml_q8_0_1_prefill128.log"));
    log.replace(log.find("### bandwidth after: {"), 22, "### bandwidth after: [");
    test::write_text(dir.file("ggml_q8_0_1_prefill128.log"), log);
    const CommandResult r = table(dir.path());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.err, "ggml_q8_0_1_prefill128.log: run 1: bandwidth line is not JSON"))
        << r.err;
  }
  {
    TempDir dir;
    const CommandResult r = table(dir.path());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.err, "no kvlm_<type>_<i>.json files")) << r.err;
  }
}

void write_program(const std::string& path, const std::string& body) {
  test::write_text(path, "#!/bin/sh\n" + body);
  ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
}

// compare_ggml.sh with stand-ins for ggml's programs, kvlm and its helper that log their
// arguments and print outputs in the real programs' formats: the conversion is real (a tiny
// model), the greedy check runs first, the rounds alternate the engines, and the table comes
// out of what the stand-ins printed.
TEST(CompareGgmlTest, ScriptInterleavesTheEnginesOnTheSameModel) {
  SKIP_WITHOUT_PYTHON3();
  TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const std::string log = dir.file("calls.log"), bin = dir.file("ggml/bin");
  ASSERT_EQ(::mkdir(dir.file("ggml").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(bin.c_str(), 0755), 0);
  const std::string record = "echo \"$(basename \"$0\") $*\" >> '" + log + "'\n";
  write_program(bin + "/gpt-2-quantize", record + "cp \"$1\" \"$2\"\n");
  // gpt-2-backend -n 1: one prefill, 128 tokens in 200 ms or 512 in 1000 ms.
  write_program(bin + "/gpt-2-backend",
                record +
                    "echo 'gpt2_model_load: ftype   = 0'\ncase \"$*\" in *'-b 512'*) "
                    "n=512 t=1000;; *) n=128 t=200;; esac\n"
                    "echo \"main: number of tokens in prompt = $n, first 8 tokens: 1 2\"\n"
                    "echo \"main:  predict time = $t.00 ms / 1.00 ms per token\"\n");
  // gpt-2-batched: the greedy check (-n 9) prints 8 tokens; runs print 16 (or 8 x 16) in 80 ms.
  write_program(bin + "/gpt-2-batched",
                record +
                    "echo 'gpt2_model_load: ftype   = 0'\n"
                    "case \"$*\" in *'-n 9 '*) printf 'first 8 tokens: 1\\n\\n 5 6 7 8 9 10 "
                    "11 12\\n'; exit 0;; *'-np 8'*) n=128;; *) n=16;; esac\n"
                    "echo \"main:     n_decoded = $n\"\necho 'main:  predict time = 80.00 ms'\n");
  const std::string kvlm = dir.file("kvlm"), helper = dir.file("helper");
  write_program(kvlm, record +
                          "case \"$1\" in generate) echo '{\"sequences\": [{\"ids\": "
                          "[5, 6, 7, 8, 9, 10, 11, 12]}]}';; bench) cat '" +
                          fixture("kvlm_q8_0_1.json") + "';; esac\n");
  write_program(helper, "echo '{\"bandwidth_gbs\": 40.0, \"peak_gbs\": 50.0, \"threads\": 2}'\n");
  const std::string script = test::source_dir() + "/scripts/compare_ggml.sh";
  const CommandResult r = test::run_program(
      "bash", test::shell_quote(script) + " --ggml-build " + test::shell_quote(dir.file("ggml")) +
                  " --model " + test::shell_quote(dir.path()) + " --weights f32,q8_0 --rounds 1" +
                  " --threads 2 --kvlm " + test::shell_quote(kvlm) + " --helper " +
                  test::shell_quote(helper) + " --out " + test::shell_quote(dir.file("out")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "greedy check (f32): ggml 5 6 7 8 9 10 11 12 / kvlm 5 6 7 8 9 10 11 12"))
      << r.err;
  EXPECT_FALSE(has(r.err, "warning")) << r.err;
  // The converted files are real; Q8_0 is made from the F32 one.
  struct stat st {};
  EXPECT_EQ(::stat(dir.file("out/gpt2-f32.bin").c_str(), &st), 0);
  EXPECT_EQ(::stat(dir.file("out/gpt2-q8_0.bin").c_str(), &st), 0);
  // The order of the calls: the Q8_0 file, the greedy checks, then per type 4
  // prefills, 3 + 3 decodes and 3 batched runs of ggml, then kvlm bench.
  std::string order, line;
  std::istringstream calls(test::read_text(log));
  while (std::getline(calls, line)) {
    std::istringstream words(line);
    std::string program, first;
    words >> program >> first;
    order += (program == "kvlm" ? first : program.substr(6)) + " ";
  }
  std::string round;
  for (int k = 0; k < 4; ++k) round += "backend ";
  for (int k = 0; k < 9; ++k) round += "batched ";
  round += "bench ";
  EXPECT_EQ(order, "quantize batched generate batched generate " + round + round);
  const std::string logged = test::read_text(log);
  EXPECT_TRUE(has(logged, " -n 1 -b 512 -c 1024 --top_k 1 -t 2 --ignore-eos\n")) << logged;
  EXPECT_TRUE(has(logged, " -n 17 -np 8 -c 1024 --top_k 1 -t 2 --ignore-eos\n")) << logged;
  EXPECT_TRUE(
      has(logged, "kvlm bench --json --threads 2 --model " + dir.path() + " --weights q8_0\n"))
      << logged;
  // 128 tokens in 200 ms = 640 tok/s; 16 in 80 ms = 200; 8 x 16 in 80 ms = 1600.
  EXPECT_TRUE(has(r.out, "f32: kvlm (Q8_0 weights) against ggml (F32), 1 interleaved round(s)"))
      << r.out;
  EXPECT_TRUE(has(r.out, "| prefill 128 tokens | "));
  EXPECT_TRUE(has(r.out, " | 640.0 | ")) << r.out;
  EXPECT_TRUE(has(r.out, " | 512.0 | ")) << r.out;
  EXPECT_TRUE(has(r.out, " | 200.0 | ")) << r.out;
  EXPECT_TRUE(has(r.out, " | 1600.0 | ")) << r.out;
  EXPECT_TRUE(has(r.out, "| 40.0 |")) << r.out;
  EXPECT_TRUE(has(r.out, "q8_0: kvlm (Q8_0 weights)")) << r.out;
  // The stand-in kvlm bench reports Q8_0 for the f32 round too: the table says so.
  EXPECT_TRUE(has(r.out, "warning: the engines ran different weight types")) << r.out;
}

TEST(CompareGgmlTest, BadArgumentsAreRefusedWithTheFlagNamed) {
  TempDir dir;
  const std::string script = test::shell_quote(test::source_dir() + "/scripts/compare_ggml.sh");
  const std::string build = " --ggml-build " + test::shell_quote(dir.path());
  CommandResult r = test::run_program("bash", script + " --weights f32");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "--ggml-build DIR is required")) << r.err;
  r = test::run_program("bash", script + build);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "--ggml-build: no gpt-2-backend in")) << r.err;
  r = test::run_program("bash", script + build + " --weights q4_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "--weights: expected f32, f16, bf16 or q8_0, found 'q4_0'")) << r.err;
  r = test::run_program("bash", script + build + " --rounds x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "--rounds: expected a positive integer, found 'x'")) << r.err;
}

// kvlm_compare_helper: the bandwidth reading the script puts beside each ggml run, and the
// errors of write-model (writing the 124M-shaped model itself takes seconds: the script's
// run exercises it).
TEST(CompareGgmlTest, HelperReadsTheBandwidthAndNamesBadFlags) {
  CommandResult r = test::run_program(KVLM_COMPARE_HELPER, "bandwidth --threads 1 --seconds 0.01");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double sustained = 0, peak = 0;
  int threads = 0;
  ASSERT_EQ(
      std::sscanf(r.out.c_str(), "{\"bandwidth_gbs\": %lf, \"peak_gbs\": %lf, \"threads\": %d}",
                  &sustained, &peak, &threads),
      3)
      << r.out;
  EXPECT_GT(sustained, 0.0);
  EXPECT_GT(peak, 0.0);
  EXPECT_EQ(threads, 1);
  TempDir dir;
  test::write_text(dir.file("file"), "not a folder");
  r = test::run_program(KVLM_COMPARE_HELPER,
                        "write-model --out " + test::shell_quote(dir.file("file") + "/model"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "kvlm_compare_helper: --out: cannot create")) << r.err;
  r = test::run_program(KVLM_COMPARE_HELPER, "write-model --out x --dtype q8_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "--dtype")) << r.err;
}

}  // namespace
}  // namespace kvlm
