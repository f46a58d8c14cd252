// libFuzzer target: image decoding (sg::image::read_image: PNG via libpng, binary PGM/PPM) and read_image_gray's
// resize to 28x28. Contract: an image or sg::IOError; nothing else, no sanitizer report.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "sg/error.h"
#include "sg/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = sg::fuzz::scratch_path("image");
  sg::fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    sg::image::RGBImage img = sg::image::read_image(path);
    if (img.rgb.size() != static_cast<size_t>(img.width) * img.height * 3) __builtin_trap();
    std::vector<float> g = sg::image::read_image_gray(path, 28, 28);
    (void)sg::image::input_warnings(g, 28, 28);
  } catch (const sg::IOError&) {
  }
  return 0;
}
