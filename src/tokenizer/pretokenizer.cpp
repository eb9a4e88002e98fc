#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <string>

namespace kvlm {
namespace {

// Python `regex`'s \s: the 25 characters with Unicode's White_Space property.
#define KVLM_WS                                                                               \
  "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}" \
  "\\x{205F}\\x{3000}"

constexpr char kWhiteSpace[] = KVLM_WS;

constexpr char kPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d"
    "| ?\\p{L}+"
    "| ?\\p{N}+"
    "| ?[^" KVLM_WS
    "\\p{L}\\p{N}]+"
    "|[" KVLM_WS "]+(?![^" KVLM_WS
    "])"
    "|[" KVLM_WS "]+";
#undef KVLM_WS

// Classes of ASCII bytes as GPT-2's pattern sees them.
enum : uint8_t { kLetter, kDigit, kSpace, kOther, kNonAscii };

constexpr uint8_t classify(unsigned c) {
  if (c >= 0x80) return kNonAscii;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return kLetter;
  if (c >= '0' && c <= '9') return kDigit;
  if (c == ' ' || (c >= '\t' && c <= '\r')) return kSpace;  // \t \n \v \f \r
  return kOther;
}

struct ClassTable {
  uint8_t of[256];
  constexpr ClassTable() : of() {
    for (unsigned c = 0; c < 256; ++c) of[c] = classify(c);
  }
};
constexpr ClassTable kClass;

constexpr size_t kNeedRegex = 0;  // the ASCII scanner's "cannot decide here"

// The end of the piece that starts at i, if it can be decided from ASCII bytes alone.
size_t scan_ascii_piece(const unsigned char* s, size_t n, size_t i) {
  const unsigned c = s[i];
  uint8_t cls = kClass.of[c];
  if (cls == kNonAscii) return kNeedRegex;
  if (c == '\'' && i + 1 < n) {
    const unsigned c1 = s[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      const unsigned c2 = s[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
        return i + 3;
      }
    }
  }
  size_t j = i;
  if (c == ' ' && i + 1 < n) {
    const uint8_t next = kClass.of[s[i + 1]];
    if (next == kNonAscii) return kNeedRegex;
    if (next != kSpace) {  // " word", " 123", " ..."
      cls = next;
      j = i + 1;
    }
  }
  if (cls != kSpace) {
    // A run of one class; a non-ASCII byte might continue it (a letter such as 'é').
    while (j < n && kClass.of[s[j]] == cls) ++j;
    if (j < n && kClass.of[s[j]] == kNonAscii) return kNeedRegex;
    return j;
  }
  // Whitespace: \s+(?!\S) takes the run but its last character when a non-space follows,
  // leaving that one to join the next word; a single space before a non-space is \s+.
  while (j < n && kClass.of[s[j]] == kSpace) ++j;
  if (j == n) return j;
  if (kClass.of[s[j]] == kNonAscii) return kNeedRegex;
  return j - i >= 2 ? j - 1 : j;
}

}  // namespace

std::string spell_out_whitespace(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i + 1, end + 2 - (i + 1)));
        i = end + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

struct Pretokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

Result<Pretokenizer> Pretokenizer::compile(const std::string& pcre2_pattern, bool fast_ascii,
                                           const std::string& source) {
  auto regex = std::make_shared<Regex>();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()),
                              pcre2_pattern.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                              &error_code, &error_offset, nullptr);
  if (regex->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return Status::error(source + ": PCRE2 rejected the pattern at offset " +
                         std::to_string(error_offset) + " (of " + pcre2_pattern +
                         "): " + reinterpret_cast<const char*>(message));
  }
  // JIT is several times faster; without it (some platforms) pcre2_match interprets.
  pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
  return Pretokenizer(std::move(regex), fast_ascii, source);
}

Result<Pretokenizer> Pretokenizer::create() {
  return compile(kPattern, /*fast_ascii=*/true, "GPT-2 pre-tokenizer");
}

Result<Pretokenizer> Pretokenizer::create(std::string_view pattern, const std::string& source) {
  const std::string spelled = spell_out_whitespace(pattern);
  // GPT-2's own pattern, as a tokenizer.json may spell it, keeps the ASCII scanner.
  return compile(spelled, spelled == kPattern, source);
}

Result<size_t> Pretokenizer::split(std::string_view text, size_t pos, size_t max_pieces,
                                   std::vector<Piece>* pieces) const {
  return split_impl(text, pos, max_pieces, fast_ascii_, pieces);
}

Status Pretokenizer::split(std::string_view text, std::vector<Piece>* pieces) const {
  return split_impl(text, 0, SIZE_MAX, fast_ascii_, pieces).status();
}

Status Pretokenizer::split_regex_only(std::string_view text, std::vector<Piece>* pieces) const {
  return split_impl(text, 0, SIZE_MAX, /*fast_ascii=*/false, pieces).status();
}

Result<size_t> Pretokenizer::split_impl(std::string_view text, size_t pos, size_t max_pieces,
                                        bool fast_ascii, std::vector<Piece>* pieces) const {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const size_t stop_at = pieces->size() + std::min(max_pieces, SIZE_MAX - pieces->size());
  // Match data is per call, so one pre-tokenizer can serve many threads.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(regex_->code, nullptr), &pcre2_match_data_free);
  if (!match) return Status::error(source_ + ": out of memory for PCRE2's match data");
  size_t i = pos;
  while (i < n && pieces->size() < stop_at) {
    if (fast_ascii) {
      const size_t end = scan_ascii_piece(s, n, i);
      if (end != kNeedRegex) {
        pieces->push_back({i, end});
        i = end;
        continue;
      }
    }
    // A pattern that can match the empty string (a tokenizer.json may hold one) must not
    // match it where the search starts, or the loop would never move: an empty match there is
    // refused and PCRE2 looks further on. Empty matches further on are pieces of nothing and
    // are dropped, as Hugging Face's Split drops empty pieces.
    int rc = pcre2_match(regex_->code, s, n, i, PCRE2_NOTEMPTY_ATSTART, match.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // the interpreter keeps its stack on the heap
      rc = pcre2_match(regex_->code, s, n, i, PCRE2_NOTEMPTY_ATSTART | PCRE2_NO_JIT, match.get(),
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {  // only bytes that are not valid UTF-8 remain
      pieces->push_back({i, n});
      return n;
    }
    if (rc < 0) {
      // A match limit, a depth limit, ...: PCRE2 gave up, so where the pieces end is unknown.
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      return Status::error(source_ +
                           ": PCRE2 could not run the pre-tokenizer pattern on the text at byte " +
                           std::to_string(i) + ": " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (begin > i) {  // text between matches (GPT-2's pattern: bytes that are not valid UTF-8)
      pieces->push_back({i, begin});
    }
    if (end > begin) pieces->push_back({begin, end});
    i = end;
  }
  return i;
}

}  // namespace kvlm
