// shadergrad web runtime — host data <-> texture texels, following the layouts in bundle.json (docs/BUNDLE.md),
// which are codegen/include/sg/texture_layout.h's: element e of a value's storage order lives in texel e / 4,
// component e % 4, texel t at (t % width, t / width). A full upload or readback of a layout is therefore the
// storage-order values followed by zeros up to width * height * 4 floats. Storage order differs from the tensor's
// row-major order for transposed values and values split into row/column planes (Value::transposed,
// Value::planes in sg/schedule.h); unpack() puts them back.

/**
 * A zero-padded copy of `values` sized for a texSubImage2D of the layout's width x height texels (WebGL
 * requires the array to hold exactly that many floats).
 * @param {ArrayLike<number>} values storage-order values (numel of them)
 * @param {{width: number, height: number, numel: number}} layout
 * @param {Float32Array} [scratch] reused when it has the right size
 * @returns {Float32Array}
 */
export function padToLayout(values, layout, scratch) {
  const n = layout.width * layout.height * 4;
  if (values instanceof Float32Array && values.length === n) return values;
  const out = scratch && scratch.length === n ? scratch : new Float32Array(n);
  out.set(values.length > layout.numel ? values.subarray(0, layout.numel) : values);
  if (out === scratch) out.fill(0, values.length);
  return out;
}

/**
 * The tensor (row-major, numel(shape) values) from the textures holding it.
 * @param {Float32Array[]} planes per plane: at least layout.numel storage-order values of that plane
 * @param {{numel: number}} layout one plane's layout
 * @param {number[]} shape the tensor's shape
 * @param {{transposed?: boolean, planes?: number, row_planes?: number, col_planes?: number}} storage
 * @returns {Float32Array}
 */
export function unpack(planes, layout, shape, storage) {
  const n = shape.reduce((a, b) => a * b, 1);
  const P = storage.planes ?? 1;
  if (P > 1) {
    // viewed as [rows, C] (C = last axis): element (r, c) is in plane (r % Pr) * Pc + (c / 4) % Pc, at that
    // plane's row r / Pr, column ((c / 4) / Pc) * 4 + c % 4 (a plane's rows have C / Pc elements)
    const Pr = storage.row_planes ?? P, Pc = storage.col_planes ?? 1, C = shape[shape.length - 1];
    const pc = C / Pc, rowsPerPlane = layout.numel / pc, out = new Float32Array(n);
    for (let p = 0; p < Pr; ++p)
      for (let q = 0; q < Pc; ++q) {
        const src = planes[p * Pc + q];
        for (let r = 0; r < rowsPerPlane; ++r)
          for (let t = 0; t < pc / 4; ++t) {
            const s = r * pc + t * 4, d = (r * Pr + p) * C + (t * Pc + q) * 4;
            for (let l = 0; l < 4; ++l) out[d + l] = src[s + l];
          }
      }
    return out;
  }
  const src = planes[0];
  if (storage.transposed) {  // the texture holds the transpose of the 2-D value
    const rows = shape[0], cols = shape[1], out = new Float32Array(n);
    for (let i = 0; i < rows; ++i)
      for (let j = 0; j < cols; ++j) out[i * cols + j] = src[j * rows + i];
    return out;
  }
  return src.length === n ? src : src.slice(0, n);
}
