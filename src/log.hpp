// Dispatch logging: CONVT_LOG=1 in the environment prints, on stderr, which kernel each
// call runs and why.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace convt {

inline bool log_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("CONVT_LOG");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

inline void log_line(const std::string& line) { std::fprintf(stderr, "convt: %s\n", line.c_str()); }

}  // namespace convt
