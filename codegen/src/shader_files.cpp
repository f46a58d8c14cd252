// The lookup of the embedded shader files (shader_files.h); the files themselves are in the generated
// shader_files_data.cpp (cmake/EmbedFiles.cmake).
#include "shader_files.h"

#include <fmt/format.h>

#include "sg/error.h"

namespace sg::shaders {

std::string_view shader_file(std::string_view path) {
  for (const EmbeddedFile& f : shader_files())
    if (f.path == path) return f.bytes;
  throw CompileError(fmt::format("codegen: no shader file '{}' was embedded from codegen/shaders/ (a bug in "
                                 "shadergrad: add the file there and re-run CMake; {} files embedded)",
                                 path, shader_files().size()));
}

}  // namespace sg::shaders
