// The Vulkan compute device: instance, device selection and probe, memory allocator, RAII handles, pipeline cache.
#include "sg/vulkan_device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/dump.h"
#include "sg/error.h"
#include "sg/target.h"
#include "env_flag.h"
#include "vulkan_memory.h"

namespace sg::vk {

const char* result_name(VkResult r) {
  switch (r) {
#define SG_VK_CASE(x) \
  case x: return #x;
    SG_VK_CASE(VK_SUCCESS)
    SG_VK_CASE(VK_NOT_READY)
    SG_VK_CASE(VK_TIMEOUT)
    SG_VK_CASE(VK_INCOMPLETE)
    SG_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    SG_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    SG_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    SG_VK_CASE(VK_ERROR_DEVICE_LOST)
    SG_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    SG_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    SG_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    SG_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    SG_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    SG_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    SG_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    SG_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    SG_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    SG_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef SG_VK_CASE
    default: return "VK_ERROR_(unknown)";
  }
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw BackendError(fmt::format("vulkan: {} failed: {} ({})", what, result_name(r), static_cast<int>(r)));
}

namespace detail {

struct Context {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool cmd_pool = VK_NULL_HANDLE;
  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties mem_props{};
  Allocator memory;  // buffer placement (vulkan_memory.h)
  LiveObjects live;
  mutable std::mutex log_mu;  // the messenger may be called from driver threads
  int64_t messages = 0;
  std::vector<std::string> log;

  void release(const Allocation& a) { memory.release(a); }
  ~Context();
};

Context::~Context() {
  if (device) {
    vkDeviceWaitIdle(device);
    memory.free_all();
    if (pipeline_cache) vkDestroyPipelineCache(device, pipeline_cache, nullptr);
    if (cmd_pool) vkDestroyCommandPool(device, cmd_pool, nullptr);
    vkDestroyDevice(device, nullptr);
  }
  if (messenger) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance, messenger, nullptr);
  }
  if (instance) vkDestroyInstance(instance, nullptr);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------------------------
// RAII handles

const char* memory_policy_name(MemoryPolicy p) { return p == MemoryPolicy::Blocks ? "blocks" : "dedicated"; }

Buffer::Placement Buffer::placement() const {
  Placement p;
  const detail::Allocation& mem = mem_.get();
  if (!mem.block) return p;
  p.memory_type = mem.block->type;
  p.flags = mem_.context()->mem_props.memoryTypes[p.memory_type].propertyFlags;
  p.dedicated = mem.block->dedicated;
  p.offset = static_cast<int64_t>(mem.offset);
  p.memory_bytes = static_cast<int64_t>(mem.block->size);
  return p;
}

namespace detail {
void BufferTraits::count(Context& ctx) { ++ctx.live.buffers; }
void BufferTraits::destroy(Context& ctx, VkBuffer h) noexcept {
  vkDestroyBuffer(ctx.device, h, nullptr);
  --ctx.live.buffers;
}
void AllocationTraits::count(Context&) {}
void AllocationTraits::destroy(Context& ctx, Allocation a) noexcept { ctx.release(a); }
void PipelineTraits::count(Context& ctx) { ++ctx.live.pipelines; }
void PipelineTraits::destroy(Context& ctx, VkPipeline h) noexcept {
  vkDestroyPipeline(ctx.device, h, nullptr);
  --ctx.live.pipelines;
}
void PipelineLayoutTraits::count(Context&) {}
void PipelineLayoutTraits::destroy(Context& ctx, VkPipelineLayout h) noexcept {
  vkDestroyPipelineLayout(ctx.device, h, nullptr);
}
void SetLayoutTraits::count(Context&) {}
void SetLayoutTraits::destroy(Context& ctx, VkDescriptorSetLayout h) noexcept {
  vkDestroyDescriptorSetLayout(ctx.device, h, nullptr);
}
void DescriptorPoolTraits::count(Context& ctx) { ++ctx.live.descriptor_pools; }
void DescriptorPoolTraits::destroy(Context& ctx, VkDescriptorPool h) noexcept {
  vkDestroyDescriptorPool(ctx.device, h, nullptr);
  --ctx.live.descriptor_pools;
}
void QueryPoolTraits::count(Context& ctx) { ++ctx.live.query_pools; }
void QueryPoolTraits::destroy(Context& ctx, VkQueryPool h) noexcept {
  vkDestroyQueryPool(ctx.device, h, nullptr);
  --ctx.live.query_pools;
}
void CommandBufferTraits::count(Context& ctx) { ++ctx.live.command_buffers; }
void CommandBufferTraits::destroy(Context& ctx, VkCommandBuffer h) noexcept {
  vkFreeCommandBuffers(ctx.device, ctx.cmd_pool, 1, &h);
  --ctx.live.command_buffers;
}
void FenceTraits::count(Context&) {}
void FenceTraits::destroy(Context& ctx, VkFence h) noexcept { vkDestroyFence(ctx.device, h, nullptr); }
}  // namespace detail

void CommandBuffer::begin() {
  check(vkResetCommandBuffer(cmd_.get(), 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(cmd_.get(), &bi), "vkBeginCommandBuffer");
  recorded_ = false;
}
void CommandBuffer::end() {
  check(vkEndCommandBuffer(cmd_.get()), "vkEndCommandBuffer");
  recorded_ = true;
}
void CommandBuffer::dispatch(const Pipeline& pipe, VkDescriptorSet set, std::array<uint32_t, 3> groups) {
  vkCmdBindPipeline(cmd_.get(), VK_PIPELINE_BIND_POINT_COMPUTE, pipe.handle());
  vkCmdBindDescriptorSets(cmd_.get(), VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout(), 0, 1, &set, 0, nullptr);
  vkCmdDispatch(cmd_.get(), groups[0], groups[1], groups[2]);
}
void CommandBuffer::barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd_.get(),
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
}
void CommandBuffer::barrier_to_host() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd_.get(), VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}
void CommandBuffer::copy(const Buffer& src, const Buffer& dst, int64_t bytes, int64_t src_offset, int64_t dst_offset) {
  if (bytes <= 0) return;
  VkBufferCopy region{static_cast<VkDeviceSize>(src_offset), static_cast<VkDeviceSize>(dst_offset),
                      static_cast<VkDeviceSize>(bytes)};
  vkCmdCopyBuffer(cmd_.get(), src.handle(), dst.handle(), 1, &region);
}
void CommandBuffer::reset_queries(const QueryPool& pool, uint32_t first, uint32_t count) {
  vkCmdResetQueryPool(cmd_.get(), pool.handle(), first, count);
}
void CommandBuffer::timestamp(const QueryPool& pool, uint32_t query) {
  vkCmdWriteTimestamp(cmd_.get(), VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pool.handle(), query);
}

// ---------------------------------------------------------------------------------------------------------------
// Creation: instance, physical device, probe, logical device

namespace {

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                          void* user) {
  auto* ctx = static_cast<detail::Context*>(user);
  const char* sev = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
  std::string msg = fmt::format("[vulkan validation {}] {}", sev, data && data->pMessage ? data->pMessage : "");
  std::lock_guard<std::mutex> lock(ctx->log_mu);
  ++ctx->messages;
  if (ctx->log.size() < 64) ctx->log.push_back(msg);
  if (ctx->messages <= 16) fmt::print(stderr, "{}\n", msg);
  return VK_FALSE;
}

bool env_on(const char* name) { return env_flag(name).value_or(false); }

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool layer_has_extension(const char* layer, const char* ext) {
  uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(layer, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateInstanceExtensionProperties(layer, &n, exts.data());
  for (auto& e : exts)
    if (std::strcmp(e.extensionName, ext) == 0) return true;
  return false;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}
int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The first queue family with compute, preferring one without graphics (a dedicated compute queue); -1 if none.
int compute_family(VkPhysicalDevice pd) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
  int any = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) return static_cast<int>(i);
    if (any < 0) any = static_cast<int>(i);
  }
  return any;
}

std::string version_str(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

void create_instance(detail::Context& ctx, bool validation) {
  if (validation && !has_layer("VK_LAYER_KHRONOS_validation"))
    throw BackendError("vulkan: validation was asked for (SG_VULKAN_VALIDATION or DeviceOptions::validation) but "
                       "VK_LAYER_KHRONOS_validation is not installed; install the Debian package vulkan-validationlayers");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "shadergrad";
  app.pEngineName = "shadergrad";
  uint32_t loader_version = VK_API_VERSION_1_0;
  auto enum_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"));
  if (enum_version) enum_version(&loader_version);
  app.apiVersion = loader_version >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : loader_version;
  std::vector<const char*> layers, exts;
  if (validation) {
    layers.push_back("VK_LAYER_KHRONOS_validation");
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = on_message;
  mi.pUserData = &ctx;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  // synchronization validation too: a missing barrier between dependent dispatches or copies is a message
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync;
  if (validation) {
    ci.pNext = &mi;  // also reports instance creation/destruction
    if (layer_has_extension("VK_LAYER_KHRONOS_validation", VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)) {
      exts.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
      ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
      ci.ppEnabledExtensionNames = exts.data();
      features.pNext = &mi;  // the instance chain: features -> messenger info (which itself stays unchained)
      ci.pNext = &features;
    }
  }
  VkResult r = vkCreateInstance(&ci, nullptr, &ctx.instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
    throw BackendError(fmt::format("vulkan: no Vulkan driver (vkCreateInstance: {}); install a Vulkan ICD "
                                   "(Debian: mesa-vulkan-drivers) or check VK_DRIVER_FILES / VK_ICD_FILENAMES",
                                   result_name(r)));
  check(r, "vkCreateInstance");
  if (validation) {
    auto make = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(ctx.instance, "vkCreateDebugUtilsMessengerEXT"));
    if (!make) throw BackendError("vulkan: vkCreateDebugUtilsMessengerEXT is missing although the layer is enabled");
    check(make(ctx.instance, &mi, nullptr, &ctx.messenger), "vkCreateDebugUtilsMessengerEXT");
  }
}

/// Picks the physical device (see DeviceOptions::device) and fills the device list of `caps`.
VkPhysicalDevice pick_device(detail::Context& ctx, const std::string& want, Caps& caps) {
  uint32_t n = 0;
  VkResult r = vkEnumeratePhysicalDevices(ctx.instance, &n, nullptr);
  if (r == VK_ERROR_INITIALIZATION_FAILED || n == 0)
    throw BackendError("vulkan: no Vulkan physical device found (install a Vulkan ICD, e.g. Debian mesa-vulkan-drivers "
                       "for lavapipe, or check VK_DRIVER_FILES)");
  check(r, "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> pds(n);
  check(vkEnumeratePhysicalDevices(ctx.instance, &n, pds.data()), "vkEnumeratePhysicalDevices");
  int best = -1, best_rank = -1;
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pds[i], &p);
    caps.devices.push_back(fmt::format("{}: {} ({})", i, p.deviceName, type_name(p.deviceType)));
    if (compute_family(pds[i]) < 0) continue;
    const bool match = want.empty() ? true
                       : std::all_of(want.begin(), want.end(), ::isdigit) ? std::to_string(i) == want
                                                                          : lower(p.deviceName).find(lower(want)) != std::string::npos;
    if (!match) continue;
    const int rank = want.empty() ? type_rank(p.deviceType) : 100;
    if (rank > best_rank) best = static_cast<int>(i), best_rank = rank;
  }
  std::string all;
  for (auto& d : caps.devices) all += "\n  " + d;
  if (best < 0)
    throw BackendError(want.empty() ? fmt::format("vulkan: no device with a compute queue:{}", all)
                                    : fmt::format("vulkan: no device with a compute queue matches '{}' (DeviceOptions::device "
                                                  "or SG_VULKAN_DEVICE: an index or part of the name):{}", want, all));
  caps.device_index = best;
  return pds[best];
}

/// Fills the limits and identity of `caps` from the physical device.
void probe(VkPhysicalDevice pd, Caps& caps) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(pd, &p);
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  const bool v11 = p.apiVersion >= VK_API_VERSION_1_1, v12 = p.apiVersion >= VK_API_VERSION_1_2;
  bool has_sm = false;  // VK_NV_shader_sm_builtins: the multiprocessor count (ComputeLimits::compute_units)
  {
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> ext(n);
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
    for (auto& e : ext) has_sm |= std::strcmp(e.extensionName, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME) == 0;
  }
  if (v11) {
    p2.pNext = &sub;
    if (v12) sub.pNext = &drv;
    if (has_sm) drv.pNext = &sm;
    vkGetPhysicalDeviceProperties2(pd, &p2);
  }
  has_sm = has_sm && v12;
  caps.name = p.deviceName;
  caps.device_type = type_name(p.deviceType);
  caps.api_version = version_str(p.apiVersion);
  caps.vendor_id = p.vendorID;
  caps.device_id = p.deviceID;
  if (v12) caps.driver = fmt::format("{} {}", drv.driverName, drv.driverInfo);
  const VkPhysicalDeviceLimits& l = p.limits;
  ComputeLimits& c = caps.limits;
  c.max_storage_buffers = static_cast<int>(std::min<uint32_t>(l.maxPerStageDescriptorStorageBuffers, 1u << 20));
  c.max_workgroup_invocations = static_cast<int>(l.maxComputeWorkGroupInvocations);
  c.max_shared_bytes = l.maxComputeSharedMemorySize;
  c.max_workgroup_count = std::min({l.maxComputeWorkGroupCount[0], l.maxComputeWorkGroupCount[1], l.maxComputeWorkGroupCount[2]});
  c.max_buffer_bytes = l.maxStorageBufferRange;
  c.subgroup_size = v11 && (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? static_cast<int>(sub.subgroupSize) : 0;
  constexpr VkSubgroupFeatureFlags kArith =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_VOTE_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  c.subgroup_arithmetic = c.subgroup_size > 0 && (sub.supportedOperations & kArith) == kArith;
  c.cpu_device = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || is_cpu_renderer(p.deviceName);
  c.compute_units = has_sm ? static_cast<int>(sm.shaderSMCount) : 0;
  caps.max_workgroup_size = {l.maxComputeWorkGroupSize[0], l.maxComputeWorkGroupSize[1], l.maxComputeWorkGroupSize[2]};
  caps.timestamp_period_ns = l.timestampPeriod;
  caps.queue_family = static_cast<uint32_t>(compute_family(pd));
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> q(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, q.data());
  caps.timestamps = q[caps.queue_family].timestampValidBits > 0 && l.timestampPeriod > 0;
}

constexpr int64_t kStagingBytes = int64_t{4} << 20;  // transfers on the staging path go in pieces of this size

constexpr VkMemoryPropertyFlags kMapped = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

}  // namespace

std::unique_ptr<Device> Device::create(const DeviceOptions& opt) {
  if (opt.validation < -1 || opt.validation > 1)
    throw ValueError(fmt::format("vulkan DeviceOptions::validation must be -1 (env), 0 or 1, got {}", opt.validation));
  if (opt.direct_map < -1 || opt.direct_map > 1)
    throw ValueError(fmt::format("vulkan DeviceOptions::direct_map must be -1 (auto), 0 or 1, got {}", opt.direct_map));
  if (opt.dedicated_min_bytes < -1)
    throw ValueError(fmt::format("vulkan DeviceOptions::dedicated_min_bytes must be -1 (env) or >= 0, got {}",
                                 opt.dedicated_min_bytes));
  std::string policy = opt.memory_policy;
  if (policy.empty())
    if (const char* e = std::getenv("SG_VULKAN_MEMORY")) policy = e;
  if (!policy.empty() && policy != "dedicated" && policy != "blocks")
    throw ValueError(fmt::format("vulkan: memory policy '{}' (DeviceOptions::memory_policy or SG_VULKAN_MEMORY) is "
                                 "neither 'dedicated' nor 'blocks'", policy));
  int64_t dedicated_min = opt.dedicated_min_bytes;
  if (dedicated_min == -1) {
    dedicated_min = kDedicatedMinBytes;
    if (const char* e = std::getenv("SG_VULKAN_DEDICATED_MIN_BYTES"); e && *e) {
      char* end = nullptr;
      const long long v = std::strtoll(e, &end, 10);
      if (*end || v < 0)
        throw ValueError(fmt::format("vulkan: SG_VULKAN_DEDICATED_MIN_BYTES='{}' is not a byte count (an integer >= 0)", e));
      dedicated_min = v;
    }
  }
  std::unique_ptr<Device> dev(new Device());
  auto ctx = std::make_shared<detail::Context>();
  Caps& caps = dev->caps_;
  caps.validation = opt.validation == 1 || (opt.validation == -1 && env_on("SG_VULKAN_VALIDATION"));
  create_instance(*ctx, caps.validation);
  std::string want = opt.device;
  if (want.empty())
    if (const char* e = std::getenv("SG_VULKAN_DEVICE")) want = e;
  ctx->phys = pick_device(*ctx, want, caps);
  probe(ctx->phys, caps);
  vkGetPhysicalDeviceMemoryProperties(ctx->phys, &ctx->mem_props);
  for (uint32_t h = 0; h < ctx->mem_props.memoryHeapCount; ++h)
    if (ctx->mem_props.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      caps.device_local_bytes = std::max<int64_t>(caps.device_local_bytes, ctx->mem_props.memoryHeaps[h].size);

  // direct map: device-local memory that the host maps coherently, on devices sharing memory with the host
  bool mappable = false;
  for (uint32_t i = 0; i < ctx->mem_props.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = ctx->mem_props.memoryTypes[i].propertyFlags;
    mappable |= (f & (kMapped | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) == (kMapped | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  }
  if (opt.direct_map == 1 && !mappable)
    throw BackendError(fmt::format("vulkan: direct_map = 1 but {} has no device-local, host-visible, host-coherent memory type",
                                   caps.name));
  caps.direct_map = opt.direct_map == 1 || (opt.direct_map == -1 && mappable &&
                                            (caps.device_type == "integrated" || caps.device_type == "cpu"));

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = caps.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  check(vkCreateDevice(ctx->phys, &di, nullptr, &ctx->device), "vkCreateDevice");
  caps.memory_policy = policy == "blocks" ? MemoryPolicy::Blocks : MemoryPolicy::Dedicated;
  caps.dedicated_min_bytes = dedicated_min;
  {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(ctx->phys, &p);
    ctx->memory.init(ctx->device, ctx->mem_props, p.apiVersion >= VK_API_VERSION_1_1, caps.memory_policy, dedicated_min,
                     env_on("SG_VULKAN_MEMORY_LOG"), &ctx->live);
  }
  vkGetDeviceQueue(ctx->device, caps.queue_family, 0, &ctx->queue);
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = caps.queue_family;
  check(vkCreateCommandPool(ctx->device, &pi, nullptr, &ctx->cmd_pool), "vkCreateCommandPool");
  dev->ctx_ = ctx;
  dev->pipeline_cache_dir_ = opt.pipeline_cache_dir;
  dev->load_pipeline_cache();
  dev->transfer_ = dev->create_command_buffer();
  if (!caps.direct_map) dev->staging_ = dev->create_staging_buffer(kStagingBytes, "staging", true);
  return dev;
}

Device::~Device() { save_pipeline_cache(); }

// ---------------------------------------------------------------------------------------------------------------
// Pipeline cache file

std::filesystem::path Device::pipeline_cache_path() const {
  if (pipeline_cache_dir_.empty()) return {};
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(ctx_->phys, &p);
  std::string uuid;
  for (uint8_t b : p.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
  return pipeline_cache_dir_ / fmt::format("vk_pipelines_{:04x}_{:04x}_{}.bin", p.vendorID, p.deviceID, uuid);
}

void Device::load_pipeline_cache() {
  std::string data;
  if (auto path = pipeline_cache_path(); !path.empty()) {
    std::ifstream f(path, std::ios::binary);
    if (f) data.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // the header (VkPipelineCacheHeaderVersionOne: length, version, vendor, device, UUID) must describe this device;
  // anything else (truncated, another driver's) starts an empty cache instead of reaching the driver
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(ctx_->phys, &p);
  bool ok = data.size() >= 32;
  if (ok) {
    uint32_t h[4];
    std::memcpy(h, data.data(), 16);
    ok = h[0] >= 32 && h[0] <= data.size() && h[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && h[2] == p.vendorID &&
         h[3] == p.deviceID && std::memcmp(data.data() + 16, p.pipelineCacheUUID, VK_UUID_SIZE) == 0;
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  if (ok) {
    ci.initialDataSize = data.size();
    ci.pInitialData = data.data();
    cache_loaded_ = static_cast<int64_t>(data.size());
  }
  check(vkCreatePipelineCache(ctx_->device, &ci, nullptr, &ctx_->pipeline_cache), "vkCreatePipelineCache");
}

int64_t Device::pipeline_cache_loaded_bytes() const { return cache_loaded_; }

bool Device::save_pipeline_cache() {
  const auto path = pipeline_cache_path();
  if (path.empty() || !ctx_ || !ctx_->pipeline_cache) return false;
  size_t n = 0;
  if (vkGetPipelineCacheData(ctx_->device, ctx_->pipeline_cache, &n, nullptr) != VK_SUCCESS) return false;
  std::string data(n, '\0');
  if (vkGetPipelineCacheData(ctx_->device, ctx_->pipeline_cache, &n, data.data()) != VK_SUCCESS) return false;
  data.resize(n);
  std::error_code ec;
  std::filesystem::create_directories(pipeline_cache_dir_, ec);
  try {
    write_file_atomic(path.string(), data);  // temporary + fsync + rename (sg/dump.h)
  } catch (const Error& e) {
    warn_pipeline_cache_unwritable(path, ec ? ec.message() : e.what());
    return false;
  }
  return true;
}

int64_t Device::pipeline_cache_write_errors() const { return cache_write_errors_; }

void Device::warn_pipeline_cache_unwritable(const std::filesystem::path& path, const std::string& why) {
  if (cache_write_errors_++ > 0) return;  // counted every time, said once per device (like the kernel cache)
  std::cerr << fmt::format("shadergrad: warning: cannot write the Vulkan pipeline cache {} ({}); pipelines will be "
                           "built again by every run. Point SG_KERNEL_CACHE at a writable directory or unset it.\n",
                           path.string(), why);
}

// ---------------------------------------------------------------------------------------------------------------
// Buffers and transfers

Buffer Device::make_buffer(const std::shared_ptr<detail::Context>& ctx, int64_t bytes, const std::string& name,
                   VkBufferUsageFlags usage, VkMemoryPropertyFlags need, VkMemoryPropertyFlags want) {
  const int64_t alloc = std::max<int64_t>((bytes + 15) / 16 * 16, 16);
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = static_cast<VkDeviceSize>(alloc);
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer vb = VK_NULL_HANDLE;
  check(vkCreateBuffer(ctx->device, &bi, nullptr, &vb), fmt::format("vkCreateBuffer ({}, {} bytes)", name, alloc).c_str());
  Buffer b;
  b.buf_ = detail::UniqueHandle<detail::BufferTraits>::adopt(ctx, vb);
  const detail::Allocation a = ctx->memory.bind_buffer(vb, name, need, want);  // throws: b destroys the buffer
  b.mem_ = detail::UniqueHandle<detail::AllocationTraits>::adopt(ctx, a);
  b.bytes_ = bytes;
  b.alloc_ = alloc;
  b.mapped_ = a.block->mapped ? a.block->mapped + a.offset : nullptr;
  b.name_ = name;
  return b;
}

Buffer Device::create_buffer(int64_t bytes, const std::string& name) {
  if (bytes < 0) throw ValueError(fmt::format("vulkan: buffer {} of {} bytes", name, bytes));
  const int64_t alloc = std::max<int64_t>((bytes + 15) / 16 * 16, 16);  // as make_buffer rounds it
  if (alloc > caps_.limits.max_buffer_bytes)
    throw UnsupportedError(fmt::format("vulkan: buffer {} needs {} bytes, more than {}'s maxStorageBufferRange ({} bytes)",
                                       name, alloc, caps_.name, caps_.limits.max_buffer_bytes));
  const VkBufferUsageFlags usage =
      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  Buffer b = caps_.direct_map
                 ? make_buffer(ctx_, bytes, name, usage, kMapped | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
                 : make_buffer(ctx_, bytes, name, usage, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (b.mapped()) {
    std::memset(b.mapped(), 0, static_cast<size_t>(b.alloc_bytes()));
  } else {
    transfer_.begin();
    vkCmdFillBuffer(transfer_.handle(), b.handle(), 0, VK_WHOLE_SIZE, 0);
    transfer_.barrier();
    transfer_.end();
    submit_and_wait(transfer_);
  }
  if (!caps_.direct_map) b.mapped_ = nullptr;  // device memory that happens to be mappable is still used via staging
  return b;
}

Buffer Device::create_staging_buffer(int64_t bytes, const std::string& name, bool readback) {
  if (bytes < 0) throw ValueError(fmt::format("vulkan: staging buffer {} of {} bytes", name, bytes));
  return make_buffer(ctx_, bytes, name, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, kMapped,
                     readback ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0);
}

void Device::upload(Buffer& dst, const void* src, int64_t bytes) {
  if (bytes < 0 || bytes > dst.alloc_bytes())
    throw ValueError(fmt::format("vulkan: upload of {} bytes into buffer {} of {} bytes", bytes, dst.name(), dst.alloc_bytes()));
  if (bytes == 0) return;
  if (dst.mapped()) {
    std::memcpy(dst.mapped(), src, static_cast<size_t>(bytes));
    return;
  }
  for (int64_t off = 0; off < bytes; off += staging_.alloc_bytes()) {  // through the fixed staging buffer
    const int64_t n = std::min(bytes - off, staging_.alloc_bytes());
    std::memcpy(staging_.mapped(), static_cast<const char*>(src) + off, static_cast<size_t>(n));
    transfer_.begin();
    transfer_.barrier();
    transfer_.copy(staging_, dst, n, 0, off);
    transfer_.barrier();
    transfer_.end();
    submit_and_wait(transfer_);
  }
}

void Device::download(const Buffer& src, void* dst, int64_t bytes) {
  if (bytes < 0 || bytes > src.alloc_bytes())
    throw ValueError(fmt::format("vulkan: download of {} bytes from buffer {} of {} bytes", bytes, src.name(), src.alloc_bytes()));
  if (bytes == 0) return;
  if (src.mapped()) {
    check(vkQueueWaitIdle(ctx_->queue), "vkQueueWaitIdle");
    std::memcpy(dst, src.mapped(), static_cast<size_t>(bytes));
    return;
  }
  for (int64_t off = 0; off < bytes; off += staging_.alloc_bytes()) {
    const int64_t n = std::min(bytes - off, staging_.alloc_bytes());
    transfer_.begin();
    transfer_.barrier();
    transfer_.copy(src, staging_, n, off, 0);
    transfer_.barrier_to_host();
    transfer_.end();
    submit_and_wait(transfer_);
    std::memcpy(static_cast<char*>(dst) + off, staging_.mapped(), static_cast<size_t>(n));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Pipelines, descriptors, command buffers, queries

Pipeline Device::create_pipeline(const std::vector<uint32_t>& spirv, int bindings, std::array<uint32_t, 3> local_size,
                                 const std::string& name) {
  const ComputeLimits& l = caps_.limits;
  if (bindings < 0 || bindings > l.max_storage_buffers)
    throw UnsupportedError(fmt::format("vulkan: kernel {} binds {} storage buffers; {} allows {} "
                                       "(maxPerStageDescriptorStorageBuffers)", name, bindings, caps_.name, l.max_storage_buffers));
  for (int d = 0; d < 3; ++d)
    if (local_size[d] < 1 || local_size[d] > caps_.max_workgroup_size[d])
      throw UnsupportedError(fmt::format("vulkan: kernel {} has local size {}x{}x{}; {} allows {} in dimension {} "
                                         "(maxComputeWorkGroupSize)", name, local_size[0], local_size[1], local_size[2],
                                         caps_.name, caps_.max_workgroup_size[d], d));
  const int64_t inv = int64_t{local_size[0]} * local_size[1] * local_size[2];
  if (inv > l.max_workgroup_invocations)
    throw UnsupportedError(fmt::format("vulkan: kernel {} has {} invocations per workgroup ({}x{}x{}); {} allows {} "
                                       "(maxComputeWorkGroupInvocations)", name, inv, local_size[0], local_size[1],
                                       local_size[2], caps_.name, l.max_workgroup_invocations));
  if (spirv.empty()) throw ValueError(fmt::format("vulkan: kernel {}: empty SPIR-V", name));
  Pipeline p;
  p.bindings_ = bindings;
  p.name_ = name;
  std::vector<VkDescriptorSetLayoutBinding> lb(static_cast<size_t>(bindings));
  for (int b = 0; b < bindings; ++b)
    lb[b] = {static_cast<uint32_t>(b), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = static_cast<uint32_t>(bindings);
  li.pBindings = lb.data();
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  check(vkCreateDescriptorSetLayout(ctx_->device, &li, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
  p.set_layout_ = detail::UniqueHandle<detail::SetLayoutTraits>::adopt(ctx_, set_layout);
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &set_layout;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  check(vkCreatePipelineLayout(ctx_->device, &pli, nullptr, &layout), "vkCreatePipelineLayout");
  p.layout_ = detail::UniqueHandle<detail::PipelineLayoutTraits>::adopt(ctx_, layout);
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = spirv.size() * sizeof(uint32_t);
  mi.pCode = spirv.data();
  VkShaderModule mod = VK_NULL_HANDLE;
  check(vkCreateShaderModule(ctx_->device, &mi, nullptr, &mod), fmt::format("vkCreateShaderModule ({})", name).c_str());
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.layout = layout;
  VkPipeline pipe = VK_NULL_HANDLE;
  VkResult r = vkCreateComputePipelines(ctx_->device, ctx_->pipeline_cache, 1, &ci, nullptr, &pipe);
  vkDestroyShaderModule(ctx_->device, mod, nullptr);
  check(r, fmt::format("vkCreateComputePipelines ({})", name).c_str());
  p.pipe_ = detail::UniqueHandle<detail::PipelineTraits>::adopt(ctx_, pipe);
  return p;
}

DescriptorPool Device::create_descriptor_pool(int sets, int storage_buffers) {
  DescriptorPool d;
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(std::max(storage_buffers, 1))};
  VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  ci.maxSets = static_cast<uint32_t>(std::max(sets, 1));
  ci.poolSizeCount = 1;
  ci.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(vkCreateDescriptorPool(ctx_->device, &ci, nullptr, &pool), "vkCreateDescriptorPool");
  d.pool_ = detail::UniqueHandle<detail::DescriptorPoolTraits>::adopt(ctx_, pool);
  return d;
}

VkDescriptorSet Device::allocate_set(DescriptorPool& pool, const Pipeline& pipe, const std::vector<const Buffer*>& buffers) {
  if (static_cast<int>(buffers.size()) != pipe.bindings())
    throw ValueError(fmt::format("vulkan: kernel {} has {} bindings, got {} buffers", pipe.name(), pipe.bindings(), buffers.size()));
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool.handle();
  ai.descriptorSetCount = 1;
  VkDescriptorSetLayout sl = pipe.set_layout();
  ai.pSetLayouts = &sl;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(vkAllocateDescriptorSets(ctx_->device, &ai, &set), fmt::format("vkAllocateDescriptorSets ({})", pipe.name()).c_str());
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    infos[b] = {buffers[b]->handle(), 0, VK_WHOLE_SIZE};
    writes[b] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[b].dstSet = set;
    writes[b].dstBinding = static_cast<uint32_t>(b);
    writes[b].descriptorCount = 1;
    writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[b].pBufferInfo = &infos[b];
  }
  vkUpdateDescriptorSets(ctx_->device, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  return set;
}

CommandBuffer Device::create_command_buffer() {
  CommandBuffer c;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = ctx_->cmd_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(ctx_->device, &ai, &cmd), "vkAllocateCommandBuffers");
  c.cmd_ = detail::UniqueHandle<detail::CommandBufferTraits>::adopt(ctx_, cmd);
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence = VK_NULL_HANDLE;
  check(vkCreateFence(ctx_->device, &fi, nullptr, &fence), "vkCreateFence");
  c.fence_ = detail::UniqueHandle<detail::FenceTraits>::adopt(ctx_, fence);
  return c;
}

void Device::submit_and_wait(CommandBuffer& cmd) {
  if (!cmd.recorded()) throw ValueError("vulkan: submit of a command buffer that is not recorded (begin/end)");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  VkCommandBuffer h = cmd.handle();
  si.pCommandBuffers = &h;
  VkFence fence = cmd.fence_.get();
  check(vkResetFences(ctx_->device, 1, &fence), "vkResetFences");
  check(vkQueueSubmit(ctx_->queue, 1, &si, fence), "vkQueueSubmit");
  check(vkWaitForFences(ctx_->device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

QueryPool Device::create_timestamp_pool(uint32_t count) {
  if (!caps_.timestamps) throw BackendError(fmt::format("vulkan: {}'s compute queue has no timestamps", caps_.name));
  QueryPool q;
  q.count_ = std::max<uint32_t>(count, 1);
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = q.count_;
  VkQueryPool pool = VK_NULL_HANDLE;
  check(vkCreateQueryPool(ctx_->device, &ci, nullptr, &pool), "vkCreateQueryPool");
  q.pool_ = detail::UniqueHandle<detail::QueryPoolTraits>::adopt(ctx_, pool);
  return q;
}

std::vector<double> Device::read_timestamps_ns(const QueryPool& pool, uint32_t first, uint32_t count) {
  std::vector<uint64_t> t(count);
  if (count == 0) return {};
  check(vkGetQueryPoolResults(ctx_->device, pool.handle(), first, count, count * sizeof(uint64_t), t.data(),
                              sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  std::vector<double> ns(count);
  for (uint32_t i = 0; i < count; ++i) ns[i] = static_cast<double>(t[i]) * caps_.timestamp_period_ns;
  return ns;
}

int64_t Device::validation_messages() const {
  std::lock_guard<std::mutex> lock(ctx_->log_mu);
  return ctx_->messages;
}
std::vector<std::string> Device::validation_log() const {
  std::lock_guard<std::mutex> lock(ctx_->log_mu);
  return ctx_->log;
}
LiveObjects Device::live_objects() const {
  return ctx_->live;
}

nlohmann::json caps_json(const Caps& c) {
  const ComputeLimits& l = c.limits;
  return {{"available", true},
          {"name", c.name},
          {"device_type", c.device_type},
          {"api_version", c.api_version},
          {"driver", c.driver},
          {"vendor_id", c.vendor_id},
          {"device_id", c.device_id},
          {"devices", c.devices},
          {"device_index", c.device_index},
          {"limits",
           {{"maxPerStageDescriptorStorageBuffers", l.max_storage_buffers},
            {"maxComputeWorkGroupInvocations", l.max_workgroup_invocations},
            {"maxComputeWorkGroupSize", c.max_workgroup_size},
            {"maxComputeWorkGroupCount", l.max_workgroup_count},
            {"maxComputeSharedMemorySize", l.max_shared_bytes},
            {"maxStorageBufferRange", l.max_buffer_bytes},
            {"subgroupSize", l.subgroup_size},
            {"subgroupArithmetic", l.subgroup_arithmetic},
            {"computeUnits", l.compute_units}}},
          {"timestamps", c.timestamps},
          {"timestamp_period_ns", c.timestamp_period_ns},
          {"direct_map", c.direct_map},
          {"validation", c.validation},
          {"device_local_bytes", c.device_local_bytes},
          {"memory_policy", memory_policy_name(c.memory_policy)},
          {"dedicated_min_bytes", c.dedicated_min_bytes}};
}

}  // namespace sg::vk
