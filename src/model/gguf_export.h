// Writing a loaded model (and its tokenizer) as a GGUF file that kvlm and llama.cpp both read:
// `kvlm convert`. Matrices are stored as `type` in ggml's [n_out, n_in] order (GPT-2's Conv1D
// weights transposed, as llama.cpp's convert_hf_to_gguf.py does), norms, biases and GPT-2's
// position embedding as F32, Llama's q/k rows in the pair order kvlm (and ggml) rotate.
#pragma once

#include <string>

#include "model/model.h"
#include "ops/dtype.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

// `tokenizer` may be null (then the file has no tokenizer.ggml.* keys). Supported tokenizers:
// byte-level BPE (GPT-2, Llama 3) and llama2.c / SentencePiece vocabularies with scores.
Status write_gguf(const Model& model, const Tokenizer* tokenizer, DType type,
                  const std::string& path);

}  // namespace kvlm
