// The atomic file writer (see sg/atomic_file.h).
#include "sg/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

namespace {

/// What `st` is, in words, for a file that is not a regular one.
const char* file_kind(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

/// The file the write replaces: `path` with symbolic links resolved (the link stays, its target gets the new
/// content). IOError when that file exists and is not a regular file: renaming over a device, FIFO or socket
/// would replace it (seen: `--metrics /dev/full` as root replaced the device node).
std::filesystem::path resolve_target(const std::string& path) {
  std::filesystem::path target(path);
  if (target.filename().empty())
    throw IOError(fmt::format("cannot write '{}': the path names a directory, not a file.", path));
  std::error_code ec;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(target, ec))) {
    std::filesystem::path resolved = std::filesystem::weakly_canonical(target, ec);
    if (ec) throw IOError(fmt::format("cannot write '{}': resolving the symbolic link failed: {}.", path, ec.message()));
    target = resolved;
  }
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw IOError(fmt::format("cannot write '{}': it is {}, not a regular file. shadergrad writes files atomically "
                              "(a temporary renamed over the old file), which would replace it; give the path of a "
                              "regular file.",
                              path, file_kind(st)));
  return target;
}

/// SIGINT, SIGTERM and SIGHUP held back while the temporary exists, so an interrupt leaves the old file or the
/// new one and no stray temporary (the pending signal is delivered when the mask is restored).
class InterruptsDeferred {
 public:
  InterruptsDeferred() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~InterruptsDeferred() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  InterruptsDeferred(const InterruptsDeferred&) = delete;
  InterruptsDeferred& operator=(const InterruptsDeferred&) = delete;

 private:
  sigset_t old_{};
};

}  // namespace

void check_atomic_writable(const std::string& path) {
  const std::filesystem::path target = resolve_target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw IOError(fmt::format("cannot write '{}': directory '{}' does not exist.", path, dir.string()));
  std::string tmpl = (dir / (target.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  InterruptsDeferred deferred;
  int fd = ::mkstemp(name.data());
  if (fd < 0) {
    int e = errno;
    throw IOError(fmt::format("cannot write '{}': cannot create files in '{}': {}.", path, dir.string(),
                              std::strerror(e)));
  }
  ::close(fd);
  ::unlink(name.data());
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::filesystem::path target = resolve_target(path);
  std::filesystem::path dir = target.parent_path();
  InterruptsDeferred deferred;
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
