// shadergrad — errors and user source locations.
//
// Every error shadergrad throws derives from sg::Error, so a user can catch one type. Messages say what is
// wrong, where (op name and the user's file:line captured with sg::source_location), and how to fix it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sg {

/// The caller's file, function and line, captured as a defaulted argument (`loc = source_location::current()`).
/// One type on every compiler, built from the __builtin_FILE/FUNCTION/LINE that GCC and clang both provide:
/// std::source_location is a different type under clang 14 (which lacks the builtin libstdc++'s needs), so a
/// library built by GCC and a program built by clang would disagree on every DSL entry point's signature.
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           uint32_t line = __builtin_LINE()) noexcept {
    source_location l;
    l.file_ = file, l.function_ = function, l.line_ = line;
    return l;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr uint32_t line() const noexcept { return line_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  uint32_t line_ = 0;
};

/// Where in the user's C++ a graph node was created (file basename, line, function).
/// Captured with sg::source_location::current() as a defaulted argument of every DSL entry point.
struct SourceLoc {
  std::string file;      ///< basename of the source file ("model.cpp"); empty when unknown
  uint32_t line = 0;     ///< 1-based line; 0 when unknown
  std::string function;  ///< enclosing function name as the compiler spells it

  SourceLoc() = default;
  SourceLoc(const source_location& l);  // NOLINT(implicit): captured at call sites
  /// "model.cpp:42", or "<unknown>".
  std::string str() const;
  bool known() const { return line != 0; }
};

/// While alive, every node created on this thread records `loc` instead of its own call site. Composite ops
/// (cross_entropy, softmax, layers) and autodiff use it so that every node, including backward nodes, names the
/// user's line that caused it. Nests: the outermost override wins.
class LocationOverride {
 public:
  explicit LocationOverride(const SourceLoc& loc);
  ~LocationOverride();
  LocationOverride(const LocationOverride&) = delete;
  LocationOverride& operator=(const LocationOverride&) = delete;

 private:
  bool active_;
};

/// Base class of every exception shadergrad throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Shapes that do not fit an op (broadcast, matmul inner dims, reshape element count, axis out of range...).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A bad argument value (negative size, unknown option, wrong dtype...).
class ValueError : public Error {
 public:
  using Error::Error;
};

/// A file could not be read or written, or its content is malformed (the message names file and offset).
class IOError : public Error {
 public:
  using Error::Error;
};

/// A generated shader failed to compile/validate: a bug in shadergrad (message shows the marked source).
class CompileError : public Error {
 public:
  using Error::Error;
};

/// A GPU backend failed (no context, GL error, incomplete framebuffer...). Names the kernel when known.
class BackendError : public Error {
 public:
  using Error::Error;
};

/// An operation shadergrad does not support (e.g. gradients of gradients), with the reason.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

}  // namespace sg
