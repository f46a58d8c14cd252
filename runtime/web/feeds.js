// shadergrad web runtime — the check of inputs read as class indices, shared by both executors (WebGPU and WebGL2,
// main thread and Worker): bundle.json gives such an input `"classes": N` (the labels of one_hot/cross_entropy;
// docs/BUNDLE.md), and every element fed to it must be an integer in [0, N), as the native run() requires
// (runtime/src/feeds.cpp, same wording) and torch's one_hot/cross_entropy raise for. Without it a label 5 of 3
// classes, -1 or 1.5 silently became a row of zeros in one_hot, and the loss was averaged over it.
import { FeedError } from './errors.js';
import { numel } from './bundle.js';

const fmtShape = (s) => `[${s.join(',')}]`;

/**
 * Throws FeedError (details: program, input, index, value) when input `input` of program `program` holds a value
 * that is not a class index; `data` is the feed as the executor uploads it.
 * @param {string} program
 * @param {{name: string, classes?: number, index_of?: string}} input one entry of the program's `inputs`
 *   (`index_of`: the gather whose index it is, e.g. "gather at model.cpp:42")
 * @param {ArrayLike<number>} data
 */
export function checkClassIndices(program, input, data) {
  const n = input.classes;
  if (!n) return;
  for (let e = 0; e < data.length; ++e) {
    const v = data[e];
    if (Number.isInteger(v) && v >= 0 && v < n) continue;
    const details = { program, input: input.name, index: e, value: v, classes: n };
    if (input.index_of)  // the index of a gather (take, Embedding): "gather at model.cpp:42"
      throw new FeedError(`run('${program}'): input '${input.name}' element ${e} is ${v}, ` +
                          `${Number.isInteger(v) ? 'outside' : 'not an integer index in'} [0, ${n}) ` +
                          `(${input.index_of} picks along an axis of ${n}; torch raises for it too); indices must ` +
                          `be integers 0..${n - 1}`, { ...details, index_of: input.index_of });
    if (!Number.isInteger(v))
      throw new FeedError(`run('${program}'): input '${input.name}' element ${e} is ${v}, not an integer class index ` +
                          `in [0, ${n}) (one_hot/cross_entropy with ${n} classes)`, details);
    throw new FeedError(`run('${program}'): input '${input.name}' element ${e} is ${v}, outside [0, ${n}) ` +
                        `(one_hot/cross_entropy with ${n} classes); labels must be class indices 0..${n - 1}`, details);
  }
}

/**
 * The feeds of one run() checked against the program's inputs, in the order of `inputs`, as Float32Arrays: throws
 * FeedError (details: program, input, and index for bad elements) for a name that is not an input, an input not fed,
 * a wrong number of values, a label that is not a class index (checkClassIndices), or an i32 element that is not an
 * integer of magnitude <= 2^24 (GPU storage holds integers as exact floats).
 * @param {string} program
 * @param {Array<{name: string, shape: number[], dtype: string, classes?: number}>} inputs the inputs to feed
 * @param {Record<string, ArrayLike<number>>} feeds
 * @param {string} storage what holds the values on the GPU ("buffers" | "textures"), for the i32 message
 * @param {Array<{name: string, classes?: number}>} [known] the plan's inputs (names accepted, `classes`), default `inputs`
 * @returns {Array<{input: object, data: Float32Array}>}
 */
export function checkedFeeds(program, inputs, feeds, storage, known = inputs) {
  const list = () => inputs.map((i) => `${i.name} ${fmtShape(i.shape)} ${i.dtype}`).join(', ');
  for (const k of Object.keys(feeds))
    if (!known.some((i) => i.name === k))
      throw new FeedError(`run('${program}'): '${k}' is not an input of the program (its inputs: ${list()})`,
                          { program, input: k });
  return inputs.map((i) => {
    const f = feeds[i.name];
    if (f === undefined)
      throw new FeedError(`run('${program}'): input '${i.name}' ${fmtShape(i.shape)} (${i.dtype}) was not fed ` +
                          `(the program's inputs: ${list()})`, { program, input: i.name });
    const n = numel(i.shape);
    if (f.length !== n)
      throw new FeedError(`run('${program}'): input '${i.name}' ${fmtShape(i.shape)} needs ${n} values, got ` +
                          `${f.length}`, { program, input: i.name });
    const data = f instanceof Float32Array ? f : Float32Array.from(f);
    checkClassIndices(program, i.classes ? i : known.find((x) => x.name === i.name) ?? i, data);  // labels
    if (i.dtype === 'i32')
      for (let e = 0; e < n; ++e)
        if (!Number.isInteger(data[e]) || Math.abs(data[e]) > 16777216)
          throw new FeedError(`run('${program}'): input '${i.name}' is i32 but element ${e} is ${data[e]} (an ` +
                              `integer of magnitude <= 2^24 is needed: ${storage} hold integers as exact floats)`,
                              { program, input: i.name, index: e });
    return { input: i, data };
  });
}

/**
 * Checks the values of a write(name, values) of persistent value `name` of shape `shape`: throws FeedError
 * (details: tensor) when `values` is missing or its length is not numel(shape).
 * @param {string} name @param {number[]} shape @param {ArrayLike<number>|undefined} values
 */
export function checkWriteValues(name, shape, values) {
  const n = numel(shape);
  if (!values || values.length !== n)
    throw new FeedError(`write('${name}'): ${values ? values.length : 'no'} values for shape ${fmtShape(shape)}, ` +
                        `which holds ${n}`, { tensor: name });
}
