// shadergrad — shapes, dtypes and NumPy broadcasting.
#pragma once

#include <cstdint>
#include <string>

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

/// Number of elements (1 for rank 0).
int64_t numel(ShapeRef s);
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
