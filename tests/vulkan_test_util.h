// Shared helpers for the Vulkan suites: lavapipe pinned, validation on, zero validation messages asserted.
#pragma once

#include <stdlib.h>

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "sg/backend.h"
#include "sg/vulkan_device.h"

namespace sg::testing {

/// The ICD of Mesa's lavapipe (mesa-vulkan-drivers), the CI device.
inline constexpr const char* kLavapipeIcd = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// Pins the Vulkan loader to lavapipe unless VK_DRIVER_FILES is already set (e.g. to run the suite on a GPU).
inline void pin_lavapipe() { setenv("VK_DRIVER_FILES", kLavapipeIcd, 0); }

/// Options of a Vulkan backend with the validation layer on; `direct_map` as VulkanOptions::direct_map
/// (0 = the staging path of discrete GPUs, exercised on lavapipe).
inline BackendOptions vulkan_options(int direct_map = -1) {
  pin_lavapipe();
  BackendOptions bo;
  bo.kind = "vulkan";
  bo.vulkan.validation = true;
  if (direct_map >= 0) bo.vulkan.direct_map = direct_map == 1;
  return bo;
}

inline vk::DeviceOptions vulkan_device_options(int direct_map = -1) {
  pin_lavapipe();
  vk::DeviceOptions o;
  o.validation = 1;
  o.direct_map = direct_map;
  return o;
}

/// Fails the test when the validation layer reported anything (the first messages are shown).
inline void expect_no_validation_messages(const vk::Device& dev) {
  std::string log;
  for (auto& m : dev.validation_log()) log += m + "\n";
  INFO("validation messages:\n" << log);
  CHECK(dev.caps().validation);
  CHECK(dev.validation_messages() == 0);
}

/// The native backends every layer and op test runs on, CPU reference first.
inline constexpr const char* kNativeBackends[] = {"cpu", "gles", "gles-compute", "vulkan"};

/// A backend of `kind` (one of kNativeBackends); Vulkan on lavapipe with the validation layer on (tests assert zero
/// messages with expect_no_validation_messages).
inline std::unique_ptr<Backend> native_backend(const std::string& kind) {
  if (kind == "cpu") return make_cpu_backend();
  auto be = make_backend(kind == "vulkan" ? vulkan_options(-1) : BackendOptions{.kind = kind}).backend;
  REQUIRE(be->name() == kind);
  return be;
}

}  // namespace sg::testing
