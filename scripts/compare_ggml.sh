#!/usr/bin/env bash
# kvlm against ggml (the library llama.cpp runs on: the same CPU kernels and thread pool) on one
# machine, in one command: the same GPT-2 weights in both engines, interleaved rounds of ggml's
# examples/gpt-2 programs and `kvlm bench`, then one table of medians, ranges and per-round
# ratios (scripts/compare_ggml_table.py; docs/performance.md, "Side by side with ggml").
#
#   scripts/compare_ggml.sh --ggml-build DIR [--model DIR] [--weights f32,f16,bf16,q8_0]
#                           [--rounds N] [--threads N] [--kvlm PATH] [--helper PATH] [--out DIR]
#                           [--omp-as-is]
#
#   --ggml-build  a ggml build directory with the gpt-2 examples (gpt-2-backend, gpt-2-batched,
#                 gpt-2-quantize in DIR/bin or DIR): cmake -B build -DGGML_NATIVE=ON
#                 -DGGML_BUILD_EXAMPLES=ON in a ggml checkout; kvlm does not download ggml
#   --model       a GPT-2 Hugging Face folder (default: kvlm bench's random 124M-shaped model,
#                 written with kvlm_compare_helper, in F32 and, for bf16, in BF16)
#   --weights     the weight types to compare, comma-separated (default f32): f32, f16, bf16
#                 (a BF16 --model, converted as stored), q8_0
#   --rounds      interleaved rounds (default 3)
#   --threads     threads for both (default: all cores)
#   --kvlm        the kvlm program (default: build/kvlm)
#   --helper      kvlm_compare_helper (default: build/kvlm_compare_helper)
#   --out         keep the models, logs and JSON there (default: a temporary folder, removed)
#   --omp-as-is   leave the OpenMP environment alone (default: both engines run with kvlm's own
#                 GOMP_SPINCOUNT=10000, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set)
#
# The model is converted once per type (scripts/gpt2_to_ggml.py; Q8_0 by ggml's gpt-2-quantize
# from the F32 file; kvlm quantizes the same F32 matrices with --weights q8_0). Each round, per
# type: gpt-2-backend -n 1 (one prefill of 128, then 512 tokens; best of 2 processes),
# gpt-2-batched -np 1 -n 17 after a 128- and a 900-token prompt (16 decode steps: best of 3),
# gpt-2-batched -np 8 -n 17 (8 sequences, 16 steps; best of 3), each ggml run between two
# bandwidth readings (kvlm_compare_helper bandwidth: kvlm bench's probe, 0.1 s), then
# `kvlm bench --json` (the same prefills and decodes, best of its windows, bandwidth read next to
# each). Greedy tokens of both engines are checked equal on a 10-token prompt first.
set -euo pipefail

usage() { sed -n '7,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
die() { echo "compare_ggml.sh: $*" >&2; exit 1; }

here="$(cd "$(dirname "$0")" && pwd)"
ggml_build="" model="" weights="f32" rounds=3 threads="$(nproc)" out="" omp_as_is=0
kvlm="${here}/../build/kvlm" helper="${here}/../build/kvlm_compare_helper"
while [ $# -gt 0 ]; do
  case "$1" in
    --ggml-build) ggml_build="${2:-}"; shift 2 ;;
    --model) model="${2:-}"; shift 2 ;;
    --weights) weights="${2:-}"; shift 2 ;;
    --rounds) rounds="${2:-}"; shift 2 ;;
    --threads) threads="${2:-}"; shift 2 ;;
    --kvlm) kvlm="${2:-}"; shift 2 ;;
    --helper) helper="${2:-}"; shift 2 ;;
    --out) out="${2:-}"; shift 2 ;;
    --omp-as-is) omp_as_is=1; shift ;;
    -h|--help) usage ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$ggml_build" ] || die "--ggml-build DIR is required (a ggml build with its gpt-2 examples)"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds: expected a positive integer, found '$rounds'"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads: expected a positive integer, found '$threads'"
IFS=, read -r -a types <<< "$weights"
[ ${#types[@]} -gt 0 ] || die "--weights: expected f32, f16, bf16 or q8_0 (comma-separated)"
for t in "${types[@]}"; do
  case "$t" in
    f32|f16|bf16|q8_0) ;;
    *) die "--weights: expected f32, f16, bf16 or q8_0, found '$t'" ;;
  esac
done
find_tool() {
  for candidate in "$ggml_build/bin/$1" "$ggml_build/$1"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  die "--ggml-build: no $1 in '$ggml_build/bin' or '$ggml_build' (build ggml with -DGGML_BUILD_EXAMPLES=ON)"
}
backend="$(find_tool gpt-2-backend)" batched="$(find_tool gpt-2-batched)"
quantize="$(find_tool gpt-2-quantize)"
[ -x "$kvlm" ] || die "--kvlm: '$kvlm' is not an executable (build kvlm first)"
[ -x "$helper" ] || die "--helper: '$helper' is not an executable (build kvlm_compare_helper)"
command -v python3 >/dev/null || die "python3 is needed for the conversion and the table"
[ -z "$model" ] || [ -f "$model/config.json" ] || die "--model: no config.json in '$model'"
# Both engines use libgomp. kvlm re-executes itself with GOMP_SPINCOUNT=10000 (spin briefly,
# then sleep) unless the user set the OpenMP waiting; ggml would spin for libgomp's default,
# which on cores shared with other processes stalls its barriers for milliseconds
# (docs/performance.md). The same setting for both, unless --omp-as-is.
if [ "$omp_as_is" = 0 ] && [ -z "${OMP_WAIT_POLICY:-}" ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then
  export GOMP_SPINCOUNT=10000
fi

if [ -z "$out" ]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
else
  mkdir -p "$out"
fi
# bf16 runs a BF16 folder in both engines (the converter copies BF16 bit for bit; it does not
# round F32 to BF16): --model, or the random model written in BF16 (the same draws rounded).
bf16_model="$model"
if [ -z "$model" ]; then
  model="$out/kvlm-gpt2"
  "$helper" write-model --out "$model" || die "kvlm_compare_helper write-model failed"
  bf16_model="$out/kvlm-gpt2-bf16"
  if [[ ",$weights," == *,bf16,* ]]; then
    "$helper" write-model --out "$bf16_model" --dtype bf16 ||
      die "kvlm_compare_helper write-model --dtype bf16 failed"
  fi
fi
model_for() { if [ "$1" = bf16 ]; then echo "$bf16_model"; else echo "$model"; fi; }
n_vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' \
  "$model/config.json")" || die "--model: cannot read vocab_size from '$model/config.json'"

# The ggml files: token i's text is " i" (scripts/gpt2_to_ggml.py), so a prompt is its ids.
for t in "${types[@]}"; do
  case "$t" in
    f32|f16) python3 "$here/gpt2_to_ggml.py" "$model" "$out/gpt2-$t.bin" --type "$t" ||
               die "converting '$model' to ggml ($t) failed" ;;
    bf16) python3 "$here/gpt2_to_ggml.py" "$bf16_model" "$out/gpt2-bf16.bin" ||
            die "converting '$bf16_model' to ggml (as stored, for bf16) failed" ;;
    q8_0) [ -f "$out/gpt2-f32.bin" ] || python3 "$here/gpt2_to_ggml.py" "$model" \
            "$out/gpt2-f32.bin" --type f32 || die "converting '$model' to ggml (f32) failed"
          "$quantize" "$out/gpt2-f32.bin" "$out/gpt2-q8_0.bin" q8_0 > "$out/quantize.log" 2>&1 ||
            die "gpt-2-quantize failed (see $out/quantize.log)" ;;
  esac
done
ids() {  # n deterministic token ids, spread over the vocabulary
  awk -v n="$1" -v v="$n_vocab" -v sep="$2" \
    'BEGIN { for (k = 0; k < n; k++) printf "%s%d", (k ? sep : ""), (1000 + 7919 * k) % v }'
}
prompt() { echo " $(ids "$1" ' ')"; }

# The same model in both engines: greedy tokens after a 10-token prompt must agree.
for t in "${types[@]}"; do
  ggml_tokens="$("$batched" -m "$out/gpt2-$t.bin" -p "$(prompt 10)" -n 9 --top_k 1 -t "$threads" \
    -c 1024 -np 1 --ignore-eos 2>/dev/null | awk '/first 8 tokens/ { getline; getline; print; exit }')"
  kvlm_tokens="$("$kvlm" generate --model "$(model_for "$t")" --weights "$t" --ids "$(ids 10 ,)" \
    --max-new 8 --ignore-eos --threads "$threads" --json 2>/dev/null | python3 -c \
    'import json,sys; print(" ".join(str(i) for i in json.load(sys.stdin)["sequences"][0]["ids"]))')"
  echo "greedy check ($t): ggml${ggml_tokens} / kvlm ${kvlm_tokens}" >&2
  [ "${ggml_tokens# }" = "$kvlm_tokens" ] ||
    echo "compare_ggml.sh: warning: the engines' greedy tokens differ ($t)" >&2
done

# One ggml run, appended to LOG between two bandwidth readings, after a line naming it (a
# prompt shown by its length: the program's own output repeats it).
run_ggml() {
  local log="$1" shown=() a; shift
  for a in "$@"; do
    if [ ${#a} -gt 60 ]; then shown+=("'<$(wc -w <<< "$a") ids>'"); else shown+=("$a"); fi
  done
  {
    echo "### run: ${shown[*]}"
    echo "### bandwidth before: $("$helper" bandwidth --threads "$threads" --seconds 0.1)"
    "$@" 2>&1 || echo "### failed: exit $?"
    echo "### bandwidth after: $("$helper" bandwidth --threads "$threads" --seconds 0.1)"
  } >> "$log"
}

for i in $(seq 1 "$rounds"); do
  for t in "${types[@]}"; do
    m="$out/gpt2-$t.bin" base="$out/ggml_${t}_$i"
    rm -f "${base}"_*.log
    echo "round $i of $rounds, $t: ggml" >&2
    for n in 128 512; do
      for _ in 1 2; do
        run_ggml "${base}_prefill$n.log" "$backend" -m "$m" -p "$(prompt $n)" -n 1 -b "$n" \
          -c 1024 --top_k 1 -t "$threads" --ignore-eos
      done
    done
    for ctx in 128 900; do
      for _ in 1 2 3; do
        run_ggml "${base}_decode$ctx.log" "$batched" -m "$m" -p "$(prompt $ctx)" -n 17 -np 1 \
          -c 1024 --top_k 1 -t "$threads" --ignore-eos
      done
    done
    for _ in 1 2 3; do
      run_ggml "${base}_batch8.log" "$batched" -m "$m" -p "$(prompt 128)" -n 17 -np 8 \
        -c 1024 --top_k 1 -t "$threads" --ignore-eos
    done
    echo "round $i of $rounds, $t: kvlm bench" >&2
    "$kvlm" bench --json --threads "$threads" --model "$(model_for "$t")" --weights "$t" \
      > "$out/kvlm_${t}_$i.json" || die "kvlm bench failed (round $i, $t)"
  done
done
python3 "$here/compare_ggml_table.py" "$out"
