// Reads GGUF files with @huggingface/gguf (Hugging Face's parser, independent of kvlm's) and
// prints, as one JSON array, what it found in each: the metadata (arrays as their length and
// first entries), every tensor's name, shape, type and offset, and where the data begins. It
// also checks the layout on its own: each offset a multiple of general.alignment (default
// 32), tensors in increasing order without overlap (sizes from ggml's block table below), the
// last one ending exactly at the end of the file. Exit 1 naming the file and tensor otherwise.
//   node check_gguf.mjs FILE.gguf...
import { statSync } from "node:fs";
import { gguf, GGMLQuantizationType } from "@huggingface/gguf";

// ggml's types: [values per block, bytes per block] (ggml-common.h).
const BLOCKS = {
  [GGMLQuantizationType.F32]: [1, 4],
  [GGMLQuantizationType.F16]: [1, 2],
  [GGMLQuantizationType.BF16]: [1, 2],
  [GGMLQuantizationType.Q8_0]: [32, 34],
  [GGMLQuantizationType.Q4_0]: [32, 18],
  [GGMLQuantizationType.Q5_0]: [32, 22],
  [GGMLQuantizationType.Q4_K]: [256, 144],
  [GGMLQuantizationType.Q6_K]: [256, 210],
};

function plain(value) {
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return { length: value.length, first: value.slice(0, 3).map(plain) };
  return value;
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node check_gguf.mjs FILE.gguf...");
  process.exit(2);
}
const out = [];
for (const file of files) {
  const fail = (message) => {
    console.error(`${file}: ${message}`);
    process.exit(1);
  };
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(file, { allowLocalFile: true });
  const alignment = Number(metadata["general.alignment"] ?? 32);
  const dataStart = Number(tensorDataOffset);
  if (dataStart % alignment !== 0) fail(`data section starts at ${dataStart}, not aligned to ${alignment}`);
  const tensors = [];
  let end = 0;
  for (const t of tensorInfos) {
    const shape = t.shape.map(Number);
    const block = BLOCKS[t.dtype];
    if (!block) fail(`tensor '${t.name}': type ${GGMLQuantizationType[t.dtype] ?? t.dtype} is not one kvlm writes`);
    const elements = shape.reduce((a, b) => a * b, 1);
    if (shape[0] % block[0] !== 0) fail(`tensor '${t.name}': rows of ${shape[0]} are not whole blocks of ${block[0]}`);
    const bytes = (elements / block[0]) * block[1];
    const offset = Number(t.offset);
    if (offset % alignment !== 0) fail(`tensor '${t.name}': offset ${offset} not a multiple of ${alignment}`);
    if (offset < end) fail(`tensor '${t.name}': offset ${offset} overlaps the previous tensor (ends at ${end})`);
    end = offset + bytes;
    tensors.push({ name: t.name, n_dims: t.n_dims, shape, type: GGMLQuantizationType[t.dtype], offset, bytes });
  }
  const size = statSync(file).size;
  if (dataStart + end !== size) fail(`tensors end at byte ${dataStart + end}, the file has ${size}`);
  const meta = {};
  for (const [key, value] of Object.entries(metadata)) meta[key] = plain(value);
  out.push({ file, data_offset: dataStart, file_size: size, metadata: meta, tensors });
}
process.stdout.write(JSON.stringify(out) + "\n");
