// Private to the Vulkan device layer: where buffers live in VkDeviceMemory (the placement policies of
// sg::vk::MemoryPolicy, see sg/vulkan_device.h).
//
// "dedicated" (the default): a buffer of at least `dedicated_min_bytes`, or one whose driver prefers or requires it
// (VkMemoryDedicatedRequirements from vkGetBufferMemoryRequirements2, Vulkan 1.1 core), gets its own VkDeviceMemory
// allocated for it alone (VkMemoryDedicatedAllocateInfo naming the buffer), bound at offset 0 and freed with it; smaller
// buffers are sub-allocated first-fit from blocks of kSmallBlockBytes per memory type, at offsets aligned to
// max(alignment, 256 bytes). The placement of a large buffer then depends only on its own size, never on what the
// process allocated and freed before (docs/perf-log/12b.md: a case run after others was 3-4x slower on the H200).
// "blocks" (the policy before session 8, kept for A/B runs): every buffer first-fit in blocks of 32 MiB (a larger
// buffer gets a block of its size rounded to 64 KiB), offsets aligned to max(alignment, 16).
// Either way an empty block goes back to the driver at once, and host-visible memory is mapped once per block.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "sg/vulkan_device.h"

namespace sg::vk::detail {

/// One VkDeviceMemory of the allocator, mapped when host-visible, with a first-fit free list (offset -> size).
struct Block {
  VkDeviceMemory mem = VK_NULL_HANDLE;
  VkDeviceSize size = 0, used = 0;
  uint32_t type = 0;
  int64_t id = 0;          ///< serial number (placement logs)
  bool dedicated = false;  ///< allocated for one buffer (VkMemoryDedicatedAllocateInfo): never shared
  char* mapped = nullptr;
  std::map<VkDeviceSize, VkDeviceSize> free;
};

/// Blocks of the "blocks" policy (a larger buffer gets a block of its own size).
constexpr VkDeviceSize kLegacyBlockBytes = VkDeviceSize{32} << 20;
/// Blocks of small buffers under the "dedicated" policy.
constexpr VkDeviceSize kSmallBlockBytes = VkDeviceSize{8} << 20;
/// Sub-allocation offsets under the "dedicated" policy are multiples of this (at least; the driver's alignment wins).
constexpr VkDeviceSize kSmallAlignment = 256;

class Allocator {
 public:
  /// `api11`: the device is Vulkan >= 1.1 (vkGetBufferMemoryRequirements2 and dedicated allocations are core).
  /// `log`: one stderr line per placement and per VkDeviceMemory freed (env SG_VULKAN_MEMORY_LOG).
  void init(VkDevice device, const VkPhysicalDeviceMemoryProperties& props, bool api11, MemoryPolicy policy,
            int64_t dedicated_min_bytes, bool log, LiveObjects* live);
  /// Memory for `buf` (not yet bound) of a memory type with all of `need` and as many of `want` as possible; binds
  /// it. Throws BackendError (no memory type, vkAllocateMemory/vkMapMemory/vkBindBufferMemory failed); `buf` stays
  /// owned by the caller.
  Allocation bind_buffer(VkBuffer buf, const std::string& name, VkMemoryPropertyFlags need, VkMemoryPropertyFlags want);
  void release(const Allocation& a);
  /// Frees every block (device teardown).
  void free_all();
  const VkPhysicalDeviceMemoryProperties& props() const { return props_; }

 private:
  Allocation suballocate(const VkMemoryRequirements& req, uint32_t type, VkDeviceSize align, VkDeviceSize block_bytes);
  Block& new_block(VkDeviceSize size, uint32_t type, bool dedicated, VkBuffer dedicated_to);
  void log_placement(const std::string& name, const Allocation& a, VkDeviceSize bytes, const char* why) const;

  VkDevice device_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties props_{};
  bool api11_ = false, log_ = false;
  MemoryPolicy policy_ = MemoryPolicy::Dedicated;
  VkDeviceSize dedicated_min_ = 0;
  LiveObjects* live_ = nullptr;
  int64_t next_id_ = 0;
  std::vector<std::unique_ptr<Block>> blocks_;
};

/// The memory type for `bits` with all of `need`, as many of `want` as possible and then as few other flags as
/// possible (a discrete GPU's device buffers go to plain DEVICE_LOCAL memory, not to its host-visible BAR window);
/// -1 if none.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& mp, uint32_t bits, VkMemoryPropertyFlags need,
                     VkMemoryPropertyFlags want = 0);

/// "DEVICE_LOCAL|HOST_VISIBLE|..." of memory property flags.
std::string memory_flags_str(VkMemoryPropertyFlags f);

}  // namespace sg::vk::detail
