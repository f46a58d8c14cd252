// The Vulkan device layer on lavapipe with the validation layer on (zero messages asserted in every case): the
// probe against vulkaninfo, device selection and its errors, buffer round trips on both memory paths, a
// hand-written compute shader (recorded once, submitted twice), timestamps, and the persisted pipeline cache.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "vulkan_test_util.h"

#include <cstring>
#include <iostream>
#include <sstream>
#include <fstream>
#include <regex>
#include <set>

#include "sg/error.h"
#include "sg/shader_compiler.h"
#include "sg/vulkan_device.h"

using namespace sg;
using sg::testing::expect_no_validation_messages;
using sg::testing::vulkan_device_options;

namespace {

/// The value of `key = N` in vulkaninfo's report for lavapipe (an independent reading of the same limits).
int64_t vulkaninfo_value(const std::string& key) {
  static const std::string report = sg::testing::run_command(
      std::string("VK_DRIVER_FILES=") + sg::testing::kLavapipeIcd + " vulkaninfo 2>/dev/null");
  std::smatch m;
  REQUIRE(std::regex_search(report, m, std::regex(key + R"(\s*=\s*(\d+))")));
  return std::stoll(m[1]);
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
  return v;
}

}  // namespace

TEST_CASE("vulkan probe: lavapipe's limits equal vulkaninfo's report", "[vulkan][device]") {
  auto dev = vk::Device::create(vulkan_device_options());
  const vk::Caps& c = dev->caps();
  CHECK(c.name.find("llvmpipe") != std::string::npos);
  CHECK(c.device_type == "cpu");
  CHECK(c.limits.cpu_device);
  CHECK(c.direct_map);  // lavapipe's device memory is host memory
  CHECK(c.limits.max_storage_buffers == vulkaninfo_value("maxPerStageDescriptorStorageBuffers"));
  CHECK(c.limits.max_workgroup_invocations == vulkaninfo_value("maxComputeWorkGroupInvocations"));
  CHECK(c.limits.max_shared_bytes == vulkaninfo_value("maxComputeSharedMemorySize"));
  CHECK(c.limits.max_buffer_bytes == vulkaninfo_value("maxStorageBufferRange"));
  CHECK(c.limits.subgroup_size == vulkaninfo_value("subgroupSize"));
  CHECK(c.timestamps == (vulkaninfo_value("timestampValidBits") > 0));
  CHECK(c.limits.max_workgroup_count >= 65535);  // the Vulkan minimum
  CHECK(c.devices.size() >= 1);
  // a fresh device holds its own transfer command buffer only (direct map: no staging buffer)
  CHECK(dev->live_objects() == vk::LiveObjects{.command_buffers = 1});
  expect_no_validation_messages(*dev);
}

TEST_CASE("vulkan device selection: by name or index, and no match or no driver is a BackendError ", "[vulkan][device]") {
  auto o = vulkan_device_options();
  o.device = "LLVMPIPE";  // case-insensitive part of the name
  CHECK(vk::Device::create(o)->caps().name.find("llvmpipe") != std::string::npos);
  o.device = "0";
  CHECK(vk::Device::create(o)->caps().device_index == 0);
  o.device = "no-such-gpu";
  CHECK_THROWS_WITH(vk::Device::create(o), Catch::Contains("no-such-gpu") && Catch::Contains("llvmpipe"));
  o.device = "";
  o.validation = 7;
  CHECK_THROWS_AS(vk::Device::create(o), ValueError);

  // no ICD at all: a BackendError (what make_backend's auto would fall back on), never a crash
  std::string saved = getenv("VK_DRIVER_FILES") ? getenv("VK_DRIVER_FILES") : "";
  setenv("VK_DRIVER_FILES", "/nonexistent/vk_icd.json", 1);
  CHECK_THROWS_AS(make_backend({.kind = "vulkan"}), BackendError);
  CHECK(make_backend({.kind = "cpu"}).backend->name() == "cpu");
  setenv("VK_DRIVER_FILES", saved.c_str(), 1);
  CHECK(make_backend({.kind = "vulkan"}).backend->name() == "vulkan");
}

TEST_CASE("vulkan buffers: upload/download round trips of odd and large sizes, direct and staging", "[vulkan][device]") {
  const int direct = GENERATE(1, 0);
  INFO("direct_map " << direct);
  auto dev = vk::Device::create(vulkan_device_options(direct));
  CHECK(dev->caps().direct_map == (direct == 1));
  const vk::LiveObjects base = dev->live_objects();
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{7}, size_t{4093}, size_t{(40u << 20) + 5}}) {
    INFO(bytes << " bytes");
    auto data = pattern(bytes, static_cast<uint32_t>(bytes));
    vk::Buffer b = dev->create_buffer(static_cast<int64_t>(bytes), "b");
    CHECK(b.alloc_bytes() % 16 == 0);
    CHECK(b.alloc_bytes() >= static_cast<int64_t>(bytes));
    std::vector<uint8_t> zeros(static_cast<size_t>(b.alloc_bytes()), 0xff);
    dev->download(b, zeros.data(), b.alloc_bytes());  // created zero-filled, padding included
    CHECK(std::all_of(zeros.begin(), zeros.end(), [](uint8_t x) { return x == 0; }));
    dev->upload(b, data.data(), static_cast<int64_t>(bytes));
    std::vector<uint8_t> back(bytes);
    dev->download(b, back.data(), static_cast<int64_t>(bytes));
    CHECK(back == data);
    CHECK_THROWS_AS(dev->upload(b, data.data(), b.alloc_bytes() + 1), ValueError);
  }
  // many small buffers share blocks; freeing them returns every block
  {
    std::vector<vk::Buffer> many;
    for (int i = 0; i < 300; ++i) many.push_back(dev->create_buffer(1000 + i, "small"));
    CHECK(dev->live_objects().buffers == base.buffers + 300);
    CHECK(dev->live_objects().memory_blocks <= base.memory_blocks + 1);
    many.erase(many.begin() + 100, many.begin() + 200);  // holes, coalesced on free
    many.push_back(dev->create_buffer(50000, "in a hole"));
  }
  CHECK(dev->live_objects() == base);
  CHECK_THROWS_WITH(dev->create_buffer(dev->caps().limits.max_buffer_bytes + 1, "huge"),
                    Catch::Contains("maxStorageBufferRange"));
  expect_no_validation_messages(*dev);
}

TEST_CASE("vulkan memory: large buffers get memory of their own, small ones share aligned blocks, and blocks is the old "
          "placement", "[vulkan][device][memory]") {
  const int direct = GENERATE(1, 0);
  INFO("direct_map " << direct);
  auto o = vulkan_device_options(direct);
  o.memory_policy = "dedicated";
  auto dev = vk::Device::create(o);
  CHECK(dev->caps().memory_policy == vk::MemoryPolicy::Dedicated);
  CHECK(dev->caps().dedicated_min_bytes == vk::kDedicatedMinBytes);
  const vk::LiveObjects base = dev->live_objects();
  {
    vk::Buffer big = dev->create_buffer(vk::kDedicatedMinBytes + 12, "big");
    vk::Buffer big2 = dev->create_buffer(3 * vk::kDedicatedMinBytes, "big2");
    const auto pb = big.placement(), pb2 = big2.placement();
    CHECK(pb.dedicated);
    CHECK(pb.offset == 0);
    CHECK(pb.memory_bytes >= big.alloc_bytes());
    CHECK(pb.memory_bytes < big.alloc_bytes() + 65536);  // the buffer's requirement, not a shared block
    CHECK((pb.flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0);
    CHECK(pb2.dedicated);
    CHECK(pb2.offset == 0);
    CHECK(dev->live_objects().dedicated_allocations == base.dedicated_allocations + 2);
    CHECK(dev->live_objects().device_memory_bytes == base.device_memory_bytes + pb.memory_bytes + pb2.memory_bytes);
    // small buffers: one shared block, 256-byte aligned offsets, none dedicated
    std::vector<vk::Buffer> small;
    for (int i = 0; i < 40; ++i) small.push_back(dev->create_buffer(100 + 37 * i, "small"));
    std::set<int64_t> offsets;
    for (auto& b : small) {
      const auto p = b.placement();
      CHECK(!p.dedicated);
      CHECK(p.offset % 256 == 0);
      CHECK(p.memory_bytes == (int64_t{8} << 20));
      offsets.insert(p.offset);
    }
    CHECK(offsets.size() == small.size());
    CHECK(dev->live_objects().memory_blocks == base.memory_blocks + 3);
    // data survive in both kinds of memory
    auto data = pattern(static_cast<size_t>(big.bytes()), 5);
    dev->upload(big, data.data(), big.bytes());
    std::vector<uint8_t> back(data.size());
    dev->download(big, back.data(), big.bytes());
    CHECK(back == data);
    auto sdata = pattern(static_cast<size_t>(small[7].bytes()), 6);
    dev->upload(small[7], sdata.data(), small[7].bytes());
    std::vector<uint8_t> sback(sdata.size());
    dev->download(small[7], sback.data(), small[7].bytes());
    CHECK(sback == sdata);
  }
  CHECK(dev->live_objects() == base);  // every VkDeviceMemory went back to the driver
  expect_no_validation_messages(*dev);

  // threshold 0: every buffer dedicated
  o.dedicated_min_bytes = 0;
  auto all = vk::Device::create(o);
  {
    vk::Buffer a = all->create_buffer(16, "a"), b = all->create_buffer(16, "b");
    CHECK(a.placement().dedicated);
    CHECK(b.placement().dedicated);
  }
  expect_no_validation_messages(*all);

  // the old policy: a block of 32 MiB shared by everything below that size, a large buffer in a block of its own
  o.memory_policy = "blocks";
  o.dedicated_min_bytes = -1;
  auto old = vk::Device::create(o);
  CHECK(old->caps().memory_policy == vk::MemoryPolicy::Blocks);
  {
    const vk::LiveObjects ob = old->live_objects();
    vk::Buffer a = old->create_buffer(4 << 20, "a"), b = old->create_buffer(1000, "b");
    vk::Buffer huge = old->create_buffer((40 << 20) + 3, "huge");
    CHECK(!a.placement().dedicated);
    CHECK(a.placement().memory_bytes == (int64_t{32} << 20));
    CHECK(b.placement().memory_bytes == (int64_t{32} << 20));
    CHECK(b.placement().offset == a.placement().offset + a.alloc_bytes());  // first fit right after a (16-aligned)
    CHECK(!huge.placement().dedicated);
    CHECK(huge.placement().memory_bytes >= huge.alloc_bytes());
    // staging path: the device's 4 MiB staging buffer opened the shared block already
    CHECK(old->live_objects().memory_blocks == ob.memory_blocks + (direct ? 2 : 1));
    CHECK(old->live_objects().dedicated_allocations == 0);
  }
  expect_no_validation_messages(*old);

  o.memory_policy = "first-fit";
  CHECK_THROWS_WITH(vk::Device::create(o), Catch::Contains("first-fit") && Catch::Contains("dedicated") &&
                                               Catch::Contains("blocks"));
  o.memory_policy = "";
  o.dedicated_min_bytes = -2;
  CHECK_THROWS_AS(vk::Device::create(o), ValueError);
  o.dedicated_min_bytes = -1;
  setenv("SG_VULKAN_MEMORY", "blocks", 1);  // the env decides when the option is empty
  CHECK(vk::Device::create(o)->caps().memory_policy == vk::MemoryPolicy::Blocks);
  setenv("SG_VULKAN_DEDICATED_MIN_BYTES", "1k", 1);
  unsetenv("SG_VULKAN_MEMORY");
  CHECK_THROWS_WITH(vk::Device::create(o), Catch::Contains("SG_VULKAN_DEDICATED_MIN_BYTES"));
  setenv("SG_VULKAN_DEDICATED_MIN_BYTES", "4096", 1);
  CHECK(vk::Device::create(o)->caps().dedicated_min_bytes == 4096);
  unsetenv("SG_VULKAN_DEDICATED_MIN_BYTES");
}

TEST_CASE("vulkan: a hand-written compute shader, recorded once and submitted twice, computes y = 2a + b",
          "[vulkan][device]") {
  const int direct = GENERATE(1, 0);
  INFO("direct_map " << direct);
  auto dev = vk::Device::create(vulkan_device_options(direct));
  const char* src = R"(#version 450
layout(local_size_x = 32) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float data[]; } a;
layout(std430, set = 0, binding = 1) readonly buffer B { float data[]; } b;
layout(std430, set = 0, binding = 2) writeonly buffer Y { float data[]; } y;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= 1001u) return;
  y.data[i] = 2.0 * a.data[i] + b.data[i];
}
)";
  CompiledShader cs = compile_shader("y_2a_b", src, ShaderStage::Compute);
  const int64_t n = 1001;
  auto av = sg::testing::randn(n, 1), bv = sg::testing::randn(n, 2);
  vk::Buffer a = dev->create_buffer(n * 4, "a"), b = dev->create_buffer(n * 4, "b"), y = dev->create_buffer(n * 4, "y");
  dev->upload(a, av.data(), n * 4);
  dev->upload(b, bv.data(), n * 4);
  vk::Pipeline p = dev->create_pipeline(cs.spirv, 3, {32, 1, 1}, "y_2a_b");
  vk::DescriptorPool pool = dev->create_descriptor_pool(1, 3);
  VkDescriptorSet set = dev->allocate_set(pool, p, {&a, &b, &y});
  vk::CommandBuffer cmd = dev->create_command_buffer();
  const bool ts = dev->caps().timestamps;
  vk::QueryPool q;
  if (ts) q = dev->create_timestamp_pool(2);
  cmd.begin();
  if (ts) cmd.reset_queries(q, 0, 2), cmd.timestamp(q, 0);
  cmd.dispatch(p, set, {(n + 31) / 32, 1, 1});
  if (ts) cmd.timestamp(q, 1);
  cmd.barrier_to_host();
  cmd.end();
  for (int round = 0; round < 2; ++round) {  // the second submit replays the same recording on new inputs
    INFO("round " << round);
    dev->submit_and_wait(cmd);
    std::vector<float> got(n);
    dev->download(y, got.data(), n * 4);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = 2.0f * av[i] + bv[i];
    CHECK(got == want);  // one fma-free multiply-add per element: exact
    if (ts) {
      auto ns = dev->read_timestamps_ns(q, 0, 2);
      CHECK(ns[1] >= ns[0]);
    }
    for (auto& x : bv) x = -x;
    dev->upload(b, bv.data(), n * 4);
  }
  CHECK_THROWS_WITH(dev->create_pipeline(cs.spirv, 3, {2048, 1, 1}, "too_wide"), Catch::Contains("maxComputeWorkGroup"));
  CHECK_THROWS_WITH(dev->create_pipeline(cs.spirv, dev->caps().limits.max_storage_buffers + 1, {32, 1, 1}, "too_many"),
                    Catch::Contains("maxPerStageDescriptorStorageBuffers"));
  CHECK_THROWS_AS(dev->allocate_set(pool, p, {&a, &b}), ValueError);
  expect_no_validation_messages(*dev);
}

TEST_CASE("vulkan pipeline cache: persisted next to the kernel cache, reloaded, a corrupt file ignored",
          "[vulkan][device]") {
  sg::testing::TempDir dir("sg_vk_cache");
  auto o = vulkan_device_options();
  o.pipeline_cache_dir = dir.path;
  const char* src = "#version 450\nlayout(local_size_x = 8) in;\n"
                    "layout(std430, set = 0, binding = 0) writeonly buffer Y { float data[]; } y;\n"
                    "void main() { y.data[gl_GlobalInvocationID.x] = 1.0; }\n";
  CompiledShader cs = compile_shader("ones", src, ShaderStage::Compute);
  std::filesystem::path path;
  {
    auto dev = vk::Device::create(o);
    CHECK(dev->pipeline_cache_loaded_bytes() == 0);
    path = dev->pipeline_cache_path();
    CHECK(path.parent_path() == dir.path);
    vk::Pipeline p = dev->create_pipeline(cs.spirv, 1, {8, 1, 1}, "ones");
    expect_no_validation_messages(*dev);
  }  // saved on destruction
  REQUIRE(std::filesystem::exists(path));
  std::string bytes = sg::testing::read_file(path.string());
  REQUIRE(bytes.size() >= 32);
  uint32_t header[2];
  std::memcpy(header, bytes.data(), 8);
  CHECK(header[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
  CHECK(dir.entries() == 1);  // no temporary left behind
  {
    auto dev = vk::Device::create(o);
    CHECK(dev->pipeline_cache_loaded_bytes() == static_cast<int64_t>(bytes.size()));
    expect_no_validation_messages(*dev);
  }
  sg::testing::write_file(path.string(), bytes.substr(0, 20) + std::string(100, 'x'));  // corrupt header
  {
    auto dev = vk::Device::create(o);
    CHECK(dev->pipeline_cache_loaded_bytes() == 0);
    vk::Pipeline p = dev->create_pipeline(cs.spirv, 1, {8, 1, 1}, "ones");
    expect_no_validation_messages(*dev);
  }
}

TEST_CASE("vulkan pipeline cache: an unwritable directory is warned about once and counted", "[vulkan][device]") {
  sg::testing::TempDir dir("sg_vk_cache");
  sg::testing::write_file((dir.path / "file").string(), "x");  // nothing can be created below a regular file, not even by root
  auto o = vulkan_device_options();
  o.pipeline_cache_dir = dir.path / "file" / "cache";
  std::ostringstream err;
  auto* old = std::cerr.rdbuf(err.rdbuf());
  bool first = true, second = true;
  int64_t errors = 0;
  {
    auto dev = vk::Device::create(o);
    first = dev->save_pipeline_cache();
    second = dev->save_pipeline_cache();
    errors = dev->pipeline_cache_write_errors();
  }  // the save on destruction fails too (counted, not said again)
  std::cerr.rdbuf(old);
  CHECK_FALSE(first);
  CHECK_FALSE(second);
  CHECK(errors == 2);
  const std::string text = err.str();
  INFO(text);
  CHECK(text.find("cannot write the Vulkan pipeline cache " + (dir.path / "file" / "cache").string()) != std::string::npos);
  CHECK(text.find("cannot write", text.find("cannot write") + 1) == std::string::npos);  // once
  CHECK(dir.entries() == 1);  // only the regular file: no temporary left behind
}

TEST_CASE("vulkan validation: the messenger counts what the layer reports (the zero-message checks can fail)",
          "[vulkan][device]") {
  auto dev = vk::Device::create(vulkan_device_options());
  REQUIRE(dev->caps().validation);
  CHECK(dev->validation_messages() == 0);
  vk::CommandBuffer cmd = dev->create_command_buffer();
  cmd.begin();
  vkCmdDispatch(cmd.handle(), 1, 1, 1);  // no pipeline bound: invalid usage (recorded, never submitted)
  cmd.end();
  CHECK(dev->validation_messages() > 0);
  CHECK_FALSE(dev->validation_log().empty());
}
