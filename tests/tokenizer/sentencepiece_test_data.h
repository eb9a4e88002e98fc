// A tiny Llama-2-style tokenizer.json for tests (the shared data holds no Llama tokenizer.json,
// and there is no network): <unk> <s> </s> at 0..2, the 256 byte tokens <0x00>..<0xFF> at
// 3..258 (byte b is id b + 3), then the pieces and merges below, small enough that every
// expected id in the tests can be derived by hand from the merge ranks.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvlm::sp_test {

// Ids of the pieces after the byte tokens.
enum : int32_t {
  kUnk = 0,
  kBos = 1,
  kEos = 2,
  kSpace = 259,  // "▁"
  kE = 260,
  kH = 261,
  kL = 262,
  kO = 263,
  kW = 264,
  kR = 265,
  kD = 266,
  kSpaceH = 267,      // "▁h"
  kLL = 268,          // "ll"
  kELL = 269,         // "ell"
  kSpaceHell = 270,   // "▁hell"
  kSpaceHello = 271,  // "▁hello"
  kOR = 272,          // "or"
  kSpaceW = 273,      // "▁w"
  kSpaceWor = 274,    // "▁wor"
  kSpaceSpace = 275,  // "▁▁"
  kLD = 276,          // "ld"
  kSpaceWorld = 277,  // "▁world"
  kHE = 278,          // "he"
  kVocab = 279,
};
// Llama 2's decoder: "▁" back to spaces, <0xNN> tokens to bytes, the leading space stripped.
inline nlohmann::ordered_json llama2_decoder_json() {
  return {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
}

constexpr int32_t byte_id(unsigned char b) {
  return 3 + b;
}

// The merges in rank order (rank 0 first). "h e" comes last, so "▁ h" and "e ll" beat it.
inline std::vector<std::pair<std::string, std::string>> merges() {
  return {{"l", "l"}, {"▁", "h"},   {"e", "ll"}, {"▁h", "ell"}, {"▁hell", "o"}, {"o", "r"},
          {"▁", "w"}, {"▁w", "or"}, {"▁", "▁"},  {"l", "d"},    {"▁wor", "ld"}, {"h", "e"}};
}

// How the file writes spaces: Llama 2's older normalizer (Prepend + Replace), or the newer
// Metaspace pre-tokenizer.
enum class Style { kNormalizer, kMetaspaceFirst, kMetaspaceAlwaysSplit };

inline std::string tokenizer_json(Style style = Style::kNormalizer, bool pair_merges = false,
                                  bool metaspace_decoder = false) {
  using nlohmann::ordered_json;
  ordered_json vocab = ordered_json::object();
  vocab["<unk>"] = kUnk;
  vocab["<s>"] = kBos;
  vocab["</s>"] = kEos;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = byte_id(static_cast<unsigned char>(b));
  }
  const char* pieces[] = {"▁",   "e",     "h",      "l",  "o",  "w",    "r",  "d",  "▁h",     "ll",
                          "ell", "▁hell", "▁hello", "or", "▁w", "▁wor", "▁▁", "ld", "▁world", "he"};
  int32_t id = kSpace;
  for (const char* p : pieces) vocab[p] = id++;
  ordered_json merge_list = ordered_json::array();
  for (const auto& [l, r] : merges()) {
    if (pair_merges) {
      merge_list.push_back(ordered_json::array({l, r}));
    } else {
      merge_list.push_back(l + " " + r);
    }
  }
  auto added = [](int32_t id, const char* content) {
    return ordered_json{{"id", id},        {"content", content}, {"single_word", false},
                        {"lstrip", false}, {"rstrip", false},    {"normalized", false},
                        {"special", true}};
  };
  ordered_json doc = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  doc["added_tokens"] = {added(kUnk, "<unk>"), added(kBos, "<s>"), added(kEos, "</s>")};
  if (style == Style::kNormalizer) {
    doc["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
    doc["pre_tokenizer"] = nullptr;
  } else {
    const bool always = style == Style::kMetaspaceAlwaysSplit;
    doc["normalizer"] = nullptr;
    doc["pre_tokenizer"] = {{"type", "Metaspace"},
                            {"replacement", "▁"},
                            {"prepend_scheme", always ? "always" : "first"},
                            {"split", always}};
  }
  doc["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single",
                            {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                           {"pair", ordered_json::array()},
                           {"special_tokens",
                            {{"<s>",
                              {{"id", "<s>"},
                               {"ids", ordered_json::array({kBos})},
                               {"tokens", ordered_json::array({"<s>"})}}}}}};
  if (metaspace_decoder) {
    doc["decoder"] = {{"type", "Sequence"},
                      {"decoders",
                       {{{"type", "Metaspace"},
                         {"replacement", "▁"},
                         {"prepend_scheme", "first"},
                         {"split", false}},
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}}}}};
  } else {
    doc["decoder"] = llama2_decoder_json();
  }
  doc["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", "<unk>"},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},
                  {"byte_fallback", true},
                  {"vocab", vocab},
                  {"merges", merge_list}};
  return doc.dump(2);
}

}  // namespace kvlm::sp_test
