// Shapes page — the frames: 128x128 gray images of one shape (disc, square, triangle, plus) like the native
// generator's (sg::data::make_shapes: radius 0.12..0.34 of the side, any rotation, background 0.1..0.4, the shape
// brighter, noise +-0.1), drawn with a 2-D canvas, deterministic for a seed. Used on the main thread (the frame
// source) and in the benchmark.
export const SHAPE_NAMES = ['disc', 'square', 'triangle', 'plus'];

/** A deterministic generator of uniform floats in [0, 1) (mulberry32). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function path(g, k) {
  g.beginPath();
  if (k === 0) g.arc(0, 0, 1, 0, 2 * Math.PI);
  else if (k === 1) g.rect(-0.75, -0.75, 1.5, 1.5);
  else if (k === 2) { g.moveTo(0, -1); g.lineTo(0.866, 0.5); g.lineTo(-0.866, 0.5); g.closePath(); }
  else { g.rect(-0.28, -1, 0.56, 2); g.rect(-1, -0.28, 2, 0.56); }
}

/** Draws shape class k on a 2-D context of side x side with parameters from `rand`; returns {k, params}. */
export function drawShape(g, side, k, rand) {
  const radius = side * (0.12 + 0.22 * rand());
  const cx = radius + (side - 2 * radius) * rand(), cy = radius + (side - 2 * radius) * rand();
  const angle = 2 * Math.PI * rand();
  const bg = 0.1 + 0.3 * rand(), fg = bg + 0.3 + 0.5 * rand() * (1 - bg - 0.3);
  const v = (x) => Math.round(255 * x);
  g.setTransform(1, 0, 0, 1, 0, 0);
  g.fillStyle = `rgb(${v(bg)},${v(bg)},${v(bg)})`;
  g.fillRect(0, 0, side, side);
  g.setTransform(radius * Math.cos(angle), radius * Math.sin(angle), -radius * Math.sin(angle),
                 radius * Math.cos(angle), cx, cy);
  g.fillStyle = `rgb(${v(fg)},${v(fg)},${v(fg)})`;
  path(g, k);
  g.fill('nonzero');
  g.setTransform(1, 0, 0, 1, 0, 0);
  // noise: +-0.1 per pixel
  const img = g.getImageData(0, 0, side, side);
  for (let i = 0; i < img.data.length; i += 4) {
    const n = Math.round((rand() - 0.5) * 0.2 * 255);
    const p = Math.max(0, Math.min(255, img.data[i] + n));
    img.data[i] = img.data[i + 1] = img.data[i + 2] = p;
  }
  g.putImageData(img, 0, 0);
  return { k, cx, cy, radius, angle };
}

/** Gray values in [0, 1] (the model's input, 1 x side x side) of RGBA pixels. */
export function grayOf(rgba, out = new Float32Array(rgba.length / 4)) {
  for (let i = 0, j = 0; j < out.length; i += 4, ++j) out[j] = rgba[i] / 255;
  return out;
}
