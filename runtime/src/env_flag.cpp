// One parser for on/off environment variables (env_flag.h).
#include "env_flag.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

std::optional<bool> env_flag(const char* name) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return std::nullopt;
  const std::string v = e;
  if (v == "1" || v == "on" || v == "true") return true;
  if (v == "0" || v == "off" || v == "false") return false;
  throw ValueError(fmt::format("environment variable {}='{}': expected 1 (or on, true) or 0 (or off, false)", name, v));
}

}  // namespace sg
