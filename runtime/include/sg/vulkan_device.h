// shadergrad — low-level Vulkan compute device (the Vulkan backend's device layer).
//
// What it does: creates a Vulkan instance (optionally with the Khronos validation layer and a debug-utils
// messenger that counts its messages), picks a physical device (discrete > integrated > virtual > cpu, or the one
// named by DeviceOptions::device / env SG_VULKAN_DEVICE), probes its compute limits into sg::ComputeLimits, opens
// one compute queue, and offers RAII handles for what a compute runtime needs: storage buffers sub-allocated from
// memory blocks or in memory of their own (MemoryPolicy; bookworm has no Vulkan Memory Allocator), compute pipelines
// from SPIR-V (through a VkPipelineCache persisted as one file next to the kernel cache), descriptor pools and
// sets, command buffers that can be recorded once and submitted many times, and timestamp query pools. Nothing
// here knows about graphs or plans (runtime/src/vulkan_backend.cpp sits on top).
//
// Memory: every buffer lives in DEVICE_LOCAL memory; where in VkDeviceMemory is the MemoryPolicy (below). On devices whose device-local memory is also HOST_VISIBLE and
// HOST_COHERENT and that share memory with the host (integrated GPUs, CPU implementations such as lavapipe) buffers
// are mapped and read/written directly ("direct map"); elsewhere (discrete GPUs) transfers go through host-visible
// staging buffers and vkCmdCopyBuffer. DeviceOptions::direct_map forces either path (tests run the staging path
// on lavapipe). Allocations are rounded up to 16 bytes and zero-filled on creation.
//
// Typical use:
//   auto dev = sg::vk::Device::create({});
//   sg::vk::Buffer a = dev->create_buffer(n * 4, "a"), out = dev->create_buffer(n * 4, "out");
//   dev->upload(a, host.data(), n * 4);
//   sg::vk::Pipeline p = dev->create_pipeline(spirv_words, /*bindings=*/2, {64, 1, 1}, "my_kernel");
//   sg::vk::DescriptorPool pool = dev->create_descriptor_pool(1, 2);
//   VkDescriptorSet set = dev->allocate_set(pool, p, {&a, &out});
//   sg::vk::CommandBuffer cmd = dev->create_command_buffer();
//   cmd.begin(); cmd.dispatch(p, set, {groups, 1, 1}); cmd.barrier_to_host(); cmd.end();
//   dev->submit_and_wait(cmd);  // may be submitted again later without re-recording
//   dev->download(out, host_out.data(), n * 4);
//
// Errors: no loader/ICD/device, or a failing Vulkan call, throws sg::BackendError naming the call and VkResult;
// invalid arguments (sizes, binding counts beyond the device limits) throw sg::ValueError / sg::UnsupportedError
// naming the limit (the Vulkan name, e.g. maxComputeWorkGroupInvocations).
//
// Threading: a Device and its handles belong to one thread at a time. Lifetime: handles keep the device context
// alive (shared ownership), so they may outlive the Device object; Vulkan objects are destroyed with the handles.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>
#include <nlohmann/json_fwd.hpp>

#include "sg/compute_kernel.h"
#include "sg/unique_handle.h"

namespace sg::vk {

namespace detail {
using sg::detail::UniqueHandle;
struct Context;  // instance, device, queue, allocator, pipeline cache, counters (vulkan_device.cpp)
struct Block;    // one VkDeviceMemory of the allocator
/// A sub-allocation: bytes [offset, offset + size) of a block.
struct Allocation {
  Block* block = nullptr;
  VkDeviceSize offset = 0, size = 0;
  bool operator==(const Allocation&) const = default;
};

/// UniqueHandle's traits for the Vulkan objects the handles own (runtime/src/vulkan_device.cpp): count() counts one
/// more in the context's LiveObjects (the uncounted kinds: nothing), destroy() destroys or frees it and counts it off.
#define SG_VK_TRAITS(NAME, HANDLE)                       \
  struct NAME {                                          \
    using Context = detail::Context;                     \
    using Handle = HANDLE;                               \
    static void count(Context& ctx);                     \
    static void destroy(Context& ctx, HANDLE h) noexcept; \
  }
SG_VK_TRAITS(BufferTraits, VkBuffer);                    // LiveObjects::buffers
SG_VK_TRAITS(AllocationTraits, Allocation);              // the allocator's sub-allocation, released to it
SG_VK_TRAITS(PipelineTraits, VkPipeline);                // LiveObjects::pipelines
SG_VK_TRAITS(PipelineLayoutTraits, VkPipelineLayout);
SG_VK_TRAITS(SetLayoutTraits, VkDescriptorSetLayout);
SG_VK_TRAITS(DescriptorPoolTraits, VkDescriptorPool);    // LiveObjects::descriptor_pools
SG_VK_TRAITS(QueryPoolTraits, VkQueryPool);              // LiveObjects::query_pools
SG_VK_TRAITS(CommandBufferTraits, VkCommandBuffer);      // LiveObjects::command_buffers (freed to the pool)
SG_VK_TRAITS(FenceTraits, VkFence);
#undef SG_VK_TRAITS
}  // namespace detail

/// Where buffers are placed in VkDeviceMemory (runtime/src/vulkan_memory.h has the details).
enum class MemoryPolicy {
  /// Buffers of at least DeviceOptions::dedicated_min_bytes, and those whose driver prefers or requires it
  /// (VkMemoryDedicatedRequirements), get a VkDeviceMemory of their own (VkMemoryDedicatedAllocateInfo, Vulkan 1.1
  /// core); smaller ones share blocks of 8 MiB per memory type at 256-byte aligned offsets. The default.
  Dedicated,
  /// The policy before session 8, for A/B runs: every buffer first-fit in shared 32 MiB blocks (a larger buffer in a
  /// block of its own size), 16-byte aligned.
  Blocks,
};

/// "dedicated" or "blocks".
const char* memory_policy_name(MemoryPolicy p);

/// The default of DeviceOptions::dedicated_min_bytes: 1 MiB (the large operands of SGEMM N >= 512, conv and MLP
/// activations of big batches; a train step's parameters and small temporaries stay in shared blocks).
inline constexpr int64_t kDedicatedMinBytes = int64_t{1} << 20;

/// Options for Device::create.
struct DeviceOptions {
  /// VK_LAYER_KHRONOS_validation (with synchronization validation: missing barriers are reported) + a
  /// VK_EXT_debug_utils messenger counting warnings and errors (Device::validation_messages): -1 = env SG_VULKAN_VALIDATION ("1" = on), 0 = off, 1 = on. On and the layer is
  /// not installed -> BackendError naming the Debian package (vulkan-validationlayers).
  int validation = -1;
  /// Which physical device: "" = env SG_VULKAN_DEVICE, and when that is unset the best by type (discrete >
  /// integrated > virtual > cpu; ties: the first listed). Else a device index ("0", "1"...) or a case-insensitive
  /// substring of its name ("llvmpipe", "H200"); no match -> BackendError listing the devices.
  std::string device{};
  /// Buffer access: -1 = auto (direct map on integrated/cpu devices whose device-local memory is host-visible and
  /// coherent, staging elsewhere), 0 = always staging, 1 = direct map (BackendError when no memory type allows it).
  int direct_map = -1;
  /// Directory of the persisted VkPipelineCache (one file per device, see Device::pipeline_cache_path); empty = an
  /// in-memory pipeline cache only.
  std::filesystem::path pipeline_cache_dir{};
  /// Buffer placement: "" = env SG_VULKAN_MEMORY, and when that is unset "dedicated"; else "dedicated" or "blocks"
  /// (MemoryPolicy); anything else -> ValueError naming both.
  std::string memory_policy{};
  /// The "dedicated" policy's threshold, bytes: -1 = env SG_VULKAN_DEDICATED_MIN_BYTES, and when that is unset
  /// kDedicatedMinBytes; 0 = every buffer dedicated. ValueError below -1 or when the env value is not an integer.
  int64_t dedicated_min_bytes = -1;
};

/// What the probe at creation found.
struct Caps {
  std::string name;            ///< VkPhysicalDeviceProperties::deviceName, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string device_type;     ///< "discrete", "integrated", "virtual", "cpu" or "other"
  std::string api_version;     ///< the device's Vulkan version, e.g. "1.3.230"
  std::string driver;          ///< VkPhysicalDeviceDriverProperties driverName + driverInfo ("" before Vulkan 1.2)
  uint32_t vendor_id = 0, device_id = 0;
  /// The limits kernels are scheduled and checked against (ComputeLimits fields from maxPerStageDescriptorStorageBuffers,
  /// maxComputeWorkGroupInvocations, maxComputeSharedMemorySize, min of maxComputeWorkGroupCount[0..2],
  /// maxStorageBufferRange, VkPhysicalDeviceSubgroupProperties::subgroupSize, deviceType == CPU;
  /// subgroup_arithmetic: supportedStages has COMPUTE and supportedOperations has BASIC, VOTE and ARITHMETIC).
  ComputeLimits limits;
  std::array<uint32_t, 3> max_workgroup_size{};  ///< maxComputeWorkGroupSize x, y, z
  uint32_t queue_family = 0;                     ///< the compute queue's family
  bool timestamps = false;            ///< the compute queue has timestampValidBits > 0 (and timestampComputeAndGraphics)
  double timestamp_period_ns = 0;     ///< VkPhysicalDeviceLimits::timestampPeriod (ns per tick)
  bool direct_map = false;            ///< buffers are mapped directly (see the file comment), else staging
  bool validation = false;            ///< the validation layer and messenger are on
  int64_t device_local_bytes = 0;     ///< size of the largest DEVICE_LOCAL heap
  MemoryPolicy memory_policy = MemoryPolicy::Dedicated;  ///< the buffer placement in use
  int64_t dedicated_min_bytes = 0;    ///< the "dedicated" policy's threshold in use, bytes
  std::vector<std::string> devices;   ///< every physical device found: "index: name (type)"
  int device_index = 0;               ///< which of `devices` was chosen
};

/// Caps as JSON (shadergrad info --json).
nlohmann::json caps_json(const Caps& c);

/// Vulkan objects alive through handles of one Device (leak tests). Includes the device's own transfer objects: one
/// command buffer, and on the staging path one 4 MiB staging buffer (transfers go through it in pieces).
struct LiveObjects {
  int64_t buffers = 0;           ///< VkBuffer (device and staging)
  int64_t memory_blocks = 0;     ///< VkDeviceMemory objects of the allocator (shared blocks and dedicated ones)
  int64_t dedicated_allocations = 0;  ///< of which dedicated to one buffer (MemoryPolicy::Dedicated)
  int64_t device_memory_bytes = 0;    ///< bytes of those VkDeviceMemory objects
  int64_t allocated_bytes = 0;   ///< bytes bound to buffers (each buffer's memory requirement)
  int64_t pipelines = 0;         ///< compute pipelines (each with its layouts)
  int64_t descriptor_pools = 0;
  int64_t command_buffers = 0;
  int64_t query_pools = 0;
  bool operator==(const LiveObjects&) const = default;
};

class Device;

/// A storage buffer (STORAGE | TRANSFER_SRC | TRANSFER_DST) of at least bytes() bytes, or a host-visible staging
/// buffer. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;
  ~Buffer() = default;
  bool valid() const { return buf_.get() != VK_NULL_HANDLE; }
  VkBuffer handle() const { return buf_.get(); }
  int64_t bytes() const { return bytes_; }         ///< requested size
  int64_t alloc_bytes() const { return alloc_; }   ///< allocated size (a multiple of 16)
  void* mapped() const { return mapped_; }         ///< host pointer (direct map or staging), else nullptr
  const std::string& name() const { return name_; }
  /// Where the buffer lives (tests, placement logs).
  struct Placement {
    uint32_t memory_type = 0;              ///< VkPhysicalDeviceMemoryProperties::memoryTypes index
    VkMemoryPropertyFlags flags = 0;       ///< that type's propertyFlags
    bool dedicated = false;                ///< a VkDeviceMemory of its own
    int64_t offset = 0;                    ///< bytes into its VkDeviceMemory
    int64_t memory_bytes = 0;              ///< size of that VkDeviceMemory
  };
  Placement placement() const;

 private:
  friend class Device;
  // members go in reverse order: the buffer is destroyed before its memory is released
  detail::UniqueHandle<detail::AllocationTraits> mem_;
  detail::UniqueHandle<detail::BufferTraits> buf_;
  int64_t bytes_ = 0, alloc_ = 0;
  void* mapped_ = nullptr;
  std::string name_;
};

/// A compute pipeline with its descriptor-set layout (set 0: `bindings` storage buffers) and pipeline layout
/// (no push constants). Move-only.
class Pipeline {
 public:
  Pipeline() = default;
  Pipeline(Pipeline&&) noexcept = default;
  Pipeline& operator=(Pipeline&&) noexcept = default;
  ~Pipeline() = default;
  VkPipeline handle() const { return pipe_.get(); }
  VkPipelineLayout layout() const { return layout_.get(); }
  VkDescriptorSetLayout set_layout() const { return set_layout_.get(); }
  int bindings() const { return bindings_; }
  const std::string& name() const { return name_; }

 private:
  friend class Device;
  // destroyed in reverse order: the pipeline, its layout, the set layout
  detail::UniqueHandle<detail::SetLayoutTraits> set_layout_;
  detail::UniqueHandle<detail::PipelineLayoutTraits> layout_;
  detail::UniqueHandle<detail::PipelineTraits> pipe_;
  int bindings_ = 0;
  std::string name_;
};

/// A descriptor pool for storage-buffer sets; its sets are freed with it. Move-only.
class DescriptorPool {
 public:
  DescriptorPool() = default;
  DescriptorPool(DescriptorPool&&) noexcept = default;
  DescriptorPool& operator=(DescriptorPool&&) noexcept = default;
  ~DescriptorPool() = default;
  VkDescriptorPool handle() const { return pool_.get(); }

 private:
  friend class Device;
  detail::UniqueHandle<detail::DescriptorPoolTraits> pool_;
};

/// A timestamp query pool. Move-only.
class QueryPool {
 public:
  QueryPool() = default;
  QueryPool(QueryPool&&) noexcept = default;
  QueryPool& operator=(QueryPool&&) noexcept = default;
  ~QueryPool() = default;
  VkQueryPool handle() const { return pool_.get(); }
  uint32_t count() const { return count_; }

 private:
  friend class Device;
  detail::UniqueHandle<detail::QueryPoolTraits> pool_;
  uint32_t count_ = 0;
};

/// A primary command buffer on the compute queue's pool, with its own fence. Record between begin() and end();
/// a recorded buffer can be submitted any number of times (Device::submit_and_wait), or recorded again (begin()
/// resets it). Move-only.
class CommandBuffer {
 public:
  CommandBuffer() = default;
  CommandBuffer(CommandBuffer&&) noexcept = default;
  CommandBuffer& operator=(CommandBuffer&&) noexcept = default;
  ~CommandBuffer() = default;
  VkCommandBuffer handle() const { return cmd_.get(); }
  bool recorded() const { return recorded_; }

  void begin();
  void end();
  /// Binds `pipe` and `set` (set 0) and dispatches `groups` workgroups.
  void dispatch(const Pipeline& pipe, VkDescriptorSet set, std::array<uint32_t, 3> groups);
  /// Global memory barrier: earlier compute-shader and transfer writes (and host writes) become visible to later
  /// compute-shader and transfer reads and writes (orders dependent dispatches; WAR and WAW included).
  void barrier();
  /// Global memory barrier: compute-shader and transfer writes become visible to host reads (before a readback).
  void barrier_to_host();
  /// vkCmdCopyBuffer of `bytes` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
  void copy(const Buffer& src, const Buffer& dst, int64_t bytes, int64_t src_offset = 0, int64_t dst_offset = 0);
  /// vkCmdResetQueryPool of queries [first, first + count).
  void reset_queries(const QueryPool& pool, uint32_t first, uint32_t count);
  /// vkCmdWriteTimestamp at the compute-shader stage (after every earlier command's compute work) into `query`.
  void timestamp(const QueryPool& pool, uint32_t query);

 private:
  friend class Device;
  // destroyed in reverse order: the command buffer, then its fence
  detail::UniqueHandle<detail::FenceTraits> fence_;
  detail::UniqueHandle<detail::CommandBufferTraits> cmd_;
  bool recorded_ = false;
};

class Device {
 public:
  /// Throws BackendError when there is no Vulkan loader/ICD, no device with a compute queue, no device matching
  /// DeviceOptions::device, or the validation layer is asked for and missing; ValueError for invalid options.
  static std::unique_ptr<Device> create(const DeviceOptions& opt);
  ~Device();  ///< saves the pipeline cache (save_pipeline_cache)
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Caps& caps() const { return caps_; }

  /// A device-local storage buffer of `bytes` bytes (allocated rounded up to 16, at least 16), zero-filled.
  /// ValueError when bytes < 0; UnsupportedError when it exceeds maxStorageBufferRange (Caps::limits.max_buffer_bytes).
  Buffer create_buffer(int64_t bytes, const std::string& name);
  /// A host-visible, host-coherent (cached for readback when available) transfer buffer, mapped.
  Buffer create_staging_buffer(int64_t bytes, const std::string& name, bool readback);
  /// Copies `bytes` bytes from `src` to the start of `dst` (direct map: memcpy; else staging + copy, waits).
  /// ValueError when bytes exceed the buffer.
  void upload(Buffer& dst, const void* src, int64_t bytes);
  /// Copies the first `bytes` bytes of `src` to `dst` (waits for the GPU). ValueError when bytes exceed the buffer.
  void download(const Buffer& src, void* dst, int64_t bytes);

  /// A compute pipeline from SPIR-V words whose entry point is "main" and which declares `bindings` storage buffers
  /// at set 0, bindings 0..bindings-1, and the workgroup size `local_size`. UnsupportedError naming the limit
  /// (maxPerStageDescriptorStorageBuffers, maxComputeWorkGroupSize, maxComputeWorkGroupInvocations) when the
  /// device cannot run it; BackendError when the driver rejects it.
  Pipeline create_pipeline(const std::vector<uint32_t>& spirv, int bindings, std::array<uint32_t, 3> local_size,
                           const std::string& name);
  /// A pool for `sets` descriptor sets holding `storage_buffers` storage-buffer descriptors in total.
  DescriptorPool create_descriptor_pool(int sets, int storage_buffers);
  /// A descriptor set of `pipe`'s layout from `pool`, binding buffers[b] (whole) at binding b. ValueError when the
  /// number of buffers is not pipe.bindings().
  VkDescriptorSet allocate_set(DescriptorPool& pool, const Pipeline& pipe, const std::vector<const Buffer*>& buffers);
  CommandBuffer create_command_buffer();
  /// Submits a recorded command buffer to the compute queue and waits for it (its fence).
  void submit_and_wait(CommandBuffer& cmd);
  /// A pool of `count` timestamp queries (BackendError when the queue has no timestamps).
  QueryPool create_timestamp_pool(uint32_t count);
  /// Timestamps [first, first + count) of a pool, in ns (ticks x timestampPeriod), after the GPU wrote them.
  std::vector<double> read_timestamps_ns(const QueryPool& pool, uint32_t first, uint32_t count);

  /// Validation-layer messages (warnings and errors) received so far; 0 when validation is off.
  int64_t validation_messages() const;
  /// The first messages received (at most 64), for test failure output.
  std::vector<std::string> validation_log() const;
  LiveObjects live_objects() const;

  /// DIR/vk_pipelines_<vendor>_<device>_<pipelineCacheUUID>.bin, or empty without a pipeline-cache directory.
  std::filesystem::path pipeline_cache_path() const;
  /// Bytes of pipeline-cache data loaded at creation (0: none, or the file did not match this device).
  int64_t pipeline_cache_loaded_bytes() const;
  /// Writes the pipeline cache atomically (temporary file + rename). Returns false on I/O errors (never throws);
  /// each failure is counted (pipeline_cache_write_errors) and the first one of this device is warned about on
  /// stderr, naming the file and the reason.
  bool save_pipeline_cache();
  /// Failed writes of the pipeline-cache file so far (an unwritable directory, a full disk).
  int64_t pipeline_cache_write_errors() const;

 private:
  Device() = default;
  static Buffer make_buffer(const std::shared_ptr<detail::Context>& ctx, int64_t bytes, const std::string& name,
                            VkBufferUsageFlags usage, VkMemoryPropertyFlags need, VkMemoryPropertyFlags want);
  void load_pipeline_cache();
  void warn_pipeline_cache_unwritable(const std::filesystem::path& path, const std::string& why);
  std::shared_ptr<detail::Context> ctx_;
  Caps caps_;
  std::filesystem::path pipeline_cache_dir_;
  int64_t cache_loaded_ = 0;
  int64_t cache_write_errors_ = 0;
  Buffer staging_;           // the staging path's transfer buffer (kStagingBytes)
  CommandBuffer transfer_;   // one-shot transfers
};

/// Throws BackendError "<what> failed: VK_ERROR_..." unless r is VK_SUCCESS.
void check(VkResult r, const char* what);
/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult r);

}  // namespace sg::vk
