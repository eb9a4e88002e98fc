#include "paged_flags.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "util/ascii.h"

namespace kvlm::cli {

void add_paged_flags(CLI::App* cmd, PagedFlags* flags) {
  cmd->add_option("--kv-memory", flags->kv_memory,
                  "Use the paged KV cache with an arena of this many bytes (e.g. 64MiB, 1GB); "
                  "when it runs out, the latest sequence waits and is recomputed later");
  cmd->add_option("--block-size", flags->block_size,
                  "Positions per block of the paged KV cache (default 16; implies paging)")
      ->check(CLI::Range(1, 65536));
  cmd->add_flag("--no-prefix-sharing", flags->no_prefix_sharing,
                "With the paged cache, recompute prompts' common prefixes instead of sharing "
                "their blocks");
}

Result<size_t> parse_byte_size(const std::string& text, const std::string& flag) {
  const std::string expected = flag +
                               ": expected a byte count such as 67108864, 64MiB or 1.5GB "
                               "(units B, K/KiB, M/MiB, G/GiB, T/TiB, kB, MB, GB, TB), found '" +
                               text + "'";
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isdigit(static_cast<unsigned char>(text[0])))
    return Status::error(expected);
  std::string unit = ascii_lower(end);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  double scale = 0;
  const char* units[] = {"", "k", "m", "g", "t"};
  for (int p = 0; p < 5; ++p) {
    const std::string u = units[p];
    if (unit == u || unit == u + "b" || (p > 0 && unit == u + "ib")) {
      scale = std::pow(unit.size() == 2 && p > 0 ? 1000.0 : 1024.0, p);
      break;
    }
  }
  if (scale == 0 || !std::isfinite(number)) return Status::error(expected);
  const double bytes = number * scale;
  if (bytes < 1) return Status::error(flag + ": must be at least 1 byte, found '" + text + "'");
  if (bytes > 1.8e19) return Status::error(flag + ": '" + text + "' is too large");
  return static_cast<size_t>(bytes);
}

Result<std::optional<PagedGenerateOptions>> paged_options_from_flags(const PagedFlags& flags) {
  if (flags.kv_memory.empty() && flags.block_size == 0) {
    if (flags.no_prefix_sharing)
      return Status::error(
          "--no-prefix-sharing needs the paged cache: give --kv-memory or "
          "--block-size");
    return std::optional<PagedGenerateOptions>();
  }
  PagedGenerateOptions options;
  if (flags.block_size != 0) {
    if (flags.block_size < 1 || flags.block_size > 65536)
      return Status::error("--block-size: expected 1 to 65536 positions, found " +
                           std::to_string(flags.block_size));
    options.block_size = flags.block_size;
  }
  if (!flags.kv_memory.empty()) {
    auto bytes = parse_byte_size(flags.kv_memory, "--kv-memory");
    if (!bytes) return bytes.status();
    options.kv_memory_bytes = bytes.value();
  }
  options.share_prefixes = !flags.no_prefix_sharing;
  return std::optional<PagedGenerateOptions>(options);
}

}  // namespace kvlm::cli
