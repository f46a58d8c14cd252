// shadergrad — shapes, dtypes and NumPy broadcasting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

namespace sg {

/// Element type of a tensor. f32 is the storage type of all values; i32 marks integer-valued tensors
/// (labels, indices) which GPU backends store as exact floats (integers up to 2^24).
enum class DType : uint8_t { f32, i32 };

const char* dtype_name(DType d);

/// A tensor shape: sizes per axis, outermost first (row-major). Rank 0 is a scalar.
using Shape = llvm::SmallVector<int64_t, 4>;
using ShapeRef = llvm::ArrayRef<int64_t>;

/// Number of elements (1 for rank 0). Throws ValueError when the product of the sizes exceeds int64 (shapes the
/// DSL builds are checked when their node is made, so this only fires for hand-made shapes).
int64_t numel(ShapeRef s);
/// a * b for sizes (a, b >= 0); throws ValueError "`what`: a x b = more than 2^63-1 ..." on overflow. The one
/// helper for every product of sizes that come from user input (shapes, batch sizes, file headers).
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
/// a + b for sizes (a, b >= 0); throws ValueError naming `what` on overflow.
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
/// numel(s) through checked_mul: ValueError naming `what` and the shape when it overflows (or a size is < 0).
int64_t checked_numel(ShapeRef s, std::string_view what);
/// Row-major (C-contiguous) strides in elements.
Shape contiguous_strides(ShapeRef s);
/// "32x784" ("scalar" for rank 0).
std::string shape_str(ShapeRef s);
/// NumPy broadcast of two shapes (aligned at the right; size-1 axes stretch).
/// Returns false when they are incompatible.
bool broadcast_shapes(ShapeRef a, ShapeRef b, Shape& out);
/// Normalises a possibly negative axis against rank; returns -1 when out of range.
int normalize_axis(int64_t axis, int rank);

}  // namespace sg
