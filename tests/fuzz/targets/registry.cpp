#include <cstring>

#include "fuzz/targets.h"

namespace kvlm::fuzz {

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = {
      {"safetensors", fuzz_safetensors},
      {"config_json", fuzz_config_json},
      {"tokenizer_json", fuzz_tokenizer_json},
      {"vocab_merges", fuzz_vocab_merges},
      {"llama2c_model", fuzz_llama2c_model},
      {"llama2c_tokenizer", fuzz_llama2c_tokenizer},
      {"bpe_roundtrip", fuzz_bpe_roundtrip},
      {"utf8_stream", fuzz_utf8_stream},
      {"sampler", fuzz_sampler},
      {"gguf", fuzz_gguf},
      {"openai_request", fuzz_openai_request},
  };
  return targets;
}

const FuzzTarget* find_fuzz_target(const std::string& name) {
  for (const FuzzTarget& t : fuzz_targets())
    if (name == t.name) return &t;
  return nullptr;
}

std::string as_text(Bytes data) {
  return std::string(reinterpret_cast<const char*>(data.data()), data.size());
}

void keep(float value) {
  static volatile float sink;
  sink = value;
  (void)sink;
}

uint8_t ByteReader::u8() {
  return at_ < data_.size() ? data_[at_++] : 0;
}

uint32_t ByteReader::u32() {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i);
  return v;
}

float ByteReader::f32() {
  const uint32_t bits = u32();
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace kvlm::fuzz
