// shadergrad web runtime — turning a drawing into the input of a model trained on sklearn's 8x8 digits (UCI
// optdigits, Alpaydin & Kaynak 1998): the digits there were made from 32x32 normalised bitmaps, "divided into
// non-overlapping blocks of 4x4 and the number of on pixels counted in each block", giving 8x8 values 0..16 (the
// dataset description, sklearn.datasets.load_digits / UCI optdigits.names). We do the same to a canvas drawing:
//   1. ink: a pixel is ink when its darkness (1 - luminance, or alpha on a transparent canvas) is > 0.5;
//   2. bounding box of the ink, scaled (aspect ratio kept) so its longer side fills 32 pixels, centred;
//   3. the 32x32 bitmap: a pixel is on when at least `coverage` of its footprint in the drawing is ink;
//   4. 4x4 blocks counted -> 8x8 counts 0..16; the model's input is counts / 16 (as sg::load_digits scales).

/**
 * @param {{data: Uint8ClampedArray|Uint8Array, width: number, height: number}} image RGBA pixels (an ImageData)
 * @param {{inkOnTransparent?: boolean, coverage?: number}} [options] inkOnTransparent: ink = alpha (a canvas
 *   cleared to transparent), else ink = darkness of an opaque drawing on white; coverage: fraction of a 32x32
 *   pixel's footprint that must be ink for it to be on (default 0.25)
 * @returns {{bitmap: Uint8Array, counts: Uint8Array, x: Float32Array, bbox: {x0, y0, x1, y1}} | null}
 *   bitmap: 32x32 0/1 row-major; counts: 8x8 0..16; x: counts/16 (the model input, 64 floats); null when
 *   there is no ink.
 */
export function digitFromImage(image, options = {}) {
  const { width: w, height: h, data } = image;
  const coverage = options.coverage ?? 0.25;
  const ink = new Uint8Array(w * h);
  let x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (let y = 0; y < h; ++y)
    for (let x = 0; x < w; ++x) {
      const i = 4 * (y * w + x);
      const dark = options.inkOnTransparent ? data[i + 3] / 255
                                            : 1 - (0.299 * data[i] + 0.587 * data[i + 1] + 0.114 * data[i + 2]) / 255;
      if (dark > 0.5) {
        ink[y * w + x] = 1;
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
        if (y < y0) y0 = y;
        if (y > y1) y1 = y;
      }
    }
  if (x1 < 0) return null;
  const bitmap = normalise32(ink, w, { x0, y0, x1, y1 }, coverage);
  const counts = blockCounts(bitmap);
  const x = Float32Array.from(counts, (c) => c / 16);
  return { bitmap, counts, x, bbox: { x0, y0, x1, y1 } };
}

/** Step 2-3: the ink inside the box, scaled so the longer side is 32 pixels, centred, thresholded by coverage. */
function normalise32(ink, w, box, coverage) {
  const bw = box.x1 - box.x0 + 1, bh = box.y1 - box.y0 + 1;
  const scale = 32 / Math.max(bw, bh);           // output pixels per input pixel
  const ow = bw * scale, oh = bh * scale;         // the box's size in the 32x32 frame
  const ox = (32 - ow) / 2, oy = (32 - oh) / 2;   // centred
  const out = new Uint8Array(32 * 32);
  for (let v = 0; v < 32; ++v)
    for (let u = 0; u < 32; ++u) {
      // footprint of output pixel (u, v) in input pixels: [sx0, sx1) x [sy0, sy1)
      const sx0 = box.x0 + (u - ox) / scale, sx1 = box.x0 + (u + 1 - ox) / scale;
      const sy0 = box.y0 + (v - oy) / scale, sy1 = box.y0 + (v + 1 - oy) / scale;
      const ix0 = Math.max(box.x0, Math.floor(sx0)), ix1 = Math.min(box.x1 + 1, Math.ceil(sx1));
      const iy0 = Math.max(box.y0, Math.floor(sy0)), iy1 = Math.min(box.y1 + 1, Math.ceil(sy1));
      let on = 0, all = 0;
      for (let y = iy0; y < iy1; ++y)
        for (let x = ix0; x < ix1; ++x) {
          // area of input pixel (x, y) inside the footprint
          const a = (Math.min(x + 1, sx1) - Math.max(x, sx0)) * (Math.min(y + 1, sy1) - Math.max(y, sy0));
          if (a <= 0) continue;
          all += a;
          on += a * ink[y * w + x];
        }
      const area = (sx1 - sx0) * (sy1 - sy0);
      out[v * 32 + u] = all > 0 && on >= coverage * area ? 1 : 0;
    }
  return out;
}

/** Step 4: the number of on pixels in each 4x4 block of a 32x32 bitmap (row-major 8x8, 0..16). */
export function blockCounts(bitmap) {
  const counts = new Uint8Array(64);
  for (let y = 0; y < 32; ++y)
    for (let x = 0; x < 32; ++x) counts[(y >> 2) * 8 + (x >> 2)] += bitmap[y * 32 + x];
  return counts;
}
