// Buffer placement in VkDeviceMemory: the "dedicated" and "blocks" policies (vulkan_memory.h).
#include "vulkan_memory.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg::vk::detail {

int find_memory_type(const VkPhysicalDeviceMemoryProperties& mp, uint32_t bits, VkMemoryPropertyFlags need,
                     VkMemoryPropertyFlags want) {
  int best = -1, best_score = INT32_MIN;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
    if (!(bits & (1u << i)) || (f & need) != need) continue;
    const int score = 64 * __builtin_popcount(f & want) - __builtin_popcount(f & ~(need | want));
    if (score > best_score) best = static_cast<int>(i), best_score = score;
  }
  return best;
}

std::string memory_flags_str(VkMemoryPropertyFlags f) {
  static const std::pair<VkMemoryPropertyFlags, const char*> names[] = {
      {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "DEVICE_LOCAL"},   {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "HOST_VISIBLE"},
      {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "HOST_COHERENT"}, {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "HOST_CACHED"},
      {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "LAZILY_ALLOCATED"}};
  std::string s;
  for (auto [bit, name] : names)
    if (f & bit) s += (s.empty() ? "" : "|") + std::string(name);
  return s.empty() ? "0" : s;
}

void Allocator::init(VkDevice device, const VkPhysicalDeviceMemoryProperties& props, bool api11, MemoryPolicy policy,
                     int64_t dedicated_min_bytes, bool log, LiveObjects* live) {
  device_ = device;
  props_ = props;
  api11_ = api11;
  policy_ = policy;
  dedicated_min_ = static_cast<VkDeviceSize>(std::max<int64_t>(dedicated_min_bytes, 0));
  log_ = log;
  live_ = live;
}

Block& Allocator::new_block(VkDeviceSize size, uint32_t type, bool dedicated, VkBuffer dedicated_to) {
  auto b = std::make_unique<Block>();
  b->type = type;
  b->size = size;
  b->id = next_id_++;
  b->dedicated = dedicated;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = size;
  ai.memoryTypeIndex = type;
  VkMemoryDedicatedAllocateInfo di{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  di.buffer = dedicated_to;
  if (dedicated_to != VK_NULL_HANDLE) ai.pNext = &di;
  check(vkAllocateMemory(device_, &ai, nullptr, &b->mem),
        fmt::format("vkAllocateMemory of {} bytes (memory type {}: {}{})", size, type,
                    memory_flags_str(props_.memoryTypes[type].propertyFlags), b->dedicated ? ", dedicated" : "")
            .c_str());
  if (props_.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    void* p = nullptr;
    VkResult mr = vkMapMemory(device_, b->mem, 0, VK_WHOLE_SIZE, 0, &p);
    if (mr != VK_SUCCESS) vkFreeMemory(device_, b->mem, nullptr);
    check(mr, "vkMapMemory");
    b->mapped = static_cast<char*>(p);
  }
  b->free.emplace(0, size);
  ++live_->memory_blocks;
  live_->device_memory_bytes += static_cast<int64_t>(size);
  if (b->dedicated) ++live_->dedicated_allocations;
  blocks_.push_back(std::move(b));
  return *blocks_.back();
}

/// First fit among the free ranges of the blocks of `type` (dedicated blocks excluded), else a new block of
/// max(block_bytes, size rounded to 64 KiB); a whole block that the driver refuses falls back to the buffer's size.
Allocation Allocator::suballocate(const VkMemoryRequirements& req, uint32_t type, VkDeviceSize align,
                                  VkDeviceSize block_bytes) {
  auto take = [&](Block& b, std::map<VkDeviceSize, VkDeviceSize>::iterator it, VkDeviceSize start) {
    const VkDeviceSize off = it->first, len = it->second;
    b.free.erase(it);
    if (start > off) b.free.emplace(off, start - off);
    if (off + len > start + req.size) b.free.emplace(start + req.size, off + len - (start + req.size));
    b.used += req.size;
    live_->allocated_bytes += static_cast<int64_t>(req.size);
    return Allocation{&b, start, req.size};
  };
  for (auto& b : blocks_) {
    if (b->type != type || b->dedicated) continue;
    for (auto it = b->free.begin(); it != b->free.end(); ++it) {
      const VkDeviceSize start = (it->first + align - 1) / align * align;
      if (start + req.size <= it->first + it->second) return take(*b, it, start);
    }
  }
  const VkDeviceSize size = std::max(block_bytes, (req.size + 65535) / 65536 * 65536);
  Block* b = nullptr;
  try {
    b = &new_block(size, type, false, VK_NULL_HANDLE);
  } catch (const BackendError&) {
    if (size == req.size) throw;
    b = &new_block(req.size, type, false, VK_NULL_HANDLE);  // a whole block did not fit: just this buffer
  }
  return take(*b, b->free.begin(), 0);
}

Allocation Allocator::bind_buffer(VkBuffer buf, const std::string& name, VkMemoryPropertyFlags need,
                                  VkMemoryPropertyFlags want) {
  VkMemoryRequirements req{};
  VkMemoryDedicatedRequirements dreq{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS};
  if (api11_) {
    VkBufferMemoryRequirementsInfo2 ri{VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2};
    ri.buffer = buf;
    VkMemoryRequirements2 r2{VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2};
    r2.pNext = &dreq;
    vkGetBufferMemoryRequirements2(device_, &ri, &r2);
    req = r2.memoryRequirements;
  } else {
    vkGetBufferMemoryRequirements(device_, buf, &req);
  }
  const int type = find_memory_type(props_, req.memoryTypeBits, need, want);
  if (type < 0)
    throw BackendError(fmt::format("vulkan: no memory type for buffer {} (needs {}; the device's types allow bits {:#x})",
                                   name, memory_flags_str(need), req.memoryTypeBits));
  Allocation a;
  const char* why = "";
  if (policy_ == MemoryPolicy::Blocks) {
    a = suballocate(req, static_cast<uint32_t>(type), std::max<VkDeviceSize>(req.alignment, 16), kLegacyBlockBytes);
    why = "blocks policy";
  } else if (dreq.requiresDedicatedAllocation || dreq.prefersDedicatedAllocation || req.size >= dedicated_min_) {
    why = dreq.requiresDedicatedAllocation ? "dedicated: required by the driver"
          : dreq.prefersDedicatedAllocation ? "dedicated: preferred by the driver"
                                            : "dedicated: large";
    // without Vulkan 1.1 a block of the buffer's own, never shared, without VkMemoryDedicatedAllocateInfo
    Block& b = new_block(req.size, static_cast<uint32_t>(type), true, api11_ ? buf : VK_NULL_HANDLE);
    b.free.clear();
    b.used = req.size;
    live_->allocated_bytes += static_cast<int64_t>(req.size);
    a = {&b, 0, req.size};
  } else {
    a = suballocate(req, static_cast<uint32_t>(type), std::max(req.alignment, kSmallAlignment), kSmallBlockBytes);
    why = "small: shared block";
  }
  VkResult r = vkBindBufferMemory(device_, buf, a.block->mem, a.offset);
  if (r != VK_SUCCESS) {
    release(a);
    check(r, fmt::format("vkBindBufferMemory ({})", name).c_str());
  }
  if (log_) log_placement(name, a, req.size, why);
  return a;
}

void Allocator::log_placement(const std::string& name, const Allocation& a, VkDeviceSize bytes, const char* why) const {
  fmt::print(stderr, "vulkan memory: buffer {} ({} bytes) -> memory #{} ({} bytes, type {}: {}) at offset {} ({})\n", name,
             bytes, a.block->id, a.block->size, a.block->type,
             memory_flags_str(props_.memoryTypes[a.block->type].propertyFlags), a.offset, why);
}

void Allocator::release(const Allocation& a) {
  Block* b = a.block;
  b->used -= a.size;
  live_->allocated_bytes -= static_cast<int64_t>(a.size);
  if (b->used == 0) {  // an empty block goes back to the driver
    if (log_) fmt::print(stderr, "vulkan memory: memory #{} ({} bytes) freed\n", b->id, b->size);
    vkFreeMemory(device_, b->mem, nullptr);
    --live_->memory_blocks;
    live_->device_memory_bytes -= static_cast<int64_t>(b->size);
    if (b->dedicated) --live_->dedicated_allocations;
    blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(), [&](auto& p) { return p.get() == b; }));
    return;
  }
  auto it = b->free.emplace(a.offset, a.size).first;
  if (auto next = std::next(it); next != b->free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    b->free.erase(next);
  }
  if (it != b->free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      b->free.erase(it);
    }
  }
}

void Allocator::free_all() {
  for (auto& b : blocks_) vkFreeMemory(device_, b->mem, nullptr);
  blocks_.clear();
}

}  // namespace sg::vk::detail
