// shadergrad — the one atomic file writer of the code base (dumps, the kernel cache, checkpoints, PNGs, metrics,
// debug reports).
#pragma once

#include <string>
#include <string_view>

namespace sg {

/// Writes `bytes` to `path` atomically: a mkstemp temporary in the same directory (mode 0644), fsync, rename
/// over `path`, then fsync of the directory (best effort). A reader sees the old content or the new one, never
/// a part; concurrent writers of one path (processes sharing SG_KERNEL_CACHE) each rename a complete file. On any
/// failure the temporary is removed, the previous content of `path` is untouched, and IOError (sg/error.h) names
/// the path, the step that failed (creating the temporary, writing, fsync, rename) and the OS error.
/// A symbolic link is followed (its target is replaced, the link stays). IOError, before anything is written, when
/// the file exists and is not a regular file (device, FIFO, socket, directory): renaming would replace it.
/// SIGINT/SIGTERM/SIGHUP are deferred while the temporary exists, so an interrupt leaves no stray temporary.
void write_file_atomic(const std::string& path, std::string_view bytes);

/// Checks now what write_file_atomic(path, ...) needs later (before a long run whose result it saves): the
/// directory exists, a temporary can be created in it, and `path` is not an existing non-regular file. IOError
/// naming the path and the reason; writes nothing that stays.
void check_atomic_writable(const std::string& path);

}  // namespace sg
