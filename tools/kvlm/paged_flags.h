// --kv-memory, --block-size and --no-prefix-sharing: the flags that put a command on the
// paged KV cache (kv/paged_kv_cache.h). Given neither --kv-memory nor --block-size, a command
// keeps the contiguous cache.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>

#include "generate/generate.h"
#include "kvlm/status.h"

namespace kvlm::cli {

struct PagedFlags {
  std::string kv_memory;           // --kv-memory BYTES (67108864, 64MiB, 1.5GB); empty: not given
  int block_size = 0;              // --block-size N; 0: not given (16)
  bool no_prefix_sharing = false;  // --no-prefix-sharing
};

void add_paged_flags(CLI::App* cmd, PagedFlags* flags);
// The paged options the flags ask for, or nullopt for the contiguous cache. Errors name the
// flag and what it accepts.
Result<std::optional<PagedGenerateOptions>> paged_options_from_flags(const PagedFlags& flags);

// "67108864", "64MiB", "64M" (= MiB), "1.5GB" (decimal), "512KiB", "100kB": a byte count.
// K/M/G/T alone and KiB/MiB/GiB/TiB are powers of 1024; kB/MB/GB/TB powers of 1000. `flag`
// names the source in errors.
Result<size_t> parse_byte_size(const std::string& text, const std::string& flag);

}  // namespace kvlm::cli
