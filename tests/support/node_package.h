// Running the npm packages some tests check kvlm against (the official openai client for the
// server, @huggingface/gguf for the files convert writes): each is installed beside the test
// binary from its committed package-lock.json, never downloaded at build time.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>

namespace kvlm::test {

// Runs `command` through the shell; `output` receives stdout and stderr together. Returns the
// exit code, or -1 when the command could not be run or did not exit normally.
int run_shell(const std::string& command, std::string* output);

// Makes `work` a ready node package: checks node >= 20, copies `files` from tests/<test_folder>
// into it, and runs `npm ci` unless node_modules/<package>/package.json is already there.
// Returns "" when ready, otherwise why not (for KVLM_REQUIRE_TOOL).
std::string prepare_node_package(const std::string& test_folder, const std::filesystem::path& work,
                                 std::initializer_list<const char*> files,
                                 const std::string& package);

}  // namespace kvlm::test
