#!/usr/bin/env bash
# kvlm against llama.cpp on one machine, in one command: interleaved rounds of llama-bench and
# `kvlm bench` on the same model, shape, thread count and context depths, then one table of
# medians, ranges and per-round ratios (scripts/compare_table.py; docs/performance.md).
#
#   scripts/compare.sh --llama-build DIR --gguf MODEL.gguf [--model PATH] [--weights f32|f16|bf16]
#                      [--rounds N] [--threads N] [--kvlm PATH] [--out DIR]
#
#   --llama-build  a llama.cpp build directory (llama-bench in DIR/bin or DIR); kvlm does not
#                  download or build llama.cpp: point this at your own build
#   --gguf         the model for llama-bench
#   --model        the same model for kvlm (a Hugging Face folder or the same GGUF; default: --gguf)
#   --weights      kvlm's weight type (default: as stored), to match the GGUF's
#   --rounds       interleaved rounds, each one llama-bench pass and one kvlm bench (default 3)
#   --threads      threads for both (default: all cores)
#   --kvlm         the kvlm program (default: build/kvlm)
#   --out          keep each round's JSON there (default: a temporary folder, removed)
#
# Each round: llama-bench -p 128,512 -n 0 (prefill), then llama-bench -p 0 -n 32 -d 128,900
# (decode with 128 and 900 positions cached, llama-bench's depth flag), then kvlm bench --json,
# which measures the same prefills and decodes and the memory bandwidth next to its decode
# windows. Rounds alternate the engines within a minute or two, so a shared machine's state
# changes hit both; ratios are taken within a round.
set -euo pipefail

usage() { sed -n '5,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
die() { echo "compare.sh: $*" >&2; exit 1; }

here="$(cd "$(dirname "$0")" && pwd)"
llama_build="" gguf="" model="" weights="" rounds=3 threads="$(nproc)" out=""
kvlm="${here}/../build/kvlm"
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-build) llama_build="${2:-}"; shift 2 ;;
    --gguf) gguf="${2:-}"; shift 2 ;;
    --model) model="${2:-}"; shift 2 ;;
    --weights) weights="${2:-}"; shift 2 ;;
    --rounds) rounds="${2:-}"; shift 2 ;;
    --threads) threads="${2:-}"; shift 2 ;;
    --kvlm) kvlm="${2:-}"; shift 2 ;;
    --out) out="${2:-}"; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$llama_build" ] || die "--llama-build DIR is required (a llama.cpp build directory)"
[ -n "$gguf" ] || die "--gguf MODEL.gguf is required"
[ -f "$gguf" ] || die "--gguf: no file '$gguf'"
[ -n "$model" ] || model="$gguf"
[ -e "$model" ] || die "--model: no file or folder '$model'"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds: expected a positive integer, found '$rounds'"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads: expected a positive integer, found '$threads'"
bench=""
for candidate in "$llama_build/bin/llama-bench" "$llama_build/llama-bench"; do
  [ -x "$candidate" ] && { bench="$candidate"; break; }
done
[ -n "$bench" ] || die "--llama-build: no llama-bench in '$llama_build/bin' or '$llama_build'"
[ -x "$kvlm" ] || die "--kvlm: '$kvlm' is not an executable (build kvlm first)"
command -v python3 >/dev/null || die "python3 is needed for the table"

if [ -z "$out" ]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
else
  mkdir -p "$out"
fi
kvlm_args=(bench --json --threads "$threads" --model "$model")
[ -n "$weights" ] && kvlm_args+=(--weights "$weights")

for i in $(seq 1 "$rounds"); do
  echo "round $i of $rounds: llama-bench" >&2
  "$bench" -m "$gguf" -t "$threads" -p 128,512 -n 0 -r 2 -o json > "$out/llama_$i.json" ||
    die "llama-bench failed (prefill), round $i"
  "$bench" -m "$gguf" -t "$threads" -p 0 -n 32 -d 128,900 -r 2 -o json >> "$out/llama_$i.json" ||
    die "llama-bench failed (decode), round $i"
  echo "round $i of $rounds: kvlm bench" >&2
  "$kvlm" "${kvlm_args[@]}" > "$out/kvlm_$i.json" || die "kvlm bench failed, round $i"
done
python3 "$here/compare_table.py" "$out"
