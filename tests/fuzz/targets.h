// kvlm's fuzz targets: one function per front door that reads bytes from strangers (model
// files, tokenizer files, config.json) and per property that must hold for any input (BPE
// round trips, the streaming UTF-8 decoder, the sampler chain). Each takes arbitrary bytes and
// returns "" when all is well, or a sentence saying which property broke; memory errors,
// undefined behaviour, leaks, hangs and runaway allocations are caught by the sanitizers and
// libFuzzer's limits instead.
//
// The same functions run under libFuzzer (fuzz_main.cpp, built with -DKVLM_FUZZ=ON) and in the
// ordinary test suite (corpus_replay_test.cpp replays every file of corpus/<target>/), so an
// input that once failed stays a regression test.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvlm::fuzz {

using Bytes = std::span<const uint8_t>;

struct FuzzTarget {
  const char* name;  // also the corpus folder: tests/fuzz/corpus/<name>/
  std::string (*run)(Bytes data);
};

// Every target, in a fixed order.
const std::vector<FuzzTarget>& fuzz_targets();
// The target called `name`, or nullptr.
const FuzzTarget* find_fuzz_target(const std::string& name);

// The targets (targets/*.cpp).
std::string fuzz_safetensors(Bytes data);        // header, tensor table, typed views
std::string fuzz_config_json(Bytes data);        // GPT-2, Llama and kv-size readers
std::string fuzz_tokenizer_json(Bytes data);     // Hugging Face tokenizer.json
std::string fuzz_vocab_merges(Bytes data);       // vocab.json NUL merges.txt
std::string fuzz_llama2c_model(Bytes data);      // llama2.c model.bin header (and weights)
std::string fuzz_llama2c_tokenizer(Bytes data);  // llama2.c tokenizer.bin
std::string fuzz_bpe_roundtrip(Bytes data);      // decode(encode(x)) == x, byte-level BPE
std::string fuzz_utf8_stream(Bytes data);        // IncrementalDecoder never splits nor loses
std::string fuzz_sampler(Bytes data);            // sampler chain on any logits and params
std::string fuzz_gguf(Bytes data);               // GGUF header, metadata, tensor infos
std::string fuzz_openai_request(Bytes data);     // the server's request bodies

// Helpers shared by the targets.
std::string as_text(Bytes data);
// Reads a value so that AddressSanitizer checks it and the compiler cannot drop the read.
void keep(float value);
// Reads fixed-size values from the front of the input, zeros once it runs out.
class ByteReader {
 public:
  explicit ByteReader(Bytes data) : data_(data) {}
  uint8_t u8();
  uint32_t u32();
  float f32();
  Bytes rest() const { return data_.subspan(at_); }
  size_t remaining() const { return data_.size() - at_; }

 private:
  Bytes data_;
  size_t at_ = 0;
};

}  // namespace kvlm::fuzz
