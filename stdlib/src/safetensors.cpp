// shadergrad — safetensors reader/writer and atomic file writes.
#include "sg/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <nettle/sha2.h>

#include "sg/error.h"
#include "sg/shape.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies float bytes directly and assumes a little-endian host");

namespace sg::io {
namespace fs = std::filesystem;

namespace {
/// Bytes per element of a supported dtype, 0 for others.
uint64_t dtype_size(std::string_view dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "I8" || dtype == "U8") return 1;
  return 0;
}
/// Appends t's values encoded as t.dtype (checked before: integers in range).
void append_encoded(std::string& out, const NamedTensor& t) {
  if (t.dtype == "F32") {
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
    return;
  }
  for (float v : t.data) {
    if (t.dtype == "I32") {
      int32_t i = static_cast<int32_t>(v);
      out.append(reinterpret_cast<const char*>(&i), 4);
    } else {
      out.push_back(static_cast<char>(t.dtype == "I8" ? static_cast<uint8_t>(static_cast<int8_t>(v))
                                                      : static_cast<uint8_t>(v)));
    }
  }
}
void check_values(const std::string& path, const NamedTensor& t) {
  if (t.dtype == "F32") return;
  const double lo = t.dtype == "I8" ? -128 : t.dtype == "U8" ? 0 : -2147483648.0;
  const double hi = t.dtype == "I8" ? 127 : t.dtype == "U8" ? 255 : 2147483647.0;
  for (size_t i = 0; i < t.data.size(); ++i) {
    double v = t.data[i];
    if (!(v >= lo && v <= hi) || v != std::nearbyint(v))
      throw ValueError(fmt::format("save_safetensors('{}'): tensor '{}' ({}) element {} is {}, not an integer in "
                                   "[{}, {}]", path, t.name, t.dtype, i, v, lo, hi));
  }
}
}  // namespace


void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw ValueError(fmt::format("save_safetensors('{}'): invalid tensor name '{}' (must be non-empty and not "
                                   "'__metadata__').",
                                   path, t.name));
    if (!seen.insert(t.name).second)
      throw ValueError(fmt::format("save_safetensors('{}'): duplicate tensor name '{}'.", path, t.name));
    uint64_t count = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        throw ValueError(fmt::format("save_safetensors('{}'): tensor '{}' has negative dimension {}.", path,
                                     t.name, d));
      count = static_cast<uint64_t>(
          checked_mul(static_cast<int64_t>(count), d, fmt::format("save_safetensors('{}'): tensor '{}'", path, t.name)));
    }
    if (count != t.data.size())
      throw ValueError(fmt::format("save_safetensors('{}'): tensor '{}' has shape [{}] ({} elements) but {} "
                                   "values.",
                                   path, t.name, fmt::join(t.shape, ", "), count, t.data.size()));
    const uint64_t esize = dtype_size(t.dtype);
    if (esize == 0)
      throw ValueError(fmt::format("save_safetensors('{}'): tensor '{}' has dtype '{}' (supported: F32, I8, U8, "
                                   "I32).", path, t.name, t.dtype));
    check_values(path, t);
    uint64_t bytes = count * esize;
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string data;
  data.reserve(offset);
  for (const NamedTensor& t : tensors) append_encoded(data, t);
  if (!header.contains("__metadata__")) header["__metadata__"] = nlohmann::ordered_json::object();
  header["__metadata__"][kDataSha256Key] = sha256_hex(data);  // verified by load_safetensors
  std::string json = header.dump();
  while ((8 + json.size()) % 8 != 0) json.push_back(' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  uint64_t n = json.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += json;
  out += data;
  write_file_atomic(path, out);
}

const NamedTensor* SafetensorsFile::find(std::string_view name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string sha256_hex(std::string_view bytes) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  if (!bytes.empty()) sha256_update(&ctx, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
  std::string hex;
  for (uint8_t b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw IOError(fmt::format("cannot read safetensors file '{}': not a regular file (a directory or device?)", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    throw IOError(fmt::format("cannot open safetensors file '{}': {}.", path, std::strerror(e)));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IOError(fmt::format("cannot read safetensors file '{}'.", path));
  return parse_safetensors(bytes, path);
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  const uint64_t size = bytes.size();
  if (size < 8)
    throw IOError(fmt::format("'{}': not a safetensors file: {} bytes, shorter than the 8-byte header length "
                              "(byte offset {} is the end of the file).",
                              path, size, size));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > size - 8)
    throw IOError(fmt::format("'{}': byte offset 0: header length {} runs past the end of the file ({} bytes, so "
                              "at most {} header bytes). The file is truncated or not safetensors.",
                              path, n, size, size - 8));
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = size - data_start;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<ptrdiff_t>(data_start));
  } catch (const nlohmann::json::parse_error& e) {
    uint64_t at = 8 + (e.byte > 0 ? e.byte - 1 : 0);
    throw IOError(fmt::format("'{}': byte offset {}: the JSON header (bytes 8..{}) does not parse: {}", path, at,
                              data_start, e.what()));
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range for a number like 3e768114 (fuzz_safetensors)
    throw IOError(fmt::format("'{}': the JSON header (bytes 8..{}) does not parse: {}", path, data_start, e.what()));
  }
  if (!header.is_object())
    throw IOError(fmt::format("'{}': byte offset 8: the JSON header is a {}, expected an object.", path,
                              header.type_name()));

  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    uint64_t begin, end;
    std::string dtype;
  };
  std::vector<Entry> entries;
  SafetensorsFile out;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        throw IOError(fmt::format("'{}': header (bytes 8..{}): __metadata__ is a {}, expected an object of "
                                  "strings.",
                                  path, data_start, v.type_name()));
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string())
          throw IOError(fmt::format("'{}': header (bytes 8..{}): __metadata__ value '{}' is a {}, expected a "
                                    "string.",
                                    path, data_start, k, s.type_name()));
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    auto bad = [&, &name = name](const std::string& what) {  // (clang 14 cannot capture a structured binding)
      return IOError(fmt::format("'{}': tensor '{}' (header bytes 8..{}): {}", path, name, data_start, what));
    };
    if (!v.is_object()) throw bad(fmt::format("entry is a {}, expected an object", v.type_name()));
    if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw bad("entry needs the keys dtype, shape and data_offsets");
    const auto& dt = v["dtype"];
    if (!dt.is_string() || dtype_size(dt.get<std::string>()) == 0)
      throw bad(fmt::format("dtype is {}, only F32 (and I8, U8, I32 for quantised exports) is supported (convert "
                            "the checkpoint to float32, e.g. {{k: v.float() for k, v in sd.items()}} before "
                            "safetensors.torch.save_file)",
                            dt.dump()));
    const uint64_t esize = dtype_size(dt.get<std::string>());
    const auto& sh = v["shape"];
    if (!sh.is_array()) throw bad(fmt::format("shape is {}, expected an array of non-negative integers", sh.dump()));
    Entry e{name, {}, 0, 0, dt.get<std::string>()};
    unsigned __int128 count = 1;
    for (const auto& d : sh) {
      if (!d.is_number_unsigned())
        throw bad(fmt::format("shape {} has a dimension that is not a non-negative integer", sh.dump()));
      e.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      count *= d.get<uint64_t>();
      if (count > (static_cast<unsigned __int128>(1) << 61))
        throw bad(fmt::format("shape {} has more than 2^61 elements", sh.dump()));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad(fmt::format("data_offsets is {}, expected [begin, end] (non-negative integers)", off.dump()));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end)
      throw bad(fmt::format("data_offsets [{}, {}] has begin > end (file byte offset {})", e.begin, e.end,
                            data_start + e.begin));
    if (e.end > data_size)
      throw bad(fmt::format("data_offsets [{}, {}] ends at file byte offset {}, past the end of the file ({} "
                            "bytes; data section {} bytes from offset {})",
                            e.begin, e.end, data_start + e.end, size, data_size, data_start));
    if (e.end - e.begin != static_cast<uint64_t>(count) * esize)
      throw bad(fmt::format("data_offsets [{}, {}] span {} bytes (file byte offset {}), but shape {} needs {} "
                            "bytes of {}",
                            e.begin, e.end, e.end - e.begin, data_start + e.begin, sh.dump(),
                            static_cast<uint64_t>(count) * esize, e.dtype));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const Entry& e : entries) {
    if (e.begin != expect)
      throw IOError(fmt::format("'{}': tensor '{}': data_offsets [{}, {}] start at file byte offset {}, but the "
                                "previous tensor's data ends at file byte offset {} ({}). safetensors requires the "
                                "tensors' data to be contiguous and non-overlapping.",
                                path, e.name, e.begin, e.end, data_start + e.begin, data_start + expect,
                                e.begin < expect ? "overlap" : "gap"));
    expect = e.end;
  }
  if (expect != data_size)
    throw IOError(fmt::format("'{}': byte offset {}: {} bytes of data after the last tensor (data section is {} "
                              "bytes, tensors cover {}). The file is corrupt.",
                              path, data_start + expect, data_size - expect, data_size, expect));
  if (auto it = out.metadata.find(kDataSha256Key); it != out.metadata.end()) {
    const std::string found = sha256_hex(bytes.substr(data_start));
    if (found != it->second)
      throw IOError(fmt::format("'{}': the data section (bytes {}..{}) is corrupt: its SHA-256 is {}, the header "
                                "records {} ({}). Restore the file from a good copy or re-save it.",
                                path, data_start, size, found, it->second, kDataSha256Key));
    out.checksum_verified = true;
    out.metadata.erase(it);  // the caller's metadata, as saved
  }
  out.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    NamedTensor t;
    t.name = std::move(e.name);
    t.shape = std::move(e.shape);
    t.dtype = e.dtype;
    const char* src = bytes.data() + data_start + e.begin;
    const uint64_t esize = dtype_size(e.dtype);
    t.data.resize((e.end - e.begin) / esize);
    if (e.dtype == "F32") {
      // (an empty tensor's data() may be null: memcpy(nullptr, ..., 0) is undefined; found by fuzz_safetensors)
      if (!t.data.empty()) std::memcpy(t.data.data(), src, e.end - e.begin);
    } else {
      for (size_t i = 0; i < t.data.size(); ++i) {
        if (e.dtype == "I32") {
          int32_t v;
          std::memcpy(&v, src + 4 * i, 4);
          t.data[i] = static_cast<float>(v);
        } else {
          uint8_t b = static_cast<uint8_t>(src[i]);
          t.data[i] = e.dtype == "I8" ? static_cast<float>(static_cast<int8_t>(b)) : static_cast<float>(b);
        }
      }
    }
    out.tensors.push_back(std::move(t));
  }
  return out;
}

}  // namespace sg::io
