#!/usr/bin/env bash
# The main job: build kvlm and run the seed's experiment (cached vs uncached generation).
# Extra arguments go to `kvlm demo` (e.g. --model DIR, --threads N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target kvlm
./build/kvlm demo "$@"
