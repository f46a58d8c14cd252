// shadergrad — checkpoints in the safetensors format (https://github.com/huggingface/safetensors).
//
// File layout (all integers little-endian):
//   bytes [0, 8)        u64 N = header length in bytes
//   bytes [8, 8+N)      UTF-8 JSON object:
//                         {"<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
//                          ..., "__metadata__": {"<key>": "<string value>", ...}}
//                       begin/end are relative to the start of the data section; end - begin = 4 * prod(shape).
//                       Our writer pads the JSON with trailing spaces so that 8 + N is a multiple of 8.
//   bytes [8+N, EOF)    the tensors' raw little-endian IEEE-754 binary32 data, back to back.
// Tensors are F32 (shadergrad computes in f32); I8, U8 and I32 are supported for quantised exports (the values
// are held as floats in memory, exact for these integer types). The layout follows the format's specification;
// tests check it byte by byte and with an independent json+struct Python reader (the Python `safetensors`
// package itself is not installed here, so interoperability with it is by specification, not by test).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "sg/dump.h"
#include <string_view>
#include <vector>

namespace sg::io {

/// One named tensor: shape (row-major) and prod(shape) values. A 0-d tensor has shape {} and 1 value.
/// dtype "F32" (default), or "I8", "U8", "I32": then every value must be an integer in the type's range (stored in
/// the file as 1, 1 or 4 little-endian bytes).
struct NamedTensor {
  std::string name{};
  std::vector<int64_t> shape{};
  std::vector<float> data{};
  std::string dtype = "F32";
};

/// Write `tensors` and string `metadata` to `path` as safetensors.
/// Order: tensors are written (header entries and data) in the order given; names must be unique, non-empty
/// and not "__metadata__". Atomic: the bytes go to a temporary file in the target's directory, which is
/// fsync'ed and then renamed over `path` (std::filesystem::rename), so a reader sees either the old file or the
/// complete new one; on any failure the temporary file is removed and an existing `path` is left untouched.
/// Throws sg::ValueError (bad name, duplicate name, negative dim, data size != prod(shape), unknown dtype, a value
/// that is not an integer of an integer dtype's range) before touching the
/// file system; sg::IOError (names the path and the OS error) if the file cannot be written or renamed.
/// The metadata also records the SHA-256 of the data section (kDataSha256Key, lower-case hex), replacing a
/// value of that key in `metadata`.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// The __metadata__ key holding the lower-case hex SHA-256 (FIPS 180-4, via nettle) of the data section
/// (bytes 8 + N to the end of the file). Files written elsewhere usually lack it.
inline constexpr const char* kDataSha256Key = "shadergrad.data_sha256";

/// Lower-case hex SHA-256 of `bytes` (64 characters).
std::string sha256_hex(std::string_view bytes);

/// Content of a safetensors file. Tensors are listed in the order of their data in the file (ascending
/// data_offsets), which for files written by save_safetensors is the order they were saved in.
struct SafetensorsFile {
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
  /// True when the metadata recorded the data section's SHA-256 (kDataSha256Key) and it matched (the key is then
  /// removed from `metadata`, which holds what the writer passed); false when the file has none (then corruption
  /// of the data cannot be detected: callers should say so).
  bool checksum_verified = false;

  /// The tensor named `name`, or nullptr.
  const NamedTensor* find(std::string_view name) const;
};

/// Read and validate a safetensors file. Throws sg::IOError naming the file, the tensor (when one is at fault)
/// and the byte offset for: a file shorter than 8 bytes; a header length that runs past the end of the file;
/// a JSON syntax error (file offset of the error); a header that is not an object or an entry missing
/// dtype/shape/data_offsets; a dtype other than F32, I8, U8, I32; a negative dim; data_offsets with begin > end, beyond the
/// data section, not contiguous (overlapping or with gaps, as the reference implementation requires), or whose
/// size differs from sizeof(dtype) * prod(shape); data past the last tensor; a non-string __metadata__ value; a data section
/// whose SHA-256 differs from the one the metadata records (kDataSha256Key).
SafetensorsFile load_safetensors(const std::string& path);
/// The same checks on a file's bytes already in memory; `path` only names it in messages.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path);

/// Atomic file write (temporary + fsync + rename): the one implementation lives in codegen (sg/dump.h).
using sg::write_file_atomic;

}  // namespace sg::io
