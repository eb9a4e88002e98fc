// The JSON reader behind the vocabulary loaders: escapes (including surrogate pairs, which
// tokenizer.json files use for emoji), integers, skipping, and errors that carry line and column.
#include "tokenizer/json_cursor.h"

#include <gtest/gtest.h>

namespace kvlm {
namespace {

TEST(JsonCursor, StringsWithEscapes) {
  JsonCursor json(R"( "a\"b\\c\/\n\t\u0120\u00e9\ud83d\ude00" )", "f.json");
  Result<std::string> s = json.read_string();
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s.value(), "a\"b\\c/\n\t\xc4\xa0\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(json.at_end());
}

TEST(JsonCursor, BadStringsNameLineAndColumn) {
  {
    JsonCursor json("{\n  \"x\\ud83d\": 1}", "f.json");
    ASSERT_TRUE(json.expect('{').is_ok());
    Result<std::string> s = json.read_string();
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.message(),
              "f.json line 2, column 5: invalid JSON: unpaired UTF-16 surrogate in "
              "\\u escape");
  }
  {
    JsonCursor json("\"abc", "f.json");
    EXPECT_EQ(json.read_string().message(),
              "f.json line 1, column 1: invalid JSON: unterminated string");
  }
  {
    JsonCursor json("\"a\\qb\"", "f.json");
    EXPECT_EQ(json.read_string().message(),
              "f.json line 1, column 3: invalid JSON: unknown escape '\\q'");
  }
  {
    JsonCursor json("\"a\nb\"", "f.json");
    EXPECT_FALSE(json.read_string().is_ok());  // raw newline inside a string
  }
}

TEST(JsonCursor, Integers) {
  JsonCursor json("[0, -12, 50256, 1.5, 7e3]", "f.json");
  std::vector<std::string> got;
  Status st = json.read_array([&](size_t, size_t) -> Status {
    Result<int64_t> v = json.read_integer();
    got.push_back(v ? std::to_string(v.value()) : "error");
    return v ? Status::ok() : json.skip_value();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(got, (std::vector<std::string>{"0", "-12", "50256", "error", "error"}));
}

TEST(JsonCursor, ReadsObjectsAndSkipsOtherValues) {
  JsonCursor json(R"({"skip": {"a": [1, 2, {"b": null}], "c": true}, "keep": "yes", "n": -3.5e2})",
                  "f.json");
  std::string kept;
  Status st = json.read_object([&](const std::string& key, size_t) -> Status {
    if (key != "keep") return json.skip_value();
    Result<std::string> v = json.read_string();
    KVLM_RETURN_IF_ERROR(v);
    kept = v.value();
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(kept, "yes");
  EXPECT_TRUE(json.at_end());
}

TEST(JsonCursor, StructuralErrorsSayExpectedAndFound) {
  JsonCursor json("{\"a\": 1,\n \"b\" 2}", "vocab.json");
  Status st = json.read_object([&](const std::string&, size_t) { return json.skip_value(); });
  EXPECT_EQ(st.message(), "vocab.json line 2, column 6: invalid JSON: expected ':', found '2'");
  const std::string nested = std::string(100, '[') + std::string(100, ']');  // outlives the cursor
  JsonCursor deep(nested, "deep.json");
  EXPECT_NE(deep.skip_value().message().find("nested too deeply"), std::string::npos);
  JsonCursor bad_literal("[nul]", "x.json");
  EXPECT_FALSE(bad_literal.skip_value().is_ok());
}

}  // namespace
}  // namespace kvlm
