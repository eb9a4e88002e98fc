// Loading vocabulary files: a small valid vocabulary in every layout, and each kind of bad file
// (written to a temp folder) giving an error that names the file and the line.
#include "tokenizer/bpe_files.h"

#include <gtest/gtest.h>

#include <random>

#include "support/expect_error.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/gpt2_test_data.h"

namespace kvlm {
namespace {

using test::TempDir;

using test::write_text;

// A JSON string literal for byte-level token text (escaping only what JSON requires).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// A minimal byte-level vocabulary, one token per line so line numbers are predictable: line 1
// is "{", token id k is on line k + 2. Ids 0..255 are the bytes; 256 = "ab", 257 = "abc",
// 258 = <|endoftext|>.
std::vector<std::string> tiny_vocab_lines() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(bytes_to_byte_level(std::string(1, char(b))));
  tokens.push_back("ab");
  tokens.push_back("abc");
  tokens.push_back("<|endoftext|>");
  std::vector<std::string> lines = {"{"};
  for (size_t id = 0; id < tokens.size(); ++id) {
    lines.push_back("  " + json_string(tokens[id]) + ": " + std::to_string(id) +
                    (id + 1 < tokens.size() ? "," : ""));
  }
  lines.push_back("}");
  return lines;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

const char kTinyMerges[] = "#version: 0.2\na b\nab c\n";

Result<std::unique_ptr<Tokenizer>> load_pair(const TempDir& dir, const std::string& vocab,
                                             const std::string& merges) {
  write_text(dir.file("vocab.json"), vocab);
  write_text(dir.file("merges.txt"), merges);
  return load_tokenizer(dir.path());
}

using test::expect_error;

TEST(BpeFiles, TinyVocabularyLoadsAndMerges) {
  TempDir dir;
  Result<std::unique_ptr<Tokenizer>> tok = load_pair(dir, join(tiny_vocab_lines()), kTinyMerges);
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok.value()->vocab_size(), 259);
  EXPECT_EQ(tok.value()->encode("abc ab", false), (std::vector<int32_t>{257, ' ', 256}));
  EXPECT_EQ(tok.value()->encode("abc", false), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.value()->encode("x<|endoftext|>", true), (std::vector<int32_t>{'x', 258}));
  EXPECT_EQ(tok.value()->eos_id(), 258);
}

TEST(BpeFiles, CrlfMergesAndMissingVersionLineAreFine) {
  TempDir dir;
  Result<std::unique_ptr<Tokenizer>> tok =
      load_pair(dir, join(tiny_vocab_lines()), "a b\r\nab c\r\n");
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok.value()->encode("abc", false), (std::vector<int32_t>{257}));
}

TEST(BpeFiles, BadJsonNamesFileAndLine) {
  TempDir dir;
  std::vector<std::string> lines = tiny_vocab_lines();
  lines[11] = "  \"j\" 9,";  // line 12: the colon is missing
  expect_error(load_pair(dir, join(lines), kTinyMerges),
               {"vocab.json line 12, column 7", "invalid JSON", "expected ':'", "found '9'"});
}

TEST(BpeFiles, TruncatedJsonIsAnError) {
  TempDir dir;
  const std::string text = join(tiny_vocab_lines());
  // Cut after a comma in the middle: the next token's name is missing.
  expect_error(load_pair(dir, text.substr(0, text.find(",\n", text.size() / 2) + 2), kTinyMerges),
               {"vocab.json line", "invalid JSON"});
  expect_error(load_pair(dir, "", kTinyMerges),
               {"vocab.json line 1, column 1", "found end of file"});
}

TEST(BpeFiles, NonIntegerOrNegativeIdIsAnError) {
  TempDir dir;
  std::vector<std::string> lines = tiny_vocab_lines();
  lines[3] = "  \"!\": 1.5,";
  expect_error(load_pair(dir, join(lines), kTinyMerges),
               {"vocab.json line 4", "expected an integer", "token \"!\""});
  lines[3] = "  \"!\": -1,";
  expect_error(load_pair(dir, join(lines), kTinyMerges), {"vocab.json line 4", "has id -1"});
}

TEST(BpeFiles, DuplicateIdNamesBothTokens) {
  TempDir dir;
  std::vector<std::string> lines = tiny_vocab_lines();
  lines[258] = "  \"abc\": 5,";  // line 259 (id 257) reuses id 5, already on line 7
  expect_error(load_pair(dir, join(lines), kTinyMerges),
               {"vocab.json line 259", "duplicate id 5", "line 7", "\"abc\""});
}

TEST(BpeFiles, DuplicateTokenIsAnError) {
  TempDir dir;
  std::vector<std::string> lines = tiny_vocab_lines();
  lines[258] = "  \"a\": 256,";  // "a" is already id 97 (line 99)
  expect_error(load_pair(dir, join(lines), kTinyMerges),
               {"vocab.json line 259", "token \"a\" appears twice", "line 99"});
}

TEST(BpeFiles, TokenOutsideTheByteAlphabetIsAnError) {
  TempDir dir;
  std::vector<std::string> lines = tiny_vocab_lines();
  lines[258] = "  \"a\xe4\xb8\xad\": 257,";  // "a中": not byte-level text
  expect_error(load_pair(dir, join(lines), kTinyMerges),
               {"vocab.json line 259", "U+4E2D", "byte-level"});
}

TEST(BpeFiles, MergeLineThatIsNotTwoTokens) {
  TempDir dir;
  const std::string vocab = join(tiny_vocab_lines());
  expect_error(load_pair(dir, vocab, "#version: 0.2\na b\nabc\n"),
               {"merges.txt line 3", "expected two tokens separated by one space", "\"abc\""});
  expect_error(load_pair(dir, vocab, "#version: 0.2\na b c\n"), {"merges.txt line 2"});
  expect_error(load_pair(dir, vocab, "a  b\n"), {"merges.txt line 1"});
  expect_error(load_pair(dir, vocab, "a b\n b\n"), {"merges.txt line 2"});
}

TEST(BpeFiles, MergeNamingAMissingToken) {
  TempDir dir;
  const std::string vocab = join(tiny_vocab_lines());
  expect_error(load_pair(dir, vocab, "#version: 0.2\na b\nab zz\n"),
               {"merges.txt line 3", "token \"zz\"", "not in the vocabulary", "vocab.json"});
  // Both parts exist but their concatenation does not.
  expect_error(load_pair(dir, vocab, "#version: 0.2\nb c\n"),
               {"merges.txt line 2", "makes \"bc\"", "not in the vocabulary"});
}

TEST(BpeFiles, MissingByteTokenIsAnError) {
  TempDir dir;
  std::vector<std::string> lines = tiny_vocab_lines();
  lines[11] = "  \"notabyte\": 10,";  // id 10 was byte 0x0A's token
  expect_error(load_pair(dir, join(lines), kTinyMerges), {"no token for byte 0x0A"});
}

TEST(BpeFiles, MissingAndUnreadableFiles) {
  TempDir dir;
  expect_error(load_tokenizer(dir.path()),
               {dir.path(), "no tokenizer files found", "vocab.json + merges.txt"});
  expect_error(load_tokenizer(dir.path() + "/nowhere"), {"nowhere", "no such file or folder"});
  write_text(dir.file("vocab.json"), join(tiny_vocab_lines()));
  expect_error(load_tokenizer(dir.path()), {"merges.txt", "missing"});
  // A folder where the merges file should be: exists but cannot be read as a file.
  std::filesystem::create_directory(dir.file("merges.txt"));
  expect_error(load_tokenizer(dir.path()), {"merges.txt", "not a regular file"});
  const std::string other = dir.file("weights.bin");
  write_text(other, "x");
  expect_error(load_tokenizer(other), {"weights.bin", "not a tokenizer file"});
}

// Random damage to valid files (flipped bytes, cuts, inserted quotes and brackets) must give a
// tokenizer or an error naming the file, never a crash. Run under the sanitizer build too.
TEST(BpeFiles, DamagedFilesNeverCrash) {
  TempDir dir;
  const std::string vocab = join(tiny_vocab_lines());
  const std::string merges = kTinyMerges;
  std::mt19937 rng(5);
  const char kNasty[] = "\"\\{}[]:,0-9 \n\xff\xc3u";
  for (int iter = 0; iter < 300; ++iter) {
    std::string v = vocab, m = merges;
    std::string& target = iter % 3 == 0 ? m : v;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !target.empty(); ++e) {
      const size_t at = rng() % target.size();
      switch (rng() % 3) {
        case 0:
          target[at] = kNasty[rng() % (sizeof kNasty - 1)];
          break;
        case 1:
          target.resize(at);
          break;
        default:
          target.insert(at, 1, kNasty[rng() % (sizeof kNasty - 1)]);
          break;
      }
    }
    Result<std::unique_ptr<Tokenizer>> tok = load_pair(dir, v, m);
    if (tok.is_ok()) {
      // Whatever loaded still round-trips.
      const std::string text = "abc \xff x";
      Result<std::string> back = tok.value()->decode(tok.value()->encode(text, true));
      ASSERT_TRUE(back.is_ok()) << back.message();
      EXPECT_EQ(back.value(), text);
    } else {
      EXPECT_TRUE(tok.message().find("vocab.json") != std::string::npos ||
                  tok.message().find("merges.txt") != std::string::npos)
          << tok.message();
    }
  }
}

// tokenizer.json around the tiny vocabulary; `extra` replaces or adds top-level members.
std::string tiny_tokenizer_json(const std::string& merges_json, const std::string& pre_tokenizer) {
  std::vector<std::string> vocab = tiny_vocab_lines();
  std::string text =
      "{\n  \"added_tokens\": [{\"id\": 258, \"content\": \"<|endoftext|>\", "
      "\"special\": true}],\n  \"normalizer\": null,\n  \"pre_tokenizer\": " +
      pre_tokenizer + ",\n  \"model\": {\n    \"type\": \"BPE\",\n    \"vocab\": ";
  for (const std::string& l : vocab) text += l + "\n";  // vocab starts on line 7
  return text + ",\n    \"merges\": " + merges_json + "\n  }\n}\n";
}

const char kByteLevel[] = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";

TEST(BpeFiles, TokenizerJsonLoadsWithEitherMergeForm) {
  TempDir dir;
  for (const char* merges : {R"(["a b", "ab c"])", R"([["a", "b"], ["ab", "c"]])"}) {
    write_text(dir.file("tokenizer.json"), tiny_tokenizer_json(merges, kByteLevel));
    Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(dir.path());
    ASSERT_TRUE(tok.is_ok()) << tok.message();
    EXPECT_EQ(tok.value()->encode("abc<|endoftext|>", true), (std::vector<int32_t>{257, 258}));
  }
}

TEST(BpeFiles, TokenizerJsonErrors) {
  TempDir dir;
  const std::string path = dir.file("tokenizer.json");
  write_text(path, tiny_tokenizer_json(R"(["a b", "ab zz"])", kByteLevel));
  expect_error(load_tokenizer(path), {"tokenizer.json line", "token \"zz\""});
  write_text(path, tiny_tokenizer_json(R"(["a b", ["ab", "c", "d"]])", kByteLevel));
  expect_error(load_tokenizer(path), {"tokenizer.json line", "two tokens, found 3"});
  write_text(path, tiny_tokenizer_json(R"(["a b", "abc"])", kByteLevel));
  expect_error(load_tokenizer(path), {"tokenizer.json line", "\"abc\""});
  write_text(path, tiny_tokenizer_json(R"(["a b"])", R"({"type": "Metaspace"})"));
  expect_error(load_tokenizer(path),
               {"tokenizer.json line 4", "pre_tokenizer \"Metaspace\"", "not supported"});
  write_text(path, tiny_tokenizer_json(R"(["a b"])",
                                       R"({"type": "ByteLevel", "add_prefix_space": true})"));
  expect_error(load_tokenizer(path), {"add_prefix_space"});
  write_text(path, tiny_tokenizer_json(R"(["a b"],)", kByteLevel));
  expect_error(load_tokenizer(path), {"tokenizer.json line", "invalid JSON"});
  write_text(path, R"({"model": {"type": "WordPiece", "vocab": {}}})");
  expect_error(load_tokenizer(path), {"tokenizer.json line 1", "WordPiece"});
  write_text(path, R"({"model": {}})");
  expect_error(load_tokenizer(path), {"no model.vocab"});
}

}  // namespace
}  // namespace kvlm
