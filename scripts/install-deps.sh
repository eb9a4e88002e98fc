#!/usr/bin/env bash
# Installs the Debian 12 packages kvlm builds with, only when one is missing (so a machine
# that has them needs no network). Run as root, or with sudo available.
set -euo pipefail
packages=(cmake g++ make pkg-config git
          nlohmann-json3-dev libcli11-dev libpcre2-dev libhwy-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          libcpp-httplib-dev  # kvlm serve's HTTP library
          python3  # scripts/compare_table.py (scripts/compare.sh's table) and its test
          clang libclang-rt-14-dev libomp-dev)  # clang builds; libFuzzer + sanitizer runtimes
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kvlm: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# kvlm serve's end-to-end tests drive the server with the openai npm client (tests/e2e), and the
# GGUF check reads kvlm's files with @huggingface/gguf (tests/gguf_js); both need Node 20 or newer
# and npm (machines here come with them) and install their package from its committed
# package-lock.json with `npm ci` into the build folder. Without them those tests skip, except
# under KVLM_REQUIRE_SHARED_DATA=1 (CI), where the GGUF check fails.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "kvlm: node/npm not found: the kvlm serve end-to-end tests will be skipped" >&2
elif [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "kvlm: node $(node --version) is older than 20: the kvlm serve end-to-end tests will be skipped" >&2
fi
