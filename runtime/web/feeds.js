// shadergrad web runtime — the check of inputs read as class indices, shared by both executors (WebGPU and WebGL2,
// main thread and Worker): bundle.json gives such an input `"classes": N` (the labels of one_hot/cross_entropy;
// docs/BUNDLE.md), and every element fed to it must be an integer in [0, N), as the native run() requires
// (runtime/src/feeds.cpp, same wording) and torch's one_hot/cross_entropy raise for. Without it a label 5 of 3
// classes, -1 or 1.5 silently became a row of zeros in one_hot, and the loss was averaged over it.
import { FeedError } from './errors.js';

/**
 * Throws FeedError (details: program, input, index, value) when input `input` of program `program` holds a value
 * that is not a class index; `data` is the feed as the executor uploads it.
 * @param {string} program
 * @param {{name: string, classes?: number}} input one entry of the program's `inputs`
 * @param {ArrayLike<number>} data
 */
export function checkClassIndices(program, input, data) {
  const n = input.classes;
  if (!n) return;
  for (let e = 0; e < data.length; ++e) {
    const v = data[e];
    if (Number.isInteger(v) && v >= 0 && v < n) continue;
    const details = { program, input: input.name, index: e, value: v, classes: n };
    if (!Number.isInteger(v))
      throw new FeedError(`run('${program}'): input '${input.name}' element ${e} is ${v}, not an integer class index ` +
                          `in [0, ${n}) (one_hot/cross_entropy with ${n} classes)`, details);
    throw new FeedError(`run('${program}'): input '${input.name}' element ${e} is ${v}, outside [0, ${n}) ` +
                        `(one_hot/cross_entropy with ${n} classes); labels must be class indices 0..${n - 1}`, details);
  }
}
