// libFuzzer target: safetensors parsing (sg::io::parse_safetensors, the body of load_safetensors).
// Contract: any bytes either parse or throw sg::IOError; nothing else escapes, no sanitizer report.
#include <cstdint>
#include <string_view>

#include "sg/error.h"
#include "sg/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    sg::io::SafetensorsFile f =
        sg::io::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
    for (const auto& t : f.tensors) (void)f.find(t.name);
  } catch (const sg::IOError&) {
  }
  return 0;
}
