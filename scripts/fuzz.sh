#!/usr/bin/env bash
# Runs kvlm's libFuzzer targets (tests/fuzz, docs/fuzzing.md).
#   scripts/fuzz.sh TARGET [SECONDS]   one target, 600 s by default (0: until it finds something)
#   scripts/fuzz.sh --all [SECONDS]    every target in turn, 15 s each by default (what CI runs)
#   scripts/fuzz.sh --list             the target names
# Builds the targets with clang into build-fuzz (KVLM_FUZZ_BUILD_DIR), ASan + UBSan. New inputs
# go to build-fuzz/corpus/TARGET, the seeds in tests/fuzz/corpus/TARGET are read but never
# written; a crash, leak, sanitizer report, out-of-memory (-rss_limit_mb=2048) or timeout
# (-timeout=10) stops the run with a non-zero exit and the input in build-fuzz/artifacts/.
# Keep such an input: copy it into tests/fuzz/corpus/TARGET/ and name a test after it in
# tests/fuzz/corpus_replay_test.cpp. Set KVLM_FUZZ_NICE=19 to yield the CPU to others.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(safetensors config_json tokenizer_json vocab_merges llama2c_model llama2c_tokenizer
         bpe_roundtrip utf8_stream sampler gguf openai_request)
if [ "${1:-}" = "--list" ]; then printf '%s\n' "${targets[@]}"; exit 0; fi
if [ $# -lt 1 ]; then sed -n '2,12p' "$0" >&2; exit 1; fi
build=${KVLM_FUZZ_BUILD_DIR:-build-fuzz}

if [ "$1" = "--all" ]; then
  run=("${targets[@]}")
  seconds=${2:-15}
else
  if ! printf '%s\n' "${targets[@]}" | grep -qx "$1"; then
    echo "fuzz.sh: no target '$1' (targets: ${targets[*]})" >&2
    exit 1
  fi
  run=("$1")
  seconds=${2:-600}
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLM_FUZZ=ON \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${run[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
failed=()
for t in "${run[@]}"; do
  corpus="$build/corpus/$t" artifacts="$build/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts"
  dict=()
  case $t in
    safetensors | config_json | tokenizer_json | vocab_merges | openai_request)
      dict=(-dict=tests/fuzz/dict/json.dict) ;;
    gguf) dict=(-dict=tests/fuzz/dict/gguf.dict) ;;
  esac
  limit=()
  [ "$seconds" -gt 0 ] && limit=(timeout -k 10 $((seconds + 120)))
  echo "== fuzz_$t for ${seconds}s" >&2
  if ! "${limit[@]}" nice -n "${KVLM_FUZZ_NICE:-0}" "$build/tests/fuzz/fuzz_$t" \
      -rss_limit_mb=2048 -timeout=10 -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$artifacts" "${dict[@]}" "$corpus" "tests/fuzz/corpus/$t"; then
    failed+=("$t")
    echo "fuzz.sh: fuzz_$t failed; the input is in $artifacts" >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failures in ${failed[*]}" >&2
  exit 1
fi
