// libFuzzer target: the sklearn digits CSV reader (sg::data::load_digits; raw or gzip text).
// Contract: a Dataset of 8x8 samples with labels 0..9, or sg::IOError; nothing else, no sanitizer report.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "sg/datasets.h"
#include "sg/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = sg::fuzz::scratch_path("digits.csv");
  sg::fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    sg::data::Dataset d = sg::data::load_digits(path);
    if (d.images.size() != static_cast<size_t>(d.n) * 64 || d.num_classes > 10) __builtin_trap();
  } catch (const sg::IOError&) {
  }
  return 0;
}
