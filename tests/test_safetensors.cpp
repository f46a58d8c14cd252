// Tests for sg/safetensors.h: round trip, byte layout checked by hand (and by an independent Python reader using
// only json + struct), every corruption -> IOError with file and offset, atomic saves.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "sg/atomic_file.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sg/error.h"
#include "sg/safetensors.h"

namespace fs = std::filesystem;
using namespace sg::io;
using Catch::Matchers::Contains;

namespace {

using sg::testing::TempDir;

using sg::testing::read_file;
using sg::testing::write_file;

/// A safetensors file assembled by hand: u64 LE length (given, or the real one), header text, data bytes.
std::string craft(const std::string& header, const std::string& data, int64_t len_override = -1) {
  uint64_t n = len_override >= 0 ? static_cast<uint64_t>(len_override) : header.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

/// Little-endian bytes of a float, spelled out from its IEEE-754 bit pattern.
std::string le(uint32_t bits) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  return s;
}

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const sg::IOError& e) {
    return e.what();
  }
  FAIL("expected sg::IOError");
  return "";
}

}  // namespace

TEST_CASE("safetensors round trip keeps names, shapes, values, order and metadata", "[safetensors]") {
  TempDir dir;
  std::vector<NamedTensor> ts{
      {"layer1.weight", {2, 3}, {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f}},
      {"layer1.bias", {3}, {std::numeric_limits<float>::infinity(), -1.0f, 7.0f}},
      {"scalar", {}, {42.0f}},
      {"empty", {0, 4}, {}},
      {"a_last", {1, 1, 2}, {std::numeric_limits<float>::quiet_NaN(), 5.0f}},
  };
  std::map<std::string, std::string> meta{{"format", "pt"}, {"epoch", "3"}, {"note", "quotes \" and \\ ok"}};
  save_safetensors(dir / "m.safetensors", ts, meta);
  SafetensorsFile f = load_safetensors(dir / "m.safetensors");
  CHECK(f.metadata == meta);
  REQUIRE(f.tensors.size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    CHECK(f.tensors[i].name == ts[i].name);  // saved order is kept
    CHECK(f.tensors[i].shape == ts[i].shape);
    REQUIRE(f.tensors[i].data.size() == ts[i].data.size());
    if (!ts[i].data.empty())  // (memcmp of an empty vector's null data() is undefined)
      CHECK(std::memcmp(f.tensors[i].data.data(), ts[i].data.data(), ts[i].data.size() * 4) == 0);  // bit-exact
  }
  REQUIRE(f.find("scalar") != nullptr);
  CHECK(f.find("scalar")->data[0] == 42.0f);
  CHECK(f.find("nope") == nullptr);
  // Overwrite with different content.
  save_safetensors(dir / "m.safetensors", {{"x", {1}, {9.0f}}});
  SafetensorsFile g = load_safetensors(dir / "m.safetensors");
  REQUIRE(g.tensors.size() == 1);
  CHECK(g.tensors[0].data[0] == 9.0f);
  CHECK(g.metadata.empty());
  CHECK(dir.entries() == 1);  // no temporary files left behind
}

TEST_CASE("safetensors byte layout matches the specification", "[safetensors]") {
  TempDir dir;
  save_safetensors(dir / "l.safetensors", {{"b", {2}, {1.0f, -2.0f}}, {"a", {1}, {0.5f}}}, {{"k", "v"}});
  std::string bytes = read_file(dir / "l.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  REQUIRE(8 + n <= bytes.size());
  CHECK((8 + n) % 8 == 0);  // padded for alignment
  std::string header = bytes.substr(8, n);
  CHECK(header.find_last_not_of(' ') + 1 <= header.size());
  auto j = nlohmann::json::parse(header);
  CHECK(j["__metadata__"]["k"] == "v");
  CHECK(j["b"]["dtype"] == "F32");
  CHECK(j["b"]["shape"] == nlohmann::json::array({2}));
  CHECK(j["b"]["data_offsets"] == nlohmann::json::array({0, 8}));
  CHECK(j["a"]["data_offsets"] == nlohmann::json::array({8, 12}));
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000, 0.5f = 0x3f000000, little-endian.
  CHECK(bytes.substr(8 + n) == le(0x3f800000) + le(0xc0000000) + le(0x3f000000));

  // A file crafted byte by byte (no padding, keys in reverse data order) loads too.
  std::string h = R"({"y":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
                  R"("x":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},"__metadata__":{"who":"hand"}})";
  write_file(dir / "h.safetensors", craft(h, le(0x3fc00000) + le(0xbf800000) + le(0x40490fdb)));
  SafetensorsFile f = load_safetensors(dir / "h.safetensors");
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].name == "x");  // data order
  CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 1});
  CHECK(f.tensors[0].data == std::vector<float>{1.5f, -1.0f});
  CHECK(f.tensors[1].name == "y");
  CHECK(f.tensors[1].shape.empty());
  CHECK(f.tensors[1].data[0] == 3.14159274f);
  CHECK(f.metadata.at("who") == "hand");
}

TEST_CASE("safetensors files read back with an independent Python reader (json + struct)", "[safetensors]") {
  TempDir dir;
  save_safetensors(dir / "p.safetensors", {{"w", {2, 2}, {1.5f, -2.0f, 0.25f, 8.0f}}, {"v", {3}, {1, 2, 3}}},
                   {{"step", "12"}});
  std::string cmd = "/usr/bin/python3 -c \"import json,struct,sys; b=open(sys.argv[1],'rb').read(); "
                    "n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n]); d=b[8+n:]; "
                    "print(h['__metadata__']['step'], *[ (k, h[k]['shape'], "
                    "struct.unpack('<%df' % ((h[k]['data_offsets'][1]-h[k]['data_offsets'][0])//4), "
                    "d[h[k]['data_offsets'][0]:h[k]['data_offsets'][1]])) for k in ('w','v')], sep='|')\" " +
                    (dir / "p.safetensors");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[1024];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  REQUIRE(pclose(p) == 0);
  CHECK(out == "12|('w', [2, 2], (1.5, -2.0, 0.25, 8.0))|('v', [3], (1.0, 2.0, 3.0))\n");
}

TEST_CASE("corrupt safetensors files raise IOError naming file, tensor and offset", "[safetensors]") {
  TempDir dir;
  const std::string p = dir / "bad.safetensors";
  const std::string good_h = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 54 bytes
  const std::string data8 = le(0x3f800000) + le(0x40000000);
  const std::string data_start = std::to_string(8 + good_h.size());

  SECTION("shorter than 8 bytes") {
    write_file(p, "abcde");
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains(p));
    CHECK_THAT(m, Contains("byte offset 5"));
  }
  SECTION("header length beyond the file") {
    write_file(p, craft(good_h, data8, 1000));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains(p));
    CHECK_THAT(m, Contains("byte offset 0"));
    CHECK_THAT(m, Contains("1000"));
  }
  SECTION("truncated data") {
    write_file(p, craft(good_h, data8.substr(0, 6)));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains(p));
    CHECK_THAT(m, Contains("'t'"));
    CHECK_THAT(m, Contains("byte offset " + std::to_string(8 + good_h.size() + 8)));
  }
  SECTION("JSON syntax error reports the file offset") {
    write_file(p, craft(R"({"t": x})", ""));  // 'x' is header byte 6 -> file byte 14
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains(p));
    CHECK_THAT(m, Contains("byte offset 14"));
  }
  SECTION("wrong dtype") {
    std::string h = R"({"t":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})";
    write_file(p, craft(h, data8));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains(p));
    CHECK_THAT(m, Contains("'t'"));
    CHECK_THAT(m, Contains("F16"));
    CHECK_THAT(m, Contains("F32"));
  }
  SECTION("data_offsets out of range") {
    std::string h = R"({"t":{"dtype":"F32","shape":[100],"data_offsets":[0,400]}})";
    write_file(p, craft(h, data8));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains("'t'"));
    CHECK_THAT(m, Contains("byte offset " + std::to_string(8 + h.size() + 400)));
  }
  SECTION("data_offsets inconsistent with the shape") {
    std::string h = R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
    write_file(p, craft(h, data8));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains("'t'"));
    CHECK_THAT(m, Contains("12 bytes"));
    CHECK_THAT(m, Contains("byte offset " + std::to_string(8 + h.size())));
  }
  SECTION("overlapping tensors") {
    std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    write_file(p, craft(h, data8 + le(0)));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains("'b'"));
    CHECK_THAT(m, Contains("overlap"));
    CHECK_THAT(m, Contains("byte offset " + std::to_string(8 + h.size() + 4)));
  }
  SECTION("begin > end") {
    std::string h = R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})";
    write_file(p, craft(h, data8));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains("begin > end"));
  }
  SECTION("trailing bytes after the last tensor") {
    write_file(p, craft(good_h, data8 + "junk"));
    std::string m = error_of([&] { load_safetensors(p); });
    CHECK_THAT(m, Contains("byte offset " + std::to_string(8 + good_h.size() + 8)));
  }
  SECTION("missing keys, non-object header, bad metadata, negative dim") {
    write_file(p, craft(R"({"t":{"dtype":"F32","shape":[2]}})", data8));
    CHECK_THAT(error_of([&] { load_safetensors(p); }), Contains("data_offsets"));
    write_file(p, craft("[1,2]", ""));
    CHECK_THAT(error_of([&] { load_safetensors(p); }), Contains("expected an object"));
    write_file(p, craft(R"({"__metadata__":{"k":3}})", ""));
    CHECK_THAT(error_of([&] { load_safetensors(p); }), Contains("'k'"));
    write_file(p, craft(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8));
    CHECK_THAT(error_of([&] { load_safetensors(p); }), Contains("non-negative"));
  }
  SECTION("the unmodified file is fine") {
    write_file(p, craft(good_h, data8));
    CHECK(load_safetensors(p).tensors.at(0).data == std::vector<float>{1.0f, 2.0f});
  }
  SECTION("missing file") {
    std::string m = error_of([&] { load_safetensors(dir / "none.safetensors"); });
    CHECK_THAT(m, Contains(dir / "none.safetensors"));
  }
}

TEST_CASE("a failed save never leaves a half-written target", "[safetensors][atomic]") {
  TempDir dir;
  const std::string p = dir / "ckpt.safetensors";
  save_safetensors(p, {{"w", {2}, {1.0f, 2.0f}}}, {{"v", "old"}});
  const std::string old_bytes = read_file(p);

  // Invalid input is rejected before the file system is touched.
  CHECK_THROWS_AS(save_safetensors(p, {{"w", {3}, {1.0f}}}), sg::ValueError);
  CHECK_THROWS_AS(save_safetensors(p, {{"w", {1}, {1.0f}}, {"w", {1}, {2.0f}}}), sg::ValueError);
  CHECK_THROWS_AS(save_safetensors(p, {{"__metadata__", {1}, {1.0f}}}), sg::ValueError);
  CHECK(read_file(p) == old_bytes);

  // Target directory does not exist (and cannot be created by the save): IOError, nothing written.
  std::string m = error_of([&] { save_safetensors(dir / "no/such/dir/x.safetensors", {{"w", {1}, {1.0f}}}); });
  CHECK_THAT(m, Contains(dir / "no/such/dir/x.safetensors"));
  CHECK_FALSE(fs::exists(dir / "no"));

  // Target is a non-empty directory: the final rename fails; the temporary file is removed.
  fs::create_directories(dir / "occupied/child");
  m = error_of([&] { save_safetensors(dir / "occupied", {{"w", {1}, {1.0f}}}); });
  CHECK_THAT(m, Contains(dir / "occupied"));
  CHECK(fs::is_directory(dir / "occupied/child"));

  CHECK(read_file(p) == old_bytes);
  CHECK(load_safetensors(p).metadata.at("v") == "old");
  CHECK(dir.entries() == 2);  // ckpt.safetensors and occupied/ only: no stray temporaries
}

TEST_CASE("atomic saves follow symbolic links and refuse to replace FIFOs and devices", "[safetensors][atomic]") {
  TempDir dir;
  const std::string target = dir / "target.safetensors", link = dir / "link.safetensors";
  save_safetensors(target, {{"w", {1}, {1.0f}}});
  fs::create_symlink(target, link);
  save_safetensors(link, {{"w", {1}, {2.0f}}});
  CHECK(fs::is_symlink(link));  // the link stays, its target has the new content
  CHECK(load_safetensors(target).tensors.at(0).data == std::vector<float>{2.0f});

  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  std::string m = error_of([&] { save_safetensors(fifo, {{"w", {1}, {1.0f}}}); });
  CHECK_THAT(m, Contains(fifo) && Contains("a FIFO, not a regular file"));
  CHECK_THROWS_AS(sg::check_atomic_writable(fifo), sg::IOError);
  CHECK(fs::is_fifo(fifo));
  // a device node (as root, renaming over /dev/null would replace it): refused before anything is written
  m = error_of([] { sg::check_atomic_writable("/dev/null"); });
  CHECK_THAT(m, Contains("/dev/null") && Contains("a character device"));
  CHECK(fs::is_character_file("/dev/null"));
  CHECK_NOTHROW(sg::check_atomic_writable(dir / "new.safetensors"));
  CHECK(dir.entries() == 3);  // target, link, fifo: the check left no temporary
}

TEST_CASE("load_safetensors refuses directories and devices instead of reading them", "[safetensors]") {
  TempDir dir;
  for (std::string p : {dir.path.string(), std::string("/dev/zero")}) {
    INFO(p);
    CHECK_THROWS_AS(sg::io::load_safetensors(p), sg::IOError);
    CHECK_THROWS_WITH(sg::io::load_safetensors(p), Contains("not a regular file"));
  }
}

// ---- issue 19: a corrupted data section loaded silently ----

TEST_CASE("safetensors: the data section's SHA-256 is recorded, verified on load, and a mismatch names both",
          "[safetensors]") {
  TempDir dir;
  std::vector<NamedTensor> ts{{"w", {2, 2}, {1.f, 2.f, 3.f, 4.f}}, {"b", {2}, {0.5f, -0.5f}}};
  save_safetensors(dir / "c.safetensors", ts, {{"model", "m"}});
  std::string bytes = read_file(dir / "c.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  // the recorded digest is SHA-256 of the data bytes: checked against Python's hashlib
  const std::string data = bytes.substr(8 + n);
  write_file(dir / "data.bin", data);
  std::string py = sg::testing::run_command(
      "/usr/bin/python3 -c \"import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())\" " +
      (dir / "data.bin"));
  CHECK(header["__metadata__"][kDataSha256Key] == py.substr(0, 64));
  CHECK(sha256_hex(data) == py.substr(0, 64));
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");  // FIPS 180-4 vector
  SafetensorsFile f = load_safetensors(dir / "c.safetensors");
  CHECK(f.checksum_verified);
  CHECK(f.metadata == std::map<std::string, std::string>{{"model", "m"}});  // the writer's metadata, as given

  // one flipped bit in the data: the header still parses, the digest does not match
  std::string bad = bytes;
  bad[bad.size() - 1] ^= 0x40;
  write_file(dir / "bad.safetensors", bad);
  std::string m = error_of([&] { load_safetensors(dir / "bad.safetensors"); });
  CHECK_THAT(m, Contains(dir / "bad.safetensors") && Contains("is corrupt") &&
                    Contains(header["__metadata__"][kDataSha256Key].get<std::string>()) &&
                    Contains(sha256_hex(bad.substr(8 + n))));

  // a file without the key (other writers) loads, and says it could not be verified
  header["__metadata__"].erase(kDataSha256Key);
  std::string js = header.dump();
  uint64_t len = js.size();
  write_file(dir / "plain.safetensors", std::string(reinterpret_cast<const char*>(&len), 8) + js + data);
  SafetensorsFile g = load_safetensors(dir / "plain.safetensors");
  CHECK_FALSE(g.checksum_verified);
  REQUIRE(g.tensors.size() == 2);
  CHECK(g.tensors[1].data == std::vector<float>{0.5f, -0.5f});
}

TEST_CASE("safetensors: a JSON number too large for a double is an IOError, not an escaping nlohmann exception",
          "[safetensors]") {
  // found by tests/fuzz/fuzz_safetensors.cpp: nlohmann::json throws out_of_range (not parse_error) for it
  TempDir dir;
  write_file(dir / "big.safetensors", craft(R"({"t": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})",
                                            std::string(4, '\0')));
  std::string m = error_of([&] { load_safetensors(dir / "big.safetensors"); });
  CHECK_THAT(m, Contains(dir / "big.safetensors") && Contains("does not parse") && Contains("number overflow"));
  // an empty tensor after a scalar (memcpy into a null data() was undefined behaviour)
  write_file(dir / "e.safetensors",
             craft(R"({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, )"
                   R"("e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [4, 4]}})",
                   std::string("\0\0\x28\x42", 4)));
  SafetensorsFile f = load_safetensors(dir / "e.safetensors");
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.find("s")->data == std::vector<float>{42.0f});
  CHECK(f.find("e")->data.empty());
}
