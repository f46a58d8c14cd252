// The atomic file writer (see sg/atomic_file.h).
#include "sg/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

void write_file_atomic(const std::string& path, std::string_view bytes) {
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (target.filename().empty())
    throw IOError(fmt::format("cannot write '{}': the path names a directory, not a file.", path));
  std::string tmpl = (dir / (target.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) {
    int e = errno;
    throw IOError(fmt::format("cannot write '{}': creating a temporary file in '{}' failed: {}. Check that the "
                              "directory exists and is writable.",
                              path, dir.empty() ? "." : dir.string(), std::strerror(e)));
  }
  const std::string tmp(name.data());
  auto fail = [&](const std::string& what, int e) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("cannot write '{}': {} failed: {}. The previous content of '{}' (if any) is "
                              "unchanged.",
                              path, what, std::strerror(e), path));
  };
  ::fchmod(fd, 0644);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("writing the temporary file", errno);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) fail("fsync of the temporary file", errno);
  if (::close(fd) != 0) {
    fd = -1;
    fail("closing the temporary file", errno);
  }
  fd = -1;
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) fail(fmt::format("renaming '{}' over it", tmp), ec.value());
  // Make the rename itself durable (best effort: some file systems refuse fsync on directories).
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace sg
