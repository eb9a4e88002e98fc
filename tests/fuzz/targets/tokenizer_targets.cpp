// Fuzz targets for the tokenizer files: tokenizer.json, vocab.json + merges.txt and llama2.c's
// tokenizer.bin. Whatever loads must then encode and decode without failing, and a byte-level
// BPE must give back exactly the bytes it encoded.
#include "fuzz/targets.h"
#include "tokenizer/bpe_files.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace kvlm::fuzz {
namespace {

// Text with what tokenizers find hard: several scripts, an emoji, digits, contractions, runs of
// spaces, a special token's text, a NUL and bytes that are not UTF-8.
const std::string kSample =
    std::string(
        "Hello, world! It's 2026 \xF0\x9F\x98\x80  caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC "
        "<|endoftext|> <s> \xFF\xFE a\tb\r\n\n   end") +
    std::string(1, '\0') + "tail";

// Encodes `text`, decodes the ids whole and through IncrementalDecoder, and checks what every
// tokenizer promises: ids inside the vocabulary, both decodings equal to token_bytes joined,
// and, for byte-level BPE, the text itself back.
std::string exercise(const Tokenizer& tok, const std::string& text) {
  Result<std::vector<int32_t>> ids = tok.try_encode(text, /*allow_special=*/false);
  if (!ids) return "";  // PCRE2 gave up on the file's pattern: reported, as it should be
  std::string joined;
  IncrementalDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids.value()) {
    if (id < 0 || id >= tok.vocab_size()) return "encode gave id " + std::to_string(id);
    Result<std::string_view> bytes = tok.token_bytes(id);
    if (!bytes) return "encode gave id " + std::to_string(id) + " without bytes";
    joined += bytes.value();
    Result<std::string> piece = stream.push(id);
    if (!piece) return "IncrementalDecoder refused id " + std::to_string(id);
    streamed += piece.value();
  }
  streamed += stream.flush();
  if (streamed != joined) return "IncrementalDecoder lost or changed bytes";
  Result<std::string> decoded = tok.decode(ids.value());
  if (!decoded) return "decode refused encode's ids: " + decoded.message();
  if (dynamic_cast<const ByteLevelBpe*>(&tok) != nullptr && decoded.value() != text)
    return "byte-level BPE: decode(encode(x)) != x";
  (void)tok.try_encode(text, /*allow_special=*/true);
  return "";
}

// At most this much of the input is encoded: loading is what these targets are about, and
// a long text under a pattern that backtracks is slow without being wrong.
constexpr size_t kMaxEncoded = 512;

std::string exercise_all(const Tokenizer& tok, const std::string& input) {
  std::string broken = exercise(tok, kSample);
  if (broken.empty()) broken = exercise(tok, input.substr(0, kMaxEncoded));
  return broken;
}

}  // namespace

std::string fuzz_tokenizer_json(Bytes data) {
  const std::string text = as_text(data);
  auto tok = parse_tokenizer_json(text, "tokenizer.json");
  if (!tok) return "";
  return exercise_all(*tok.value(), text);
}

std::string fuzz_vocab_merges(Bytes data) {
  const std::string text = as_text(data);
  const size_t nul = text.find('\0');
  const std::string vocab = text.substr(0, nul);
  const std::string merges = nul == std::string::npos ? "" : text.substr(nul + 1);
  auto model = parse_vocab_and_merges(vocab, "vocab.json", merges, "merges.txt");
  if (!model) return "";
  auto bpe = ByteLevelBpe::create(std::move(model.value()));
  if (!bpe) return "";
  return exercise_all(*bpe.value(), text);
}

std::string fuzz_llama2c_tokenizer(Bytes data) {
  const std::string text = as_text(data);
  auto tok = Llama2cTokenizer::parse(text, "tokenizer.bin");
  if (!tok) return "";
  const Llama2cTokenizer& t = *tok.value();
  std::string broken = exercise_all(t, text);
  if (!broken.empty()) return broken;
  // run.c's own paths: encode with BOS and EOS, its printed output.
  std::vector<int32_t> ids = t.encode(kSample, /*bos=*/true, /*eos=*/true);
  for (int32_t id : ids)
    if (id < 0 || id >= t.vocab_size()) return "run.c encode gave id " + std::to_string(id);
  if (t.vocab_size() > Llama2cTokenizer::kEos && !t.run_c_output(ids))
    return "run_c_output refused encode's ids";
  return "";
}

}  // namespace kvlm::fuzz
