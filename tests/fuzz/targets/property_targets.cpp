// Property targets: byte-level BPE gives back every byte string it encodes, the streaming
// decoder never splits a character nor loses a byte, and the sampler chain copes with any
// logits and parameters.
#include <cmath>
#include <memory>

#include "fuzz/targets.h"
#include "generate/sampler.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/incremental_decoder.h"

namespace kvlm::fuzz {
namespace {

constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A small byte-level BPE: the 256 bytes, merges that build common English and multi-byte
// UTF-8 tokens (so merged tokens can end inside a character), and two special tokens.
// `pattern` empty: GPT-2's pre-tokenizer with its ASCII scanner.
std::unique_ptr<ByteLevelBpe> make_bpe(const std::string& pattern, bool ignore_merges) {
  BpeModel m;
  for (int b = 0; b < 256; ++b) m.tokens.push_back(std::string(1, static_cast<char>(b)));
  auto id_of = [&](const std::string& t) -> int32_t {
    for (size_t i = 0; i < m.tokens.size(); ++i)
      if (m.tokens[i] == t) return static_cast<int32_t>(i);
    return -1;
  };
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{{" ", "t"},
                                                                             {"h", "e"},
                                                                             {" t", "he"},
                                                                             {"i", "n"},
                                                                             {" ", "a"},
                                                                             {"e", "r"},
                                                                             {"\xE2", "\x82"},
                                                                             {"\xE2\x82", "\xAC"},
                                                                             {"\xF0", "\x9F"},
                                                                             {"\xF0\x9F", "\x98"},
                                                                             {"\xC3", "\xA9"},
                                                                             {"caf", "\xC3\xA9"},
                                                                             {"c", "a"},
                                                                             {"ca", "f"},
                                                                             {"1", "2"},
                                                                             {"\x80", "\x80"},
                                                                             {"\n", "\n"},
                                                                             {" ", " "}}) {
    const int32_t left = id_of(l), right = id_of(r);
    if (left < 0 || right < 0) continue;  // a merge whose parts are not tokens: skipped
    int32_t merged = id_of(l + r);
    if (merged < 0) {
      merged = static_cast<int32_t>(m.tokens.size());
      m.tokens.push_back(l + r);
    }
    m.merges.push_back({left, right, merged});
  }
  for (const char* special : {"<|endoftext|>", "<|x|>"}) {
    m.special_ids.push_back(static_cast<int32_t>(m.tokens.size()));
    m.tokens.push_back(special);
  }
  m.present.assign(m.tokens.size(), true);
  m.pretokenizer_pattern = pattern;
  m.ignore_merges = ignore_merges;
  m.source = "fuzz BPE";
  auto bpe = ByteLevelBpe::create(std::move(m));
  return bpe ? std::move(bpe.value()) : nullptr;
}

const std::vector<std::unique_ptr<ByteLevelBpe>>& tokenizers() {
  static const auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<ByteLevelBpe>>();
    v->push_back(make_bpe("", false));             // GPT-2's pattern, ASCII scanner
    v->push_back(make_bpe(kLlama3Pattern, true));  // Llama 3's, ignore_merges
    return v;
  }();
  return *all;
}

// The length of the valid UTF-8 character starting at s[i], or 0 (an independent strict
// decoder: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_char_at(const std::string& s, size_t i) {
  const auto c = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned b0 = c(i);
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (c(i + 1) < lo || c(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (c(i + k) < 0x80 || c(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string fuzz_bpe_roundtrip(Bytes data) {
  const std::string text = as_text(data);
  for (const auto& tok : tokenizers()) {
    if (!tok) return "the fuzz tokenizer did not build";
    for (bool special : {false, true}) {
      Result<std::vector<int32_t>> ids = tok->try_encode(text, special);
      if (!ids) return "try_encode failed: " + ids.message();
      Result<std::string> back = tok->decode(ids.value());
      if (!back) return "decode refused encode's ids: " + back.message();
      if (back.value() != text) return "decode(encode(x)) != x";
      if (tok->encode(text, special) != ids.value()) return "encode and try_encode differ";
    }
  }
  return "";
}

std::string fuzz_utf8_stream(Bytes data) {
  // Each input byte pair is a token id, so streams mix merged multi-byte tokens, lone
  // continuation bytes, special tokens and ids outside the vocabulary.
  const ByteLevelBpe& tok = *tokenizers()[0];
  ByteReader in(data);
  IncrementalDecoder decoder(tok);
  std::string all, emitted;
  std::vector<size_t> cuts;  // offsets in `all` where a push's text ended
  while (in.remaining() >= 2) {
    const int32_t id = static_cast<int32_t>(in.u8() | (in.u8() << 8)) % (tok.vocab_size() + 8);
    const size_t held = decoder.pending_size();
    Result<std::string> text = decoder.push(id);
    if (id >= tok.vocab_size()) {
      if (text) return "push accepted id " + std::to_string(id) + " outside the vocabulary";
      if (decoder.pending_size() != held) return "a refused id changed the held bytes";
      continue;
    }
    if (!text) return "push refused id " + std::to_string(id) + ": " + text.message();
    all += tok.token_bytes(id).value();
    emitted += text.value();
    cuts.push_back(emitted.size());
    if (decoder.pending_size() > 3) return "more than 3 bytes held";
    if (emitted.size() + decoder.pending_size() != all.size()) return "bytes lost or invented";
  }
  emitted += decoder.flush();
  if (emitted != all) return "the streamed text differs from the tokens' bytes";
  // No cut falls inside a valid character of the whole text: nothing was split.
  std::vector<bool> inside(all.size() + 1, false);
  for (size_t i = 0; i < all.size();) {
    const size_t n = utf8_char_at(all, i);
    for (size_t k = 1; k < n; ++k) inside[i + k] = true;
    i += n ? n : 1;
  }
  for (size_t cut : cuts)
    if (inside[cut]) return "a push ended inside a character at byte " + std::to_string(cut);
  return "";
}

std::string fuzz_sampler(Bytes data) {
  ByteReader in(data);
  SamplingParams p;
  const uint8_t which = in.u8();  // which parameters come from the input, the rest stay "off"
  if (which & 1) p.temperature = in.f32();
  if (which & 2) p.top_k = static_cast<int32_t>(in.u32());
  if (which & 4) p.top_p = in.f32();
  if (which & 8) p.min_p = in.f32();
  if (which & 16) p.repetition_penalty = in.f32();
  if (which & 32) p.presence_penalty = in.f32();
  if (which & 64) p.frequency_penalty = in.f32();
  p.seed = in.u32();
  const size_t n_history = in.u8() % 16;
  std::vector<TokenId> history;
  for (size_t i = 0; i < n_history; ++i) history.push_back(in.u8());
  std::vector<float> logits;
  while (in.remaining() >= 4 && logits.size() < 4096) logits.push_back(in.f32());
  if (logits.empty()) return "";
  Result<SamplerChain> chain = SamplerChain::from_params(p);
  if (!chain) return "";
  const auto n_vocab = static_cast<TokenId>(logits.size());
  const std::span<const TokenId> all(history);
  const TokenHistory h{all.subspan(0, all.size() / 2), all.subspan(all.size() / 2)};
  Rng rng(p.seed);
  Result<TokenId> id = chain->sample(logits, h, rng);
  const bool usable = check_logits(logits).is_ok();
  const bool history_ok =
      std::all_of(history.begin(), history.end(), [&](TokenId t) { return t < n_vocab; });
  if (!id) {
    if (usable && history_ok) return "sample failed on usable logits: " + id.message();
    return "";
  }
  if (!usable) return "sample accepted logits check_logits refuses";
  if (id.value() < 0 || id.value() >= n_vocab) return "sampled id out of range";
  if (logits[id.value()] == -INFINITY) return "sampled a token whose logit is -inf";
  const std::vector<double> probs =
      candidate_probabilities(chain->last_candidates(), logits.size());
  double sum = 0;
  for (double q : probs) {
    if (!(q >= 0.0 && q <= 1.0)) return "a candidate probability outside [0, 1]";
    sum += q;
  }
  if (std::abs(sum - 1.0) > 1e-6) return "candidate probabilities do not sum to 1";
  return "";
}

}  // namespace kvlm::fuzz
