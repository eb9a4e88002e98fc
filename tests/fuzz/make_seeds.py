#!/usr/bin/env python3
"""Writes the seed corpora of kvlm's fuzz targets: tests/fuzz/corpus/<target>/seed_*.

Each target gets small valid inputs (so the fuzzer starts inside the parser's happy path) and
hostile ones of the kinds that broke parsers elsewhere (lengths past the end, counts that
overflow, empty-matching regexes, NaN logits). Inputs found by fuzzing are added beside them
as crash_* / slow_* / oom_* files and are never regenerated. Run from anywhere:
    python3 tests/fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    with open(os.path.join(folder, "seed_" + name), "wb") as f:
        f.write(data)


# ---- safetensors ---------------------------------------------------------------------------

def safetensors(header, data=b"", length=None):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    n = len(h) if length is None else length
    return struct.pack("<Q", n) + h + data


def safetensors_seeds():
    t = "safetensors"
    write(t, "valid_f32", safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}},
                                      struct.pack("<4f", 1, 2, 3, 4)))
    write(t, "valid_mixed", safetensors(
        {"__metadata__": {"format": "pt"},
         "a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]},
         "b": {"dtype": "BF16", "shape": [1, 3], "data_offsets": [6, 12]},
         "c": {"dtype": "I64", "shape": [], "data_offsets": [12, 20]}}, bytes(range(20))))
    write(t, "misaligned_f32", safetensors(
        {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
         "b": {"dtype": "F32", "shape": [1, 1], "data_offsets": [1, 5]}}, bytes(5)))
    write(t, "empty_header", safetensors({}))
    write(t, "header_past_end", safetensors({}, length=1 << 40))
    write(t, "header_len_max", struct.pack("<Q", 0xFFFFFFFFFFFFFFFF) + b"{}")
    write(t, "overlap", safetensors(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
    write(t, "gap", safetensors({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)))
    write(t, "shape_overflow", safetensors(
        {"a": {"dtype": "F64", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}}))
    write(t, "negative_dim", safetensors({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, bytes(4)))
    write(t, "offset_huge", safetensors(
        {"a": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551615, 0]}}))
    write(t, "unknown_dtype", safetensors({"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}}, b"x"))
    write(t, "not_object", safetensors(b"[1,2,3]"))
    write(t, "truncated", b"\x10\x00\x00")


# ---- config.json ---------------------------------------------------------------------------

def config_seeds():
    t = "config_json"
    gpt2 = {"model_type": "gpt2", "vocab_size": 64, "n_embd": 32, "n_layer": 2, "n_head": 4,
            "n_positions": 64, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
            "eos_token_id": 63, "bos_token_id": 63}
    write(t, "gpt2", json.dumps(gpt2))
    llama = {"model_type": "llama", "vocab_size": 48, "hidden_size": 24, "intermediate_size": 40,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
             "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1,
             "eos_token_id": [2, 3],
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    write(t, "llama3", json.dumps(llama))
    write(t, "mistral", json.dumps(dict(llama, model_type="mistral", sliding_window=16,
                                        rope_scaling={"type": "linear", "factor": 2})))
    write(t, "deepseek_mla", json.dumps(
        {"model_type": "deepseek_v3", "num_hidden_layers": 4, "num_attention_heads": 8,
         "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8,
         "hidden_size": 64, "vocab_size": 100, "intermediate_size": 128, "n_routed_experts": 4,
         "moe_intermediate_size": 32, "first_k_dense_replace": 1, "q_lora_rank": 12}))
    write(t, "qwen_moe", json.dumps(
        {"model_type": "qwen2_moe", "num_hidden_layers": 3, "num_attention_heads": 4,
         "num_key_value_heads": 2, "hidden_size": 32, "vocab_size": 50, "intermediate_size": 64,
         "num_experts": 4, "mlp_only_layers": [0], "decoder_sparse_step": 2,
         "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}}))
    write(t, "text_config", json.dumps({"model_type": "llava", "text_config": llama}))
    write(t, "gpt2_billion_layers", json.dumps(dict(gpt2, n_layer=1000000000)))
    write(t, "gpt2_huge_embd", json.dumps(dict(gpt2, n_embd=1000000000, n_head=1)))
    write(t, "llama_huge_head_dim", json.dumps(dict(llama, num_attention_heads=4096, head_dim=1 << 20)))
    write(t, "int_overflow", '{"vocab_size": 18446744073709551615, "n_embd": -9223372036854775808, '
                             '"n_layer": 1e400, "n_head": 4}')
    write(t, "deep_nesting", "[" * 2000 + "]" * 2000)
    write(t, "not_json", "{\"vocab_size\": 64,")


# ---- tokenizers ----------------------------------------------------------------------------

def byte_level_alphabet():
    """GPT-2's bytes_to_unicode: byte -> printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def byte_level_vocab():
    alphabet = byte_level_alphabet()
    vocab = {alphabet[b]: b for b in range(256)}
    sp = alphabet[ord(" ")]
    extra = ["he", sp + "t", sp + "the", "in", sp + "a", "er", "<|endoftext|>"]
    for tok in extra:
        vocab[tok] = len(vocab)
    merges = ["h e", sp + " t", sp + "t he", "i n", sp + " a", "e r"]
    merges[2] = sp + "t he"
    return vocab, merges


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                  r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level_json(pattern=None, ignore_merges=False):
    vocab, merges = byte_level_vocab()
    merges = [m for m in merges if m != byte_level_alphabet()[32] + "t he"]
    doc = {"added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>",
                             "special": True}],
           "normalizer": None, "decoder": {"type": "ByteLevel"}}
    if pattern is None:
        doc["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    else:
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    doc["model"] = {"type": "BPE", "byte_fallback": False, "ignore_merges": ignore_merges,
                    "vocab": vocab, "merges": merges}
    return json.dumps(doc, ensure_ascii=False)


def sentencepiece_json():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for p in ["\u2581", "e", "h", "l", "o", "\u2581h", "ll", "ell", "\u2581hell", "\u2581hello"]:
        vocab[p] = len(vocab)
    merges = ["\u2581 h", "l l", "e ll", "\u2581h ell", "\u2581hell o"]
    doc = {"added_tokens": [{"id": i, "content": c, "special": True}
                            for i, c in enumerate(["<unk>", "<s>", "</s>"])],
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Prepend", "prepend": "\u2581"},
               {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
           "pre_tokenizer": None,
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
           "decoder": {"type": "Sequence", "decoders": [
               {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
               {"type": "ByteFallback"}, {"type": "Fuse"},
               {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
           "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                     "vocab": vocab, "merges": merges}}
    return json.dumps(doc, ensure_ascii=False)


def tokenizer_seeds():
    t = "tokenizer_json"
    write(t, "gpt2_byte_level", byte_level_json())
    write(t, "llama3_split", byte_level_json(LLAMA3_PATTERN, ignore_merges=True))
    write(t, "llama2_sentencepiece", sentencepiece_json())
    write(t, "split_matches_empty", byte_level_json(r"\d*"))
    write(t, "split_catastrophic", byte_level_json(r"(a|aa)+$"))
    write(t, "split_bad_regex", byte_level_json(r"(unclosed"))
    write(t, "unigram", '{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}')
    write(t, "duplicate_id", '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}')
    write(t, "huge_id", '{"model": {"type": "BPE", "vocab": {"a": 4294967296}, "merges": []}}')
    write(t, "bad_escape", '{"model": {"type": "BPE", "vocab": {"\\ud800": 0}, "merges": ["\\u00"]}}')

    t = "vocab_merges"
    vocab, merges = byte_level_vocab()
    merges = [m for m in merges if m != byte_level_alphabet()[32] + "t he"]
    write(t, "gpt2_files", json.dumps(vocab, ensure_ascii=False) + "\0#version: 0.2\n" + "\n".join(merges) + "\n")
    write(t, "merge_unknown", json.dumps(vocab, ensure_ascii=False) + "\0zz qq\n")
    write(t, "merge_three_parts", json.dumps(vocab, ensure_ascii=False) + "\0h e r\r\n")
    write(t, "vocab_missing_bytes", '{"a": 0, "b": 1}\0a b\n')
    write(t, "trailing_text", '{"a": 0} x\0')

    t = "llama2c_tokenizer"

    def tokbin(pieces, max_len=None):
        out = struct.pack("<i", max(len(p) for p in pieces) if max_len is None else max_len)
        for i, p in enumerate(pieces):
            out += struct.pack("<fi", -float(i), len(p)) + p
        return out

    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % b for b in range(256)]
    pieces += [b" ", b"e", b"h", b"l", b"o", b" h", b"ll", b"ell", b" hell", b" hello", b"\xc3\xa9"]
    write(t, "valid", tokbin(pieces))
    write(t, "negative_length", struct.pack("<i", 8) + struct.pack("<fi", 0.0, -5))
    write(t, "length_past_end", struct.pack("<i", 8) + struct.pack("<fi", 0.0, 0x7FFFFFFF) + b"abc")
    write(t, "negative_max_len", struct.pack("<i", -1))
    write(t, "too_few_tokens", tokbin(pieces[:10]))
    write(t, "nul_in_piece", tokbin(pieces[:259] + [b"a\0b", b"\xff\xfe"]))


# ---- llama2.c model.bin --------------------------------------------------------------------

def llama2c_seeds():
    t = "llama2c_model"

    def model(dim, hidden, layers, heads, kv_heads, vocab, seq, extra=0):
        head = dim // heads if heads else 0
        n = abs(vocab) * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_heads * head
                                         + 3 * dim * hidden) + dim + seq * head
        if vocab < 0:
            n += abs(vocab) * dim
        header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq)
        return header + struct.pack("<%df" % (n + extra), *([0.5] * (n + extra)))

    write(t, "valid_tiny", model(4, 6, 1, 2, 1, 5, 2))
    write(t, "valid_unshared_classifier", model(4, 4, 1, 2, 2, -3, 1))
    write(t, "trailing_bytes", model(4, 6, 1, 2, 1, 5, 2, extra=1))
    write(t, "ak42", b"42ka" + struct.pack("<i", 2) + bytes(64))
    write(t, "negative_dim", struct.pack("<7i", -4, 6, 1, 2, 1, 5, 2))
    write(t, "int_min_vocab", struct.pack("<7i", 4, 6, 1, 2, 1, -2147483648, 2))
    write(t, "huge_sizes", struct.pack("<7i", 2147483646, 2147483647, 2147483647, 1, 1, 2147483647, 2147483647))
    write(t, "odd_head", struct.pack("<7i", 6, 6, 1, 2, 1, 5, 2))
    write(t, "short", b"\x01\x00\x00\x00")


# ---- properties ----------------------------------------------------------------------------

def property_seeds():
    t = "bpe_roundtrip"
    write(t, "english", "the cat in the hat, they're here: 123 456\n\n  end")
    write(t, "utf8", "caf\u00e9 \u20ac \U0001F600 \u65e5\u672c\u8a9e \u0928\u092e\u0938\u094d\u0924\u0947")
    write(t, "invalid_utf8", b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x90\x28\xbc\x80\x80\xed\xa0\x80")
    write(t, "special_text", "a<|endoftext|>b<|x|><|endoftext|><|")
    write(t, "spaces", " \t\r\n\u00a0\u3000   x  \n")

    t = "utf8_stream"
    ids = [0xE2, 0x82, 0xAC, 256 + 7, 256 + 9, 0xF0, 0x9F, 0x98, 0x80, 0x80, 0xC3, 0x41, 0xFFFF, 0xA9]
    write(t, "mixed", b"".join(struct.pack("<H", i) for i in ids))
    write(t, "emoji_split", b"".join(struct.pack("<H", i) for i in [0xF0, 0x9F, 0x98, 0x80]))

    t = "sampler"

    def sampler(which, params, seed, history, logits):
        out = bytes([which])
        for kind, v in params:
            out += struct.pack("<f" if kind == "f" else "<I", v)
        out += struct.pack("<I", seed) + bytes([len(history)]) + bytes(history)
        return out + struct.pack("<%df" % len(logits), *logits)

    inf, nan = float("inf"), float("nan")
    write(t, "greedy", sampler(0, [], 1, [], [0.1, 0.4, 0.2, 0.4]))
    write(t, "full_chain", sampler(127, [("f", 0.8), ("i", 3), ("f", 0.9), ("f", 0.05), ("f", 1.3),
                                         ("f", 0.5), ("f", 0.5)], 7, [1, 2, 2, 3], [1, 2, 3, 4, 5, 6]))
    write(t, "nan_logits", sampler(1, [("f", 1.0)], 0, [], [nan, 1.0, 2.0]))
    write(t, "inf_logits", sampler(1, [("f", 1.0)], 0, [], [inf, -inf, 0.0]))
    write(t, "all_neg_inf", sampler(1, [("f", 1.0)], 0, [], [-inf, -inf]))
    write(t, "all_equal", sampler(7, [("f", 2.0), ("i", 2), ("f", 0.5)], 3, [0], [0.5] * 8))
    write(t, "tiny_temperature", sampler(1, [("f", 1e-30)], 0, [], [1e30, -1e30, 3e38]))
    write(t, "history_out_of_range", sampler(16, [("f", 2.0)], 0, [200], [0.0, 1.0]))


# ---- GGUF ----------------------------------------------------------------------------------

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf(kvs, tensors, data=b"", n_tensors=None, n_kv=None, version=3, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                len(kvs) if n_kv is None else n_kv)
    for key, vtype, value in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + value
    for name, ne, ttype, offset in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ttype, offset)
    if alignment:
        out += bytes((-len(out)) % alignment)
    return out + data


U32, F32T, STR, ARR, U64 = 4, 6, 8, 9, 10


def gguf_seeds():
    t = "gguf"
    arch = ("general.architecture", STR, gstr("llama"))
    align = ("general.alignment", U32, struct.pack("<I", 32))
    tokens = ("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, 3) + gstr("<unk>") + gstr("a") + gstr("b"))
    scores = ("tokenizer.ggml.scores", ARR, struct.pack("<IQ", F32T, 3) + struct.pack("<3f", 0, -1, -2))
    write(t, "valid_f32", gguf([arch, align, tokens, scores], [("w", [4, 2], 0, 0)], struct.pack("<8f", *range(8))))
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    write(t, "valid_q8_0_f16", gguf([arch], [("q", [32, 1], 8, 0), ("h", [2], 1, 64)],
                                    q8 + bytes(30) + struct.pack("<2e", 1.0, -2.0)))
    write(t, "v2_empty", gguf([], [], version=2))
    # The classes of llama.cpp's GGUF CVEs.
    write(t, "n_tensors_overflow", gguf([arch], [], n_tensors=0xFFFFFFFFFFFFFFFF))
    write(t, "n_kv_overflow", gguf([], [], n_kv=0x7FFFFFFFFFFFFFFF))
    write(t, "n_dims_max", b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gstr("t") + struct.pack("<I", 0xFFFFFFFF) + bytes(64))
    write(t, "elements_times_size_overflow", gguf([], [("w", [1 << 62, 1 << 62], 0, 0)]))
    write(t, "ne_negative", gguf([], [("w", [0xFFFFFFFFFFFFFFFF, 2], 0, 0)], bytes(32)))
    write(t, "alignment_zero", gguf([("general.alignment", U32, struct.pack("<I", 0))], [("w", [1], 0, 0)], bytes(32)))
    write(t, "alignment_2_31", gguf([("general.alignment", U32, struct.pack("<I", 0x80000000))], [("w", [1], 0, 0)], bytes(32)))
    write(t, "alignment_odd", gguf([("general.alignment", U32, struct.pack("<I", 3))], [], bytes(3)))
    write(t, "duplicate_key", gguf([arch, arch], []))
    write(t, "duplicate_tensor", gguf([], [("w", [1], 0, 0), ("w", [1], 0, 32)], bytes(64)))
    write(t, "string_past_end", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 40) + b"key")
    write(t, "array_count_huge", gguf([("a", ARR, struct.pack("<IQ", U32, 1 << 61))], []))
    write(t, "nested_array", gguf([("a", ARR, struct.pack("<IQ", ARR, 1) + struct.pack("<IQ", U32, 0))], []))
    write(t, "offset_past_end", gguf([], [("w", [4], 0, 1 << 40)], bytes(16)))
    write(t, "offset_unaligned", gguf([], [("w", [1], 0, 3)], bytes(40)))
    write(t, "overlapping", gguf([], [("a", [8], 0, 0), ("b", [8], 0, 0)], bytes(32)))
    write(t, "unknown_type", gguf([], [("w", [1], 99, 0)], bytes(32)))
    write(t, "quant_row_partial", gguf([], [("q", [16], 8, 0)], bytes(34)))
    write(t, "bad_value_type", gguf([("k", 77, b"")], []))
    write(t, "truncated", b"GGUF\x03\x00")


# ---- server request bodies ------------------------------------------------------------------

def request_seeds():
    t = "openai_request"
    write(t, "completion", json.dumps({"model": "m", "prompt": "Once upon", "max_tokens": 5,
                                       "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "END"],
                                       "logprobs": 2, "n": 2, "seed": 3, "echo": True,
                                       "stream": True, "stream_options": {"include_usage": True}}))
    write(t, "completion_ids", json.dumps({"prompt": [[1, 2, 3], [4]], "max_tokens": 1}))
    write(t, "completion_list", json.dumps({"prompt": ["a", "b"], "frequency_penalty": 1.5,
                                            "presence_penalty": -0.5}))
    write(t, "chat", json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Hi"},
                                              {"role": "assistant", "content": "Hello"},
                                              {"role": "user", "content": [{"type": "text", "text": "More"}]}],
                                 "max_tokens": 8, "top_k": 4, "min_p": 0.1, "logprobs": True,
                                 "top_logprobs": 3}))
    write(t, "hostile_numbers", '{"prompt": "x", "max_tokens": -1, "n": 1000000, "temperature": 1e400,'
                                ' "top_p": "NaN", "seed": -1, "logprobs": 99}')
    write(t, "hostile_types", '{"prompt": {"a": 1}, "stop": [1, null], "messages": "x", "stream": "yes"}')
    write(t, "ids_out_of_int", '{"prompt": [18446744073709551615, -2147483649]}')
    write(t, "deep", '{"prompt": ' + "[" * 1000 + "]" * 1000 + "}")
    write(t, "not_json", '{"prompt": "x",')


if __name__ == "__main__":
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    llama2c_seeds()
    property_seeds()
    gguf_seeds()
    request_seeds()
