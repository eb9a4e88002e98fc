// StopMatcher: stop strings matched across piece boundaries, the stop text never emitted,
// partial matches released once they fail, several stops, and a randomized comparison with a
// direct search of the whole text.
#include "generate/sampler_stop.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generate/rng.h"

namespace kvlm {
namespace {

StopMatcher make(std::vector<std::string> stops) {
  auto m = StopMatcher::create(std::move(stops));
  EXPECT_TRUE(m.is_ok()) << m.message();
  return std::move(m).value();
}

TEST(StopMatcher, NoStopsEmitsEverythingAtOnce) {
  StopMatcher m = make({});
  EXPECT_EQ(m.feed("hello").emit, "hello");
  EXPECT_EQ(m.feed(" world").emit, " world");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopSplitOverThreePieces) {
  StopMatcher m = make({"<|end|>"});
  auto a = m.feed("Hello <|");
  EXPECT_EQ(a.emit, "Hello ");
  EXPECT_FALSE(a.stopped);
  EXPECT_EQ(m.held_bytes(), 2u);
  auto b = m.feed("en");
  EXPECT_EQ(b.emit, "");
  EXPECT_FALSE(b.stopped);
  auto c = m.feed("d|> more text");
  EXPECT_EQ(c.emit, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(m.matched_stop(), 0u);
  // Finished: later pieces and flush emit nothing.
  auto d = m.feed("ignored");
  EXPECT_EQ(d.emit, "");
  EXPECT_TRUE(d.stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, PartialMatchThatFailsIsEmitted) {
  StopMatcher m = make({"###"});
  EXPECT_EQ(m.feed("a#").emit, "a");
  EXPECT_EQ(m.feed("#").emit, "");
  auto s = m.feed("b");
  EXPECT_EQ(s.emit, "##b");
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(m.held_bytes(), 0u);
}

TEST(StopMatcher, HeldTextIsFlushedAtTheEnd) {
  StopMatcher m = make({"STOP"});
  EXPECT_EQ(m.feed("one ST").emit, "one ");
  EXPECT_EQ(m.flush(), "ST");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, TextBeforeTheStopInTheSamePieceIsEmitted) {
  StopMatcher m = make({"\n\n"});
  auto s = m.feed("last line.\n\nnext paragraph");
  EXPECT_EQ(s.emit, "last line.");
  EXPECT_TRUE(s.stopped);
}

TEST(StopMatcher, MultipleStops) {
  StopMatcher m = make({"STOP", "END"});
  EXPECT_EQ(m.feed("xxEN").emit, "xx");  // "EN" could begin END
  auto s = m.feed("D yy");
  EXPECT_EQ(s.emit, "");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(m.matched_stop(), 1u);

  // Two complete in one piece: the one that completes first in the text wins, as it would
  // have if the text had arrived a byte at a time.
  StopMatcher n = make({"bcde", "cd"});
  auto t = n.feed("abcdef");
  EXPECT_EQ(t.emit, "ab");
  EXPECT_EQ(n.matched_stop(), 1u);

  // A short stop inside a longer one: matched as soon as it completes.
  StopMatcher o = make({"abc", "b"});
  auto u = o.feed("xa");
  EXPECT_EQ(u.emit, "x");
  auto v = o.feed("bc");
  EXPECT_EQ(v.emit, "a");
  EXPECT_EQ(o.matched_stop(), 1u);

  // Two ending at the same byte: the longer cuts earlier.
  StopMatcher q = make({"c", "abc"});
  EXPECT_EQ(q.feed("xxabcyy").emit, "xx");
  EXPECT_EQ(q.matched_stop(), 1u);
}

TEST(StopMatcher, SelfOverlappingStop) {
  StopMatcher m = make({"aab"});
  std::string out;
  for (const char* piece : {"a", "a", "a", "b"}) out += m.feed(piece).emit;
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, MultiByteUtf8StopAcrossPieces) {
  StopMatcher m = make({"\xC3\xA9!"});       // "é!"
  EXPECT_EQ(m.feed("caf\xC3").emit, "caf");  // a piece may end inside a character
  auto s = m.feed("\xA9!");
  EXPECT_EQ(s.emit, "");
  EXPECT_TRUE(s.stopped);
}

TEST(StopMatcher, RejectsEmptyAndInvalidStops) {
  auto empty = StopMatcher::create({"ok", ""});
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.message(), "--stop: expected a non-empty string, found an empty one (stop #2)");
  auto bad = StopMatcher::create({"a\xFF"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("--stop"), std::string::npos);
  EXPECT_NE(bad.message().find("UTF-8"), std::string::npos);
  EXPECT_FALSE(StopMatcher::create({"\xC3"}).is_ok());          // truncated
  EXPECT_FALSE(StopMatcher::create({"\xC0\x80"}).is_ok());      // overlong
  EXPECT_FALSE(StopMatcher::create({"\xED\xA0\x80"}).is_ok());  // surrogate
}

TEST(StopMatcher, RandomTextsMatchADirectSearch) {
  // Texts over a tiny alphabet make partial matches frequent; pieces of 0..4 bytes.
  Rng rng(2024);
  auto rand_string = [&](size_t min_len, size_t max_len) {
    const size_t len = min_len + rng.next_u64() % (max_len - min_len + 1);
    std::string s;
    for (size_t i = 0; i < len; ++i) s += "ab"[rng.next_u64() % 2];
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    const size_t n_stops = 1 + rng.next_u64() % 3;
    for (size_t i = 0; i < n_stops; ++i) stops.push_back(rand_string(1, 5));
    const std::string text = rand_string(0, 40);

    // The reference: the first end position at which some stop string ends; the longest of
    // those ending there decides the cut.
    size_t first = std::string::npos;
    for (size_t end = 1; end <= text.size() && first == std::string::npos; ++end) {
      for (const std::string& s : stops) {
        if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0)
          first = std::min(first, end - s.size());
      }
    }
    const std::string expected = first == std::string::npos ? text : text.substr(0, first);

    StopMatcher m = make(stops);
    std::string out;
    for (size_t pos = 0; pos < text.size() && !m.stopped();) {
      const size_t len = std::min<size_t>(rng.next_u64() % 5, text.size() - pos);
      out += m.feed(std::string_view(text).substr(pos, len)).emit;
      pos += len;
    }
    out += m.flush();
    std::string all_stops;
    for (const std::string& s : stops) all_stops += " '" + s + "'";
    ASSERT_EQ(out, expected) << "text '" << text << "' stops" << all_stops;
    EXPECT_EQ(m.stopped(), first != std::string::npos);
  }
}

}  // namespace
}  // namespace kvlm
