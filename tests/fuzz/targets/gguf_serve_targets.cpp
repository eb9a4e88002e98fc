// Fuzz targets for the GGUF reader (src/model/gguf*) and the server's request-body parsing
// (src/serve/openai_request*): the newest front doors, added as they landed.
#include <vector>

#include "fuzz/targets.h"
#include "model/gguf.h"
#include "ops/quant.h"
#include "serve/chat_template.h"
#include "serve/openai_request.h"

namespace kvlm::fuzz {

std::string fuzz_gguf(Bytes data) {
  auto file = GgufFile::parse(data, "fuzz.gguf");
  if (!file) return "";
  const uint8_t* begin = data.data();
  const uint8_t* end = begin + data.size();
  for (const GgufTensor& t : file->tensors()) {
    if (t.n_bytes > data.size()) return "tensor larger than the file";
    if (t.data < begin || t.data > end || static_cast<uint64_t>(end - t.data) < t.n_bytes)
      return "tensor bytes outside the buffer";
    if (t.n_dims < 0 || t.n_dims > 4) return "n_dims outside 0..4 accepted";
    if (file->tensor(t.name) != &t) return "tensor lookup by name finds another tensor";
    if (t.n_bytes > 0) keep(static_cast<float>(t.data[0] ^ t.data[t.n_bytes - 1]));
    // The first row through the scalar dequantizer (what a quantized matmul's reference reads).
    const uint64_t row = static_cast<uint64_t>(t.ne[0]);
    if (row > 0 && row <= 4096 && row % dtype_block_elements(t.dtype) == 0 &&
        dtype_bytes(t.dtype, row) <= t.n_bytes) {
      std::vector<float> out(row);
      dequantize_row(out.data(), t.data, t.dtype, row);
      keep(out[row - 1]);
    }
  }
  for (const auto& [key, value] : file->metadata()) {
    if (value.type == GgufType::kArray && value.element_type != GgufType::kString) {
      for (uint64_t i = 0; i < value.count && i < 4096; ++i)
        keep(static_cast<float>(gguf_array_float(value, i) + gguf_array_int(value, i)));
    }
    (void)file->get_uint(key);
    (void)file->get_float(key);
    (void)file->get_bool(key);
    (void)file->get_string(key);
    (void)file->where_key(key);
  }
  (void)file->get_array("tokenizer.ggml.tokens", GgufType::kString);
  return "";
}

std::string fuzz_openai_request(Bytes data) {
  const std::string body = as_text(data);
  for (bool chat : {false, true}) {
    auto parsed = chat ? serve::parse_chat_request(body) : serve::parse_completion_request(body);
    if (!parsed) continue;
    const serve::GenerationParams& p = parsed.value();
    if (!p.sampling.validate().is_ok())
      return "a request passed with sampling params validate() refuses";
    if (p.n < 1 || p.n > serve::kMaxChoices) return "n outside 1..16 accepted";
    if (p.logprobs < -1 || p.logprobs > serve::kMaxLogprobs) return "logprobs outside -1..20";
    if (p.stop.size() > static_cast<size_t>(serve::kMaxStops)) return "more than 4 stops";
    if (p.max_tokens && *p.max_tokens < 0) return "negative max_tokens accepted";
    if (chat) {
      for (auto kind : {serve::ChatTemplateKind::kChatML, serve::ChatTemplateKind::kLlama2,
                        serve::ChatTemplateKind::kLlama3, serve::ChatTemplateKind::kMistral}) {
        serve::ChatTemplate tmpl;
        tmpl.kind = kind;
        (void)serve::render_chat(tmpl, p.messages);
      }
    } else {
      for (const serve::PromptInput& prompt : p.prompts)
        if (!prompt.is_text)
          (void)serve::check_prompt(prompt.ids, p.max_tokens.value_or(16), 64, 50, "prompt");
    }
  }
  return "";
}

}  // namespace kvlm::fuzz
