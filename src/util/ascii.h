// ASCII case folding for names users type (dtype names, size units, preset names): locale-free,
// so "Q8_0" and "q8_0" mean the same on every machine.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace kvlm {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace kvlm
