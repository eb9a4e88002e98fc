// Tokenizer throughput, single thread: encoding and decoding MB/s on a few MB of English-like
// prose, plus the parts (pre-tokenizer alone, encoding without the merge cache, a cold cache),
// real English (the machine's license texts) and non-English text, which goes through PCRE2
// rather than the ASCII scanner.
//
// GPT-2's files are looked for in $KVLM_GPT2_TOKENIZER, else ../shared/data/gpt2-tokenizer
// beside the source tree. Run: build/tokenizer_bench [--benchmark_filter=Encode]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/pretokenizer.h"

namespace kvlm {
namespace {

constexpr size_t kCorpusBytes = 4 << 20;

std::string gpt2_dir() {
  if (const char* env = std::getenv("KVLM_GPT2_TOKENIZER")) return env;
  const std::filesystem::path source(__FILE__);
  return (source.parent_path().parent_path().parent_path() / "shared/data/gpt2-tokenizer").string();
}

ByteLevelBpe* gpt2() {
  static std::unique_ptr<Tokenizer> tok = [] {
    Result<std::unique_ptr<Tokenizer>> t = load_tokenizer(gpt2_dir());
    if (!t) {
      std::fprintf(stderr, "tokenizer_bench: %s (set KVLM_GPT2_TOKENIZER)\n", t.message().c_str());
      std::exit(1);
    }
    return std::move(t).value();
  }();
  return static_cast<ByteLevelBpe*>(tok.get());
}

// English-like prose: words drawn from a Zipf distribution over 250 common English words and a
// long tail of 40,000 made-up ones, so the merge cache sees what it would in real text (most
// words repeat, some are new), with sentences, capitals, punctuation, numbers and paragraphs.
std::string make_prose(size_t bytes) {
  static const char* kCommon[] = {
      "the",      "of",      "and",      "to",       "a",       "in",       "is",     "it",
      "you",      "that",    "he",       "was",      "for",     "on",       "are",    "with",
      "as",       "I",       "his",      "they",     "be",      "at",       "one",    "have",
      "this",     "from",    "or",       "had",      "by",      "not",      "word",   "but",
      "what",     "some",    "we",       "can",      "out",     "other",    "were",   "all",
      "there",    "when",    "up",       "use",      "your",    "how",      "said",   "an",
      "each",     "she",     "which",    "do",       "their",   "time",     "if",     "will",
      "way",      "about",   "many",     "then",     "them",    "write",    "would",  "like",
      "so",       "these",   "her",      "long",     "make",    "thing",    "see",    "him",
      "two",      "has",     "look",     "more",     "day",     "could",    "go",     "come",
      "did",      "number",  "sound",    "no",       "most",    "people",   "my",     "over",
      "know",     "water",   "than",     "call",     "first",   "who",      "may",    "down",
      "side",     "been",    "now",      "find",     "any",     "new",      "work",   "part",
      "take",     "get",     "place",    "made",     "live",    "where",    "after",  "back",
      "little",   "only",    "round",    "man",      "year",    "came",     "show",   "every",
      "good",     "me",      "give",     "our",      "under",   "name",     "very",   "through",
      "just",     "form",    "sentence", "great",    "think",   "say",      "help",   "low",
      "line",     "differ",  "turn",     "cause",    "much",    "mean",     "before", "move",
      "right",    "boy",     "old",      "too",      "same",    "tell",     "does",   "set",
      "three",    "want",    "air",      "well",     "also",    "play",     "small",  "end",
      "put",      "home",    "read",     "hand",     "port",    "large",    "spell",  "add",
      "even",     "land",    "here",     "must",     "big",     "high",     "such",   "follow",
      "act",      "why",     "ask",      "men",      "change",  "went",     "light",  "kind",
      "off",      "need",    "house",    "picture",  "try",     "us",       "again",  "animal",
      "point",    "mother",  "world",    "near",     "build",   "self",     "earth",  "father",
      "head",     "stand",   "own",      "page",     "should",  "country",  "found",  "answer",
      "school",   "grow",    "study",    "still",    "learn",   "plant",    "cover",  "food",
      "sun",      "four",    "between",  "state",    "keep",    "eye",      "never",  "last",
      "let",      "thought", "city",     "tree",     "cross",   "farm",     "hard",   "start",
      "might",    "story",   "saw",      "far",      "sea",     "draw",     "left",   "late",
      "run",      "don't",   "while",    "press",    "close",   "night",    "real",   "life",
      "few",      "north",   "it's",     "open",     "seem",    "together", "next",   "white",
      "children", "begin",   "got",      "walk",     "example", "ease",     "paper",  "group",
      "always",   "music",   "those",    "both",     "mark",    "often",    "letter", "until",
      "mile",     "river",   "car",      "feet",     "care",    "second",   "book",   "carry",
      "took",     "science", "eat",      "room",     "friend",  "began",    "idea",   "fish",
      "mountain", "stop",    "once",     "base",     "hear",    "horse",    "cut",    "sure",
      "watch",    "color",   "face",     "wood",     "main",    "enough",   "plain",  "girl",
      "usual",    "young",   "ready",    "above",    "ever",    "red",      "list",   "though",
      "feel",     "talk",    "bird",     "soon",     "body",    "dog",      "family", "direct",
      "pose",     "leave",   "song",     "measure",  "door",    "product",  "black",  "short",
      "numeral",  "class",   "wind",     "question", "happen",  "complete", "ship",   "area",
      "half",     "rock",    "order",    "fire",     "south",   "problem",  "piece",  "told",
      "knew",     "pass",    "since",    "top",      "whole",   "king",     "space",  "heard",
      "best",     "hour",    "better",   "true"};
  constexpr size_t kCommonCount = sizeof(kCommon) / sizeof(kCommon[0]);
  static const char* kSyllables[] = {"al",  "be",  "con", "de", "en",  "for", "ger", "hal",
                                     "in",  "jus", "ka",  "lo", "men", "ni",  "or",  "per",
                                     "qui", "ra",  "sto", "ti", "un",  "ver", "wes", "zy"};
  constexpr size_t kTail = 40000;
  auto tail_word = [&](size_t k) {
    std::string w;
    for (int i = 0; i < 2 + static_cast<int>(k % 3); ++i) {
      w += kSyllables[k % 24];
      k = k / 24 + 7 * i + 1;
    }
    return w;
  };
  // Zipf(1) over common words then the tail, by inverse-CDF sampling.
  const size_t n_types = kCommonCount + kTail;
  std::vector<double> cdf(n_types);
  double sum = 0;
  for (size_t r = 0; r < n_types; ++r) cdf[r] = sum += 1.0 / static_cast<double>(r + 1);
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> uni(0, sum);
  std::string text;
  text.reserve(bytes + 256);
  while (text.size() < bytes) {
    const int words = 6 + static_cast<int>(rng() % 20);
    for (int i = 0; i < words; ++i) {
      const size_t r = std::lower_bound(cdf.begin(), cdf.end(), uni(rng)) - cdf.begin();
      std::string w = r < kCommonCount ? kCommon[r] : tail_word(r - kCommonCount);
      if (i == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
      if (rng() % 40 == 0) w = std::to_string(rng() % 2000);
      if (i > 0) text += ' ';
      text += w;
      if (i + 1 < words && rng() % 9 == 0) text += ',';
    }
    const unsigned end = rng() % 10;
    text += end == 0 ? "?" : end == 1 ? "!" : ".";
    text += rng() % 6 == 0 ? "\n\n" : " ";
  }
  text.resize(bytes);
  return text;
}

// Text in other scripts (Chinese, Russian, Greek, emoji, accents): every piece goes to PCRE2.
std::string make_multilingual(size_t bytes) {
  const char* kSentences[] = {
      "中文测试：你好，世界！这是一个用于测试分词器速度的句子。",
      "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
      "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ",
      "Emoji 😀🍕❤️ and naïve café résumé façade. ",
      "日本語のテキストです。한국어 텍스트. ",
  };
  std::string text;
  for (size_t i = 0; text.size() < bytes; ++i) text += kSentences[i % 5];
  text.resize(bytes);
  return text;
}

// Real English found on the machine: Debian's license texts (about 300 KB), or empty.
std::string read_licenses() {
  std::string text;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/share/common-licenses", ec)) {
    if (entry.is_symlink() || !entry.is_regular_file()) continue;  // GPL -> GPL-3 and such
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    text += s.str();
  }
  return text;
}

const std::string& prose() {
  static const std::string text = make_prose(kCorpusBytes);
  return text;
}

void BM_Encode(benchmark::State& state, const std::string* text, bool cold) {
  ByteLevelBpe* tok = gpt2();
  size_t n_tokens = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      tok->clear_cache();
      state.ResumeTiming();
    }
    std::vector<int32_t> ids = tok->encode(*text, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text->size()));
  state.counters["bytes_per_token"] =
      static_cast<double>(text->size()) / static_cast<double>(std::max<size_t>(1, n_tokens));
}

void BM_EncodeProse(benchmark::State& state) {
  BM_Encode(state, &prose(), false);
}
void BM_EncodeProseColdCache(benchmark::State& state) {
  BM_Encode(state, &prose(), true);
}

void BM_EncodeProseNoCache(benchmark::State& state) {
  gpt2()->set_cache_enabled(false);
  BM_Encode(state, &prose(), false);
  gpt2()->set_cache_enabled(true);
}

void BM_EncodeMultilingual(benchmark::State& state) {
  static const std::string text = make_multilingual(1 << 20);
  BM_Encode(state, &text, false);
}

void BM_EncodeLicenses(benchmark::State& state) {
  static const std::string text = read_licenses();
  if (text.empty()) {
    state.SkipWithError("no /usr/share/common-licenses on this machine");
    return;
  }
  BM_Encode(state, &text, false);
}

void BM_PretokenizeProse(benchmark::State& state) {
  Result<Gpt2Pretokenizer> pt = Gpt2Pretokenizer::create();
  std::vector<Piece> pieces;
  for (auto _ : state) {
    pieces.clear();
    pt->split(prose(), &pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prose().size()));
}

void BM_PretokenizeProseRegexOnly(benchmark::State& state) {
  Result<Gpt2Pretokenizer> pt = Gpt2Pretokenizer::create();
  std::vector<Piece> pieces;
  for (auto _ : state) {
    pieces.clear();
    pt->split_regex_only(prose(), &pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prose().size()));
}

void BM_DecodeProse(benchmark::State& state) {
  const std::vector<int32_t> ids = gpt2()->encode(prose(), false);
  for (auto _ : state) {
    Result<std::string> text = gpt2()->decode(ids);
    benchmark::DoNotOptimize(text.value().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prose().size()));
  state.counters["tokens_per_second"] =
      benchmark::Counter(static_cast<double>(ids.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_LoadGpt2(benchmark::State& state) {
  for (auto _ : state) {
    Result<std::unique_ptr<Tokenizer>> t = load_tokenizer(gpt2_dir());
    benchmark::DoNotOptimize(t.is_ok());
  }
}

BENCHMARK(BM_EncodeProse)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeProseColdCache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeProseNoCache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeLicenses)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeMultilingual)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PretokenizeProse)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PretokenizeProseRegexOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeProse)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadGpt2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvlm

BENCHMARK_MAIN();
