// Tests of the shader toolchain (sg/shader_compiler.h) and the kernel cache (sg/kernel_cache.h).
//
// Independent checks: generated GLSL ES is re-compiled as ES by glslang (check_gles_compiles), the SPIR-V is
// re-validated by the spirv-val command-line tool, FNV-1a is compared with the published test vectors, and cache
// hits are compared byte for byte with fresh compiles.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sg/error.h"
#include "sg/kernel_cache.h"
#include "sg/shader_compiler.h"

namespace fs = std::filesystem;
using sg::CompiledShader;
using sg::ShaderStage;

namespace {

// A realistic fragment kernel, as the codegen emits them: C = relu(A @ B) with shapes baked in as constants,
// tensors in RGBA32F textures (4 consecutive row-major elements per texel, texture width TEX_W), one output
// texel per fragment.
const std::string kMatmulRelu = R"(#version 450
// kernel matmul_relu: %3 = matmul(%1, %2) ; %4 = relu(%3)   [model.cpp:42]
layout(set = 0, binding = 0) uniform sampler2D in_a;   // f32[6, 10]
layout(set = 0, binding = 1) uniform sampler2D in_b;   // f32[10, 7]
layout(location = 0) out vec4 out_texel;               // f32[6, 7]

const int M = 6;
const int K = 10;
const int N = 7;
const int TEX_W = 16;

float fetch_a(int i) {
  int t = i / 4;
  vec4 v = texelFetch(in_a, ivec2(t % TEX_W, t / TEX_W), 0);
  return v[i % 4];
}

float fetch_b(int i) {
  int t = i / 4;
  vec4 v = texelFetch(in_b, ivec2(t % TEX_W, t / TEX_W), 0);
  return v[i % 4];
}

void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  int texel = p.y * TEX_W + p.x;
  vec4 r = vec4(0.0);
  for (int c = 0; c < 4; ++c) {
    int e = texel * 4 + c;
    if (e >= M * N) break;
    int i = e / N;
    int j = e % N;
    float acc = 0.0;
    for (int k = 0; k < K; ++k) {
      acc += fetch_a(i * K + k) * fetch_b(k * N + j);
    }
    r[c] = max(acc, 0.0);
  }
  out_texel = r;
}
)";

// A compute kernel: y = a * x + y over SSBOs, 64 invocations per work group, shape baked in.
const std::string kAxpy = R"(#version 450
// kernel axpy: %3 = 2.5 * %1 + %2
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) buffer InX { float data[]; } in_x;
layout(std430, set = 0, binding = 1) buffer InY { float data[]; } in_y;
layout(std430, set = 0, binding = 2) buffer OutZ { float data[]; } out_z;
const uint COUNT = 1000u;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= COUNT) return;
  out_z.data[i] = 2.5 * in_x.data[i] + in_y.data[i];
}
)";

// A fragment kernel with an error on line 9 (undeclared identifier).
const std::string kBroken = R"(#version 450
layout(set = 0, binding = 0) uniform sampler2D in_a;
layout(location = 0) out vec4 out_texel;
// filler 4
// filler 5
// filler 6
void main() {
  vec4 v = texelFetch(in_a, ivec2(gl_FragCoord.xy), 0);
  out_texel = v * undeclared_scale;
}
// filler 11
// filler 12
// filler 13
)";

// A unique, empty temporary directory, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("sg_test_kernel_cache_" + std::to_string(rd()) + std::to_string(rd()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("fragment kernel: GLSL 450 -> SPIR-V -> GLSL ES 3.00 (highp, names kept, no bindings)", "[shader]") {
  const CompiledShader s = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  CAPTURE(s.gles);
  CHECK(s.glsl450 == kMatmulRelu);
  REQUIRE(s.spirv.size() > 5);
  CHECK(s.spirv[0] == 0x07230203u);     // SPIR-V magic
  CHECK(s.spirv[1] == 0x00010000u);     // version 1.0 (target asked for)
  CHECK(contains(s.spvasm, "OpEntryPoint Fragment"));
  CHECK(contains(s.spvasm, "%in_a"));
  CHECK(s.compile_ms > 0);

  // ES 3.00 output.
  CHECK(s.gles.rfind("#version 300 es\n", 0) == 0);
  CHECK(contains(s.gles, "precision highp float;"));
  CHECK(contains(s.gles, "precision highp int;"));
  CHECK_FALSE(contains(s.gles, "mediump"));
  CHECK_FALSE(contains(s.gles, "lowp"));
  // Samplers keep their names and are highp (ES 3.00's default sampler precision is lowp in fragment shaders);
  // ES 3.00 has no layout(binding): SPIRV-Cross must have dropped it.
  CHECK(std::regex_search(s.gles, std::regex(R"(uniform highp sampler2D in_a;)")));
  CHECK(std::regex_search(s.gles, std::regex(R"(uniform highp sampler2D in_b;)")));
  CHECK_FALSE(contains(s.gles, "binding"));
  CHECK_FALSE(contains(s.gles, "set ="));
  CHECK(std::regex_search(s.gles, std::regex(R"(layout\(location = 0\) out (highp )?vec4 out_texel;)")));
  CHECK(contains(s.gles, "texelFetch(in_a"));
  CHECK(contains(s.gles, "texelFetch(in_b"));
  CHECK(contains(s.gles, "gl_FragCoord"));

  // Independent check: glslang accepts the output as GLSL ES 3.00.
  CHECK_NOTHROW(sg::check_gles_compiles("matmul_relu", s.gles, ShaderStage::Fragment));
}

TEST_CASE("the interface a shader declares comes from SPIRV-Cross reflection of its SPIR-V", "[shader]") {
  // samplers in binding order (not name or text order), outputs = 1 + the highest location (an array counts each)
  const std::string src = R"(#version 450
layout(set = 0, binding = 1) uniform sampler2D in_a;
layout(set = 0, binding = 0) uniform sampler2D in_z;
// layout(location = 7) out vec4 o_commented;
layout(location = 0) out vec4 o0;
layout(location = 1) out vec4 o_pair[2];
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  vec4 a = texelFetch(in_a, p, 0);
  vec4 z = texelFetch(in_z, p, 0);
  o0 = a;
  o_pair[0] = z;
  o_pair[1] = a + z;
}
)";
  const CompiledShader s = sg::compile_shader("reflect", src, ShaderStage::Fragment);
  CHECK(s.declared.samplers == std::vector<std::string>{"in_z", "in_a"});
  CHECK(s.declared.outputs == 3);
  CHECK(sg::reflect_interface(s.spirv) == s.declared);
  const CompiledShader m = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  CHECK(m.declared == sg::ShaderInterface{{"in_a", "in_b"}, 1});
  const CompiledShader c = sg::compile_shader("axpy", kAxpy, ShaderStage::Compute);
  CHECK(c.declared == sg::ShaderInterface{});
  // a kernel-cache disk hit reflects the stored SPIR-V again
  TempDir dir;
  { sg::KernelCache(dir.path).get_or_compile("reflect", src, ShaderStage::Fragment); }
  sg::KernelCache again(dir.path);
  CHECK(again.get_or_compile("reflect", src, ShaderStage::Fragment).declared == s.declared);
  CHECK(again.stats().disk_hits == 1);
  CHECK_THROWS_AS(sg::reflect_interface({0x07230203u, 1, 2}), sg::CompileError);
}

TEST_CASE("SPIR-V passes the spirv-val command-line validator too", "[shader]") {
  const CompiledShader s = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  TempDir dir;
  const fs::path spv = dir.path / "k.spv";
  write_bytes(spv, std::string(reinterpret_cast<const char*>(s.spirv.data()), s.spirv.size() * 4));
  const std::string cmd = "spirv-val --target-env vulkan1.0 '" + spv.string() + "' > /dev/null 2>&1";
  REQUIRE(std::system("command -v spirv-val > /dev/null 2>&1") == 0);  // Debian package spirv-tools
  CHECK(std::system(cmd.c_str()) == 0);
  // The validator can fail: a truncated module is rejected.
  write_bytes(spv, std::string(reinterpret_cast<const char*>(s.spirv.data()), s.spirv.size() * 2));
  CHECK(std::system(cmd.c_str()) != 0);
}

TEST_CASE("optimized fragment kernel still validates and cross-compiles", "[shader]") {
  sg::ShaderCompileOptions opt;
  opt.optimize = true;
  const CompiledShader plain = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  const CompiledShader s = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment, opt);
  CAPTURE(s.gles);
  CHECK(s.spirv != plain.spirv);  // spirv-opt -O did something (inlining fetch_a / fetch_b at least)
  CHECK_FALSE(contains(s.spvasm, "OpFunctionCall"));
  CHECK(contains(plain.spvasm, "OpFunctionCall"));
  CHECK(s.gles.rfind("#version 300 es\n", 0) == 0);
  CHECK(contains(s.gles, "precision highp float;"));
  CHECK(contains(s.gles, "in_a"));
  CHECK(contains(s.gles, "in_b"));
  CHECK(contains(s.gles, "out_texel"));
  CHECK_FALSE(contains(s.gles, "mediump"));
  CHECK_NOTHROW(sg::check_gles_compiles("matmul_relu_opt", s.gles, ShaderStage::Fragment));
}

TEST_CASE("compute kernel: GLSL 450 -> GLSL ES 3.10 with SSBOs", "[shader]") {
  const CompiledShader s = sg::compile_shader("axpy", kAxpy, ShaderStage::Compute);
  CAPTURE(s.gles);
  CHECK(contains(s.spvasm, "OpEntryPoint GLCompute"));
  CHECK(s.gles.rfind("#version 310 es\n", 0) == 0);
  CHECK(std::regex_search(s.gles, std::regex(R"(layout\(local_size_x = 64, local_size_y = 1, local_size_z = 1\) in;)")));
  // ES 3.10 supports binding on buffers: kept, std430 kept, names kept.
  CHECK(std::regex_search(s.gles, std::regex(R"(layout\(binding = 0, std430\) buffer InX)")));
  CHECK(std::regex_search(s.gles, std::regex(R"(layout\(binding = 2, std430\) buffer OutZ)")));
  CHECK(contains(s.gles, "out_z"));
  CHECK_FALSE(contains(s.gles, "mediump"));
  CHECK_NOTHROW(sg::check_gles_compiles("axpy", s.gles, ShaderStage::Compute));
}

TEST_CASE("a broken shader throws CompileError with the failing line marked", "[shader]") {
  try {
    (void)sg::compile_shader("broken_kernel", kBroken, ShaderStage::Fragment);
    FAIL("compile_shader accepted a shader with an undeclared identifier");
  } catch (const sg::CompileError& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(contains(msg, "broken_kernel"));
    CHECK(contains(msg, "fragment"));
    CHECK(contains(msg, "undeclared_scale"));                              // glslang's log
    CHECK(contains(msg, "ERROR: 0:9:"));                                   // ... with the line
    CHECK(contains(msg, ">>    9 |   out_texel = v * undeclared_scale;"));  // the marked line
    CHECK(contains(msg, "      7 | void main() {"));                       // 2 lines of context before
    CHECK(contains(msg, "     11 | // filler 11"));                       // ... and after
    CHECK_FALSE(contains(msg, "filler 5"));                               // nothing further
    CHECK_FALSE(contains(msg, "filler 13"));
  }
}

TEST_CASE("check_gles_compiles really compiles as ES", "[shader]") {
  const CompiledShader s = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  // ES fragment shaders have no default float precision: without the precision line it must fail.
  std::string no_precision = std::regex_replace(s.gles, std::regex("precision highp float;\n"), "");
  REQUIRE(no_precision != s.gles);
  CHECK_THROWS_AS(sg::check_gles_compiles("no_precision", no_precision, ShaderStage::Fragment), sg::CompileError);
  // Desktop GLSL is not ES.
  CHECK_THROWS_AS(sg::check_gles_compiles("desktop", kMatmulRelu, ShaderStage::Fragment), sg::CompileError);
  // A type error in ES source is reported with its line marked.
  std::string bad = s.gles;
  const size_t main_pos = bad.find("void main()\n{\n");
  REQUIRE(main_pos != std::string::npos);
  bad.insert(main_pos + 14, "    int oops = 1.5;\n");
  try {
    sg::check_gles_compiles("bad_es", bad, ShaderStage::Fragment);
    FAIL("check_gles_compiles accepted 'int oops = 1.5;'");
  } catch (const sg::CompileError& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(contains(msg, "bad_es"));
    CHECK(std::regex_search(msg, std::regex(R"(>> +\d+ \|     int oops = 1\.5;)")));
  }
}

TEST_CASE("error_lines_from_log and mark_source_lines", "[shader]") {
  const std::string log =
      "ERROR: 0:3: 'x' : undeclared identifier\n"
      "ERROR: 0:3: '' : compilation terminated\n"
      "ERROR: 0:8: 'y' : syntax error\n"
      "0:5(12): error: `z' undeclared\n"  // Mesa's format
      "0(10) : error C0000: syntax error, unexpected '*'\n"  // NVIDIA's format
      "0(11) : warning C7050: \"w\" might be used before being initialized\n"
      "WARNING: 0:1: something\n"
      "ERROR: 2 compilation errors.  No code generated.\n";
  CHECK(sg::error_lines_from_log(log) == std::vector<int>{3, 5, 8, 10});
  const std::string src = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\n";
  const std::string marked = sg::mark_source_lines(src, "ERROR: 0:3: bad\n", 2);
  CHECK(marked ==
        "      1 | l1\n"
        "      2 | l2\n"
        ">>    3 | l3\n"
        "      4 | l4\n"
        "      5 | l5\n"
        "   ...\n");
  const std::string two = sg::mark_source_lines(src, "ERROR: 0:2: a\nERROR: 0:11: b\n", 1);
  CHECK(two ==
        "      1 | l1\n"
        ">>    2 | l2\n"
        "      3 | l3\n"
        "   ...\n"
        "     10 | l10\n"
        ">>   11 | l11\n"
        "     12 | l12\n");
  // No line in the log: the whole source, numbered.
  CHECK(sg::mark_source_lines("a\nb\n", "ERROR: Linking fragment stage: missing main\n") ==
        "      1 | a\n      2 | b\n");
}

TEST_CASE("fnv1a64 matches the published FNV-1a 64 test vectors", "[cache]") {
  CHECK(sg::fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(sg::fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(sg::fnv1a64("foobar") == 0x85944171f73967e8ULL);
  CHECK(sg::fnv1a64("bar", sg::fnv1a64("foo")) == sg::fnv1a64("foobar"));  // incremental
  CHECK(sg::hash_hex(0xabcULL) == "0000000000000abc");
}

TEST_CASE("kernel cache: memory hits return the same object", "[cache]") {
  sg::KernelCache cache{fs::path{}};
  CHECK(cache.disk_dir().empty());
  const CompiledShader& a = cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 0);
  const CompiledShader& b = cache.get_or_compile("other_name_same_source", kMatmulRelu, ShaderStage::Fragment);
  CHECK(&a == &b);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().misses == 1);
  // Different options or stage-relevant source -> a different entry.
  sg::ShaderCompileOptions opt;
  opt.optimize = true;
  CHECK(sg::KernelCache::key(kMatmulRelu, ShaderStage::Fragment, opt) !=
        sg::KernelCache::key(kMatmulRelu, ShaderStage::Fragment, {}));
  CHECK(sg::KernelCache::key(kMatmulRelu, ShaderStage::Fragment, {}) !=
        sg::KernelCache::key(kMatmulRelu, ShaderStage::Compute, {}));
  const CompiledShader& c = cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment, opt);
  CHECK(&c != &a);
  CHECK(cache.stats().misses == 2);
  CHECK(cache.size() == 2);
  // The cached object equals a fresh compile.
  const CompiledShader fresh = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  CHECK(a.spirv == fresh.spirv);
  CHECK(a.gles == fresh.gles);
  // A failing compile throws and caches nothing.
  CHECK_THROWS_AS(cache.get_or_compile("broken", kBroken, ShaderStage::Fragment), sg::CompileError);
  CHECK(cache.size() == 2);
}

TEST_CASE("kernel cache: disk entries survive a new cache, corrupted entries are recompiled", "[cache]") {
  TempDir dir;
  const uint64_t key = sg::KernelCache::key(kMatmulRelu, ShaderStage::Fragment, {});
  CompiledShader first;
  {
    sg::KernelCache cache(dir.path);
    first = cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
    CHECK(cache.stats().misses == 1);
    CHECK(cache.stats().disk_errors == 0);
  }
  sg::KernelCache probe(dir.path);
  const auto paths = probe.entry_paths(key, ShaderStage::Fragment);
  CHECK(paths.spv.filename().string() == sg::hash_hex(key) + ".spv");
  CHECK(paths.gles.extension() == ".frag");
  REQUIRE(fs::exists(paths.spv));
  REQUIRE(fs::exists(paths.gles));
  REQUIRE(fs::exists(paths.spvasm));
  REQUIRE(fs::exists(paths.manifest));
  CHECK(read_bytes(paths.gles) == first.gles);
  CHECK(fs::file_size(paths.spv) == first.spirv.size() * 4);
  for (const auto& f : fs::directory_iterator(dir.path))  // no temporary files left behind
    CHECK(f.path().filename().string().find(".tmp") == std::string::npos);

  auto expect_same = [&](const CompiledShader& s) {
    CHECK(s.glsl450 == first.glsl450);
    CHECK(s.spirv == first.spirv);
    CHECK(s.spvasm == first.spvasm);
    CHECK(s.gles == first.gles);
  };

  SECTION("a new cache instance loads from disk") {
    sg::KernelCache cache(dir.path);
    const CompiledShader& s = cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
    CHECK(cache.stats().disk_hits == 1);
    CHECK(cache.stats().misses == 0);
    expect_same(s);
    // ... and then serves it from memory.
    const CompiledShader& again = cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
    CHECK(&again == &s);
    CHECK(cache.stats().hits == 1);
  }

  SECTION("SG_KERNEL_CACHE names the directory for the default constructor") {
    ::setenv("SG_KERNEL_CACHE", dir.path.c_str(), 1);
    sg::KernelCache cache;
    ::unsetenv("SG_KERNEL_CACHE");
    CHECK(cache.disk_dir() == dir.path);
    (void)cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
    CHECK(cache.stats().disk_hits == 1);
  }

  // Each corruption: the entry is ignored (counted as a disk error), recompiled to the same output, and rewritten
  // so the next instance gets a disk hit again.
  auto check_recovers = [&](const char* what) {
    INFO(what);
    {
      sg::KernelCache cache(dir.path);
      const CompiledShader* s = nullptr;
      REQUIRE_NOTHROW(s = &cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment));
      CHECK(cache.stats().misses == 1);
      CHECK(cache.stats().disk_hits == 0);
      CHECK(cache.stats().disk_errors == 1);
      expect_same(*s);
    }
    sg::KernelCache cache(dir.path);
    expect_same(cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment));
    CHECK(cache.stats().disk_hits == 1);
  };
  SECTION("truncated GLSL ES file") {
    const std::string g = read_bytes(paths.gles);
    write_bytes(paths.gles, g.substr(0, g.size() / 2));
    check_recovers("truncated .frag");
  }
  SECTION("SPIR-V overwritten with garbage of the same size") {
    write_bytes(paths.spv, std::string(fs::file_size(paths.spv), '\x5a'));
    check_recovers("garbage .spv");
  }
  SECTION("empty SPIR-V file") {
    write_bytes(paths.spv, "");
    check_recovers("empty .spv");
  }
  SECTION("manifest is not JSON") {
    write_bytes(paths.manifest, "{ this is not json");
    check_recovers("bad manifest");
  }
  SECTION("disassembly missing") {
    fs::remove(paths.spvasm);
    check_recovers("missing .spvasm");
  }
}

TEST_CASE("kernel cache: a missing entry is a plain miss, not a disk error", "[cache]") {
  TempDir dir;
  sg::KernelCache cache(dir.path / "created" / "on" / "demand");
  (void)cache.get_or_compile("axpy", kAxpy, ShaderStage::Compute);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().disk_errors == 0);
  CHECK(fs::exists(cache.entry_paths(sg::KernelCache::key(kAxpy, ShaderStage::Compute, {}), ShaderStage::Compute)
                       .manifest));
}

TEST_CASE("concurrent compiles and cache lookups agree", "[cache][shader]") {
  TempDir dir;
  sg::KernelCache cache(dir.path);
  const CompiledShader reference = sg::compile_shader("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  std::vector<const CompiledShader*> got(8, nullptr);
  std::vector<std::string> direct(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      got[t] = &cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
      direct[t] = sg::compile_shader("axpy", kAxpy, ShaderStage::Compute).gles;
    });
  }
  for (auto& th : threads) th.join();
  const auto st = cache.stats();
  CHECK(st.hits + st.misses + st.disk_hits == got.size());
  CHECK(cache.size() == 1);
  for (size_t t = 0; t < got.size(); ++t) {
    REQUIRE(got[t] != nullptr);
    CHECK(got[t]->gles == reference.gles);
    CHECK(got[t]->spirv == reference.spirv);
    CHECK(direct[t] == direct[0]);
  }
  CHECK(got[0] == got[got.size() - 1]);  // all threads get the one kept object
}

TEST_CASE("kernel cache: compute entries use .comp", "[cache]") {
  TempDir dir;
  sg::KernelCache cache(dir.path);
  const CompiledShader& s = cache.get_or_compile("axpy", kAxpy, ShaderStage::Compute);
  const auto paths = cache.entry_paths(sg::KernelCache::key(kAxpy, ShaderStage::Compute, {}), ShaderStage::Compute);
  CHECK(paths.gles.extension() == ".comp");
  CHECK(read_bytes(paths.gles) == s.gles);
  sg::KernelCache again(dir.path);
  CHECK(again.get_or_compile("axpy", kAxpy, ShaderStage::Compute).gles == s.gles);
  CHECK(again.stats().disk_hits == 1);
}

// ---- issue 19: kernel cache entries of the wrong JSON types, an unwritable cache directory ----

TEST_CASE("kernel cache: manifest fields of the wrong JSON type are a corrupt entry, not an exception", "[cache]") {
  TempDir dir;
  const uint64_t key = sg::KernelCache::key(kMatmulRelu, ShaderStage::Fragment, {});
  CompiledShader first;
  {
    sg::KernelCache cache(dir.path);
    first = cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);
  }
  const auto paths = sg::KernelCache(dir.path).entry_paths(key, ShaderStage::Fragment);
  const std::string manifest = read_bytes(paths.manifest);
  // nlohmann's value() throws type_error for a key of another type: each of these escaped get_or_compile before
  // (and floats outside an integer's range made nlohmann's conversion undefined behaviour: fuzz_kernel_cache)
  for (const char* field : {"format", "optimize", "key", "spv", "format_float", "spv_float"}) {
    INFO(field);
    auto m = nlohmann::json::parse(manifest);
    const std::string f = field;
    if (f == "format" || f == "optimize") m[f] = "x";
    if (f == "key") m[f] = 7;
    if (f == "spv") m["spv"] = {{"size", "many"}, {"fnv1a64", 3}};
    if (f == "format_float") m["format"] = 1e300;
    if (f == "spv_float") m["spv"]["size"] = 3.8e65;
    write_bytes(paths.manifest, m.dump(1));
    sg::KernelCache cache(dir.path);
    const CompiledShader* s = nullptr;
    CHECK_NOTHROW(s = &cache.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment));
    REQUIRE(s != nullptr);
    CHECK(s->spirv == first.spirv);  // recompiled
    CHECK(cache.stats().disk_errors == 1);
    CHECK(cache.stats().misses == 1);
  }
  // parse_entry on the files as written accepts them (and is what the fuzz target drives)
  sg::KernelCache again(dir.path);
  again.get_or_compile("matmul_relu", kMatmulRelu, ShaderStage::Fragment);  // rewrote a good entry
  auto ok = sg::KernelCache::parse_entry(read_bytes(paths.manifest), read_bytes(paths.spv), read_bytes(paths.gles),
                                         read_bytes(paths.spvasm), key, kMatmulRelu, ShaderStage::Fragment, {});
  REQUIRE(ok.has_value());
  CHECK(ok->spirv == first.spirv);
}

TEST_CASE("kernel cache: an unwritable disk directory is warned about once and counted", "[cache]") {
  TempDir dir;
  write_bytes(dir.path / "file", "x");  // nothing can be created below a regular file, not even by root
  sg::KernelCache cache(dir.path / "file" / "cache");
  std::ostringstream err;
  auto* old = std::cerr.rdbuf(err.rdbuf());
  cache.get_or_compile("a", kMatmulRelu, ShaderStage::Fragment);
  cache.get_or_compile("b", std::string(kMatmulRelu) + "// another kernel\n", ShaderStage::Fragment);
  std::cerr.rdbuf(old);
  CHECK(cache.stats().misses == 2);
  CHECK(cache.stats().disk_errors == 2);
  CHECK(cache.stats().disk_warnings == 1);
  const std::string text = err.str();
  CHECK(text.find("cannot write the kernel cache in " + (dir.path / "file" / "cache").string()) != std::string::npos);
  CHECK(text.find("cannot write", text.find("cannot write") + 1) == std::string::npos);  // once
}
