// libFuzzer target: the IDX readers (sg::data::load_idx and load_fashion_mnist's checks) on an images file and a
// labels file. Input: images bytes, the separator "\n--labels--\n", labels bytes (both may be gzip or raw).
// Contract: a Dataset or sg::IOError; no other exception, no sanitizer report, no allocation beyond the input.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "sg/datasets.h"
#include "sg/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = sg::fuzz::scratch_path("idx");
    std::string cmd = "mkdir -p '" + d + "'";
    if (std::system(cmd.c_str()) != 0) std::abort();
    return d;
  }();
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string_view images = sg::fuzz::split(in, "\n--labels--\n");
  sg::fuzz::write_bytes(dir + "/train-images-idx3-ubyte.gz", images);
  sg::fuzz::write_bytes(dir + "/train-labels-idx1-ubyte.gz", in);
  try {
    sg::data::Dataset d = sg::data::load_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
    if (d.images.size() != static_cast<size_t>(d.n * d.sample_size())) __builtin_trap();
  } catch (const sg::IOError&) {
  }
  try {
    sg::data::Dataset d = sg::data::load_fashion_mnist(true, dir);
    if (d.h != 28 || d.w != 28 || d.num_classes != 10) __builtin_trap();  // the loader's documented guarantees
    for (int32_t l : d.labels)
      if (l < 0 || l > 9) __builtin_trap();
  } catch (const sg::IOError&) {
  }
  return 0;
}
