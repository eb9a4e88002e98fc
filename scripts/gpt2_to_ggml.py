#!/usr/bin/env python3
"""A GPT-2 Hugging Face folder (config.json + model.safetensors) as the legacy ggml GPT-2 file
that ggml's examples/gpt-2 programs load (gpt-2-backend, gpt-2-batched, gpt-2-quantize...), so
kvlm and ggml (the library under llama.cpp) run the same weights. Python standard library only.

    python3 scripts/gpt2_to_ggml.py MODEL_DIR OUT.bin [--type f32|f16]

--type: the matrices' type in OUT.bin (default: as stored: F32, F16 or BF16 copied bit for bit;
f16 rounds F32 matrices to nearest even, as kvlm's --weights f16 does). Quantize OUT.bin with
ggml's own tool for Q8_0: `gpt-2-quantize OUT.bin OUT-q8_0.bin q8_0`.

The layout, as ggml's examples/gpt-2/main-*.cpp read it (all integers int32, little-endian):
  magic 0x67676d6c ("ggml"); n_vocab, n_ctx, n_embd, n_head, n_layer, ftype
  (0 F32, 1 F16, 24 BF16: the matrices' type); n_vocab again, then per token its byte length
  and bytes; then per tensor: n_dims, name length, type (0 F32, 1 F16, 30 BF16), ne[0..n_dims)
  (ne[0] the contiguous dimension), the name, and the data.
Matrices are stored [out, in] (ne = in, out): Hugging Face's Conv1D layout [in, out] is
transposed; the embeddings keep theirs ([n_vocab, n_embd] is already ne = n_embd, n_vocab).
Norms, biases and the position embedding are F32 whatever the matrices are, as the examples
expect. A separate lm_head.weight is written first as model/lm_head: the examples tie the head
to model/wte unless model/lm_head came before it.

The vocabulary is synthetic: token i is the text " i", so the examples' tokenizer (whole words
looked up in the vocabulary) reads the prompt " 5 17 900" as ids [5, 17, 900] and what they
print reads back as ids. Weights are what kvlm compares; kvlm is given the same ids.
Exit 1 with a message naming the file and field on input it cannot convert.
"""
import array
import json
import math
import mmap
import os
import struct
import sys

GGML_MAGIC = 0x67676D6C
FTYPE = {"F32": 0, "F16": 1, "BF16": 24}  # the header's ftype for the matrices' type
TTYPE = {"F32": 0, "F16": 1, "BF16": 30}  # a tensor's ggml_type
ELEMENT_BYTES = {"F32": 4, "F16": 2, "BF16": 2}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
GGML_NAMES = {
    "ln_1.weight": "ln_1/g", "ln_1.bias": "ln_1/b", "ln_2.weight": "ln_2/g", "ln_2.bias": "ln_2/b",
    "attn.c_attn.weight": "attn/c_attn/w", "attn.c_attn.bias": "attn/c_attn/b",
    "attn.c_proj.weight": "attn/c_proj/w", "attn.c_proj.bias": "attn/c_proj/b",
    "mlp.c_fc.weight": "mlp/c_fc/w", "mlp.c_fc.bias": "mlp/c_fc/b",
    "mlp.c_proj.weight": "mlp/c_proj/w", "mlp.c_proj.bias": "mlp/c_proj/b",
}


class ConvertError(Exception):
    pass


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        config = json.load(open(path, encoding="utf-8"))
    except OSError as e:
        raise ConvertError(f"{path}: cannot read: {e.strerror}")
    except json.JSONDecodeError as e:
        raise ConvertError(f"{path}: not JSON: {e.msg} at line {e.lineno}")

    def integer(*keys):
        for key in keys:
            value = config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        raise ConvertError(f"{path}: field '{keys[0]}' must be a positive integer, found "
                           f"{json.dumps(config.get(keys[0]))}")

    hp = dict(n_vocab=integer("vocab_size"), n_ctx=integer("n_positions", "n_ctx"),
              n_embd=integer("n_embd"), n_head=integer("n_head"), n_layer=integer("n_layer"))
    # What ggml's examples hard-code: eps 1e-5, a tanh GELU, a 4x MLP.
    eps = config.get("layer_norm_epsilon", 1e-5)
    if not isinstance(eps, (int, float)) or not math.isclose(eps, 1e-5, rel_tol=1e-6):
        raise ConvertError(f"{path}: field 'layer_norm_epsilon' is {json.dumps(eps)}; ggml's "
                           "GPT-2 examples use 1e-5 only")
    act = config.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ConvertError(f"{path}: field 'activation_function' is {json.dumps(act)}; ggml's "
                           "GPT-2 examples compute gelu_new (the tanh approximation) only")
    n_inner = config.get("n_inner")
    if n_inner is not None and n_inner != 4 * hp["n_embd"]:
        raise ConvertError(f"{path}: field 'n_inner' is {json.dumps(n_inner)}; ggml's GPT-2 "
                           f"examples need 4 * n_embd = {4 * hp['n_embd']}")
    if hp["n_embd"] % hp["n_head"]:
        raise ConvertError(f"{path}: n_embd {hp['n_embd']} is not a multiple of n_head "
                           f"{hp['n_head']}")
    return hp


class Safetensors:
    """The tensors of one model.safetensors, memory-mapped: name -> (dtype, shape, bytes)."""

    def __init__(self, path):
        self.path = path
        try:
            f = open(path, "rb")
        except OSError as e:
            raise ConvertError(f"{path}: cannot read: {e.strerror}")
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise ConvertError(f"{path}: {size} bytes, too short for a safetensors header")
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        (n,) = struct.unpack_from("<Q", self.map, 0)
        if n > size - 8:
            raise ConvertError(f"{path}: header length {n} runs past the file's {size} bytes")
        try:
            header = json.loads(bytes(self.map[8:8 + n]))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConvertError(f"{path}: header is not JSON ({e})")
        self.base = 8 + n
        self.tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        self.size = size

    def get(self, name):
        info = self.tensors.get(name)
        if info is None:
            raise ConvertError(f"{self.path}: no tensor '{name}'")
        dtype, shape = info.get("dtype"), info.get("shape")
        begin, end = info.get("data_offsets", (0, 0))
        if dtype not in ELEMENT_BYTES:
            raise ConvertError(f"{self.path}: tensor '{name}' has dtype {json.dumps(dtype)}; "
                               "supported: F32, F16, BF16")
        n = math.prod(shape)
        if end - begin != n * ELEMENT_BYTES[dtype] or self.base + end > self.size:
            raise ConvertError(f"{self.path}: tensor '{name}': data_offsets [{begin}, {end}] do "
                               f"not hold {shape} {dtype} inside the file")
        return dtype, list(shape), memoryview(self.map)[self.base + begin:self.base + end]


def as_f32(dtype, data):
    """Bytes of the tensor as little-endian float32 (F16 and BF16 widened exactly)."""
    if dtype == "F32":
        return bytes(data)
    n = len(data) // 2
    if dtype == "F16":
        return array.array("f", struct.unpack(f"<{n}e", data)).tobytes()
    halves = array.array("H")
    halves.frombytes(data)
    return array.array("I", (h << 16 for h in halves)).tobytes()


def as_type(dtype, data, want):
    """Matrix bytes in `want` (as stored, or F32 -> F16 rounded to nearest even)."""
    if want == dtype:
        return bytes(data)
    if want == "F16" and dtype == "F32":
        floats = array.array("f")
        floats.frombytes(data)
        try:
            return struct.pack(f"<{len(floats)}e", *floats)
        except OverflowError:
            raise ConvertError("a matrix value is beyond float16's range (65504)")
    raise ConvertError(f"--type {want.lower()}: cannot convert {dtype} matrices (convert from "
                       "F32, or keep the stored type)")


def transposed(data, rows, cols, element_bytes):
    """[rows, cols] row-major bytes as [cols, rows]."""
    items = array.array("I" if element_bytes == 4 else "H")
    items.frombytes(data)
    out = array.array(items.typecode)
    for j in range(cols):
        out.extend(items[j::cols])
    return out.tobytes()


def write_tensor(out, name, ttype, ne, data):
    encoded = name.encode()
    out.write(struct.pack("<iii", len(ne), len(encoded), TTYPE[ttype]))
    out.write(struct.pack(f"<{len(ne)}i", *ne))
    out.write(encoded)
    out.write(data)


def convert(model_dir, out_path, want_type=None):
    hp = read_config(model_dir)
    st = Safetensors(os.path.join(model_dir, "model.safetensors"))
    prefix = "transformer." if "transformer.wte.weight" in st.tensors else ""
    C, V, L = hp["n_embd"], hp["n_vocab"], hp["n_layer"]

    def tensor(name, shape):
        dtype, found, data = st.get(name)
        if found != shape:
            raise ConvertError(f"{st.path}: tensor '{name}' has shape {found}, expected {shape} "
                               "from config.json")
        return dtype, data

    wte_dtype, _ = tensor(prefix + "wte.weight", [V, C])
    matrix_type = (want_type or wte_dtype).upper()
    with open(out_path, "wb") as out:
        out.write(struct.pack("<7i", GGML_MAGIC, V, hp["n_ctx"], C, hp["n_head"], L,
                              FTYPE[matrix_type]))
        out.write(struct.pack("<i", V))
        for i in range(V):
            text = f" {i}".encode()
            out.write(struct.pack("<i", len(text)) + text)

        def vector(name, ggml_name, shape):
            dtype, data = tensor(name, shape)
            write_tensor(out, ggml_name, "F32", shape[::-1], as_f32(dtype, data))

        def matrix(name, ggml_name, shape, transpose):
            dtype, data = tensor(name, shape)
            if transpose:  # Conv1D [in, out] -> [out, in]
                data = transposed(data, shape[0], shape[1], ELEMENT_BYTES[dtype])
                shape = shape[::-1]
            write_tensor(out, ggml_name, matrix_type, shape[::-1],
                         as_type(dtype, data, matrix_type))

        if "lm_head.weight" in st.tensors:  # untied: before model/wte (see the docstring)
            matrix("lm_head.weight", "model/lm_head", [V, C], False)
        matrix(prefix + "wte.weight", "model/wte", [V, C], False)
        vector(prefix + "wpe.weight", "model/wpe", [hp["n_ctx"], C])
        vector(prefix + "ln_f.weight", "model/ln_f/g", [C])
        vector(prefix + "ln_f.bias", "model/ln_f/b", [C])
        shapes = {"attn.c_attn.weight": [C, 3 * C], "attn.c_attn.bias": [3 * C],
                  "attn.c_proj.weight": [C, C], "mlp.c_fc.weight": [C, 4 * C],
                  "mlp.c_fc.bias": [4 * C], "mlp.c_proj.weight": [4 * C, C]}
        for layer in range(L):
            for hf, ggml in GGML_NAMES.items():
                name = f"{prefix}h.{layer}.{hf}"
                ggml_name = f"model/h{layer}/{ggml}"
                shape = shapes.get(hf, [C])
                if hf in CONV1D:
                    matrix(name, ggml_name, shape, True)
                else:
                    vector(name, ggml_name, shape)
    return hp, matrix_type


def main(argv):
    args = argv[1:]
    want = None
    if "--type" in args:
        at = args.index("--type")
        if at + 1 >= len(args) or args[at + 1] not in ("f32", "f16"):
            print("gpt2_to_ggml: --type: expected f32 or f16", file=sys.stderr)
            return 1
        want = args[at + 1]
        del args[at:at + 2]
    if len(args) != 2 or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 1
    try:
        hp, matrix_type = convert(args[0], args[1], want)
    except ConvertError as e:
        print(f"gpt2_to_ggml: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"gpt2_to_ggml: {args[1]}: cannot write: {e.strerror}", file=sys.stderr)
        return 1
    print(f"gpt2_to_ggml: wrote {args[1]} ({hp['n_layer']} layers, {hp['n_embd']} wide, "
          f"{hp['n_vocab']} tokens, {matrix_type} matrices)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
