// An on/off environment variable (SG_AUTOTUNE, SG_VULKAN_SUBGROUPS, SG_VULKAN_VALIDATION, SG_VULKAN_MEMORY_LOG):
// one parser, so a typo is an error naming the variable instead of silently on or off.
#pragma once

#include <optional>

namespace sg {

/// Unset or empty: nullopt (the caller's default). "1", "on", "true": true; "0", "off", "false": false.
/// Throws ValueError naming the variable and its value for anything else.
std::optional<bool> env_flag(const char* name);

}  // namespace sg
