// llama2.c's model.bin: karpathy's checkpoint format for Llama models (stories15M/42M/110M,
// stories260K, and Meta's Llama 2 exported by export.py), as run.c reads it: the legacy
// version-0 export.
//
// Layout (little-endian):
//   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//     (vocab_size < 0: the output classifier is stored separately; > 0: tied to the embedding)
//   fp32 token_embedding [V, C]
//        rms_att [L, C], wq [L, H*D, C], wk [L, G*D, C], wv [L, G*D, C], wo [L, C, H*D]
//        rms_ffn [L, C], w1 [L, F, C], w2 [L, C, F], w3 [L, F, C]
//        rms_final [C]
//        freq_cis_real [seq_len, D/2], freq_cis_imag [seq_len, D/2]  (unused: run.c skips them)
//        wcls [V, C]  (only when vocab_size < 0)
// Matrices are nn.Linear [out, in], q/k rows in the pair order run.c rotates, so they are used
// in place from the mapping. Constants run.c hard-codes: rms eps 1e-5, rope theta 10000,
// BOS 1, EOS 2.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/llama.h"

namespace kvlm {

struct Llama2cHeader {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // negative: unshared classifier
  int32_t seq_len = 0;
};

constexpr size_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);

// Checks the header (positive sizes, n_heads dividing dim, n_kv_heads dividing n_heads, an even
// head size) and turns it into a config. `source` names the file in errors.
Result<LlamaConfig> llama2c_config(const Llama2cHeader& header, const std::string& source);

// Bytes a valid file with this header has, header included.
uint64_t llama2c_file_bytes(const Llama2cHeader& header);

// Reads and checks the header of `path` (size, magic of the newer exports, impossible values).
Result<Llama2cHeader> read_llama2c_header(const std::string& path);
// The same checks on a whole file's bytes held in memory (the file size must match the header
// exactly); `source` names them in errors.
Result<Llama2cHeader> parse_llama2c_header(const uint8_t* data, size_t size,
                                           const std::string& source);

// Maps `path` and binds its weights in place (converted into owned memory when
// options.convert_weights asks for another dtype). The file size must match the header exactly.
Result<std::unique_ptr<LlamaModel>> load_llama2c(const std::string& path,
                                                 const LoadOptions& options);

// The config.json text equivalent to `path`'s header (model_type "llama"), e.g. for
// `kvlm kv-size`, which reads configs.
Result<std::string> llama2c_config_json(const std::string& path);

}  // namespace kvlm
