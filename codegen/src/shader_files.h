// Private to codegen: the shader source files of codegen/shaders/ (the helper functions the emitters print into
// kernels, e.g. math/exp.glsl and its WGSL twin math/exp.wgsl), embedded into the library at build time by
// cmake/EmbedFiles.cmake (codegen/CMakeLists.txt), so that neither the binary nor a kernel depends on the source
// tree at run time.
#pragma once

#include <string_view>
#include <vector>

namespace sg::shaders {

/// One embedded file: its path relative to codegen/shaders/ ("math/exp.glsl") and its bytes, verbatim.
struct EmbeddedFile {
  std::string_view path;
  std::string_view bytes;
};

/// Every file of codegen/shaders/ (*.glsl, *.wgsl, *.c), sorted by path (generated: shader_files_data.cpp in the build dir).
const std::vector<EmbeddedFile>& shader_files();

/// The bytes of the embedded file `path` (relative to codegen/shaders/). Throws CompileError (a bug in shadergrad) when no such file
/// was embedded (a helper table naming a file that codegen/shaders/ lacks: add the file and re-run CMake).
std::string_view shader_file(std::string_view path);

}  // namespace sg::shaders
