// shadergrad web runtime — reading the header of a safetensors file (https://github.com/huggingface/safetensors):
// u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...},
// then the data section; offsets are relative to its start (byte 8 + N).
import { BundleError } from './errors.js';

/**
 * @typedef {{dtype: string, shape: number[], begin: number, end: number}} SafetensorsEntry
 *   begin/end: absolute byte offsets in the file.
 */

/**
 * Parses and checks a safetensors header.
 * @param {ArrayBuffer} bytes the whole file
 * @param {string} file its name in the bundle (for messages)
 * @returns {{dataStart: number, tensors: Map<string, SafetensorsEntry>, metadata: Record<string, string>}}
 * @throws {BundleError} naming the file (and the tensor) when the header is short, runs past the end, is not
 *   JSON, or a tensor's data lies outside the file.
 */
export function parseSafetensors(bytes, file) {
  if (bytes.byteLength < 8)
    throw new BundleError(`${file}: ${bytes.byteLength} bytes is too short for a safetensors file (the 8-byte ` +
                          `header length is missing): the file is truncated; export the bundle again`, { file });
  const view = new DataView(bytes);
  const n = Number(view.getBigUint64(0, true));
  if (8 + n > bytes.byteLength)
    throw new BundleError(`${file}: the safetensors header says it is ${n} bytes long but the file has only ` +
                          `${bytes.byteLength} bytes: the file is truncated; export the bundle again`, { file });
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(new Uint8Array(bytes, 8, n)));
  } catch (e) {
    throw new BundleError(`${file}: the safetensors header is not valid JSON (${e.message})`, { file });
  }
  const dataStart = 8 + n;
  const tensors = new Map();
  for (const [name, e] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [b, en] = e.data_offsets || [];
    if (!Number.isInteger(b) || !Number.isInteger(en) || b > en)
      throw new BundleError(`${file}: tensor '${name}' has invalid data_offsets ${JSON.stringify(e.data_offsets)}`,
                            { file, tensor: name });
    const begin = dataStart + b, end = dataStart + en;
    if (end > bytes.byteLength)
      throw new BundleError(`${file}: tensor '${name}' needs bytes [${begin}, ${end}) but the file has only ` +
                            `${bytes.byteLength} bytes: the file is truncated; export the bundle again`,
                            { file, tensor: name, offset: begin });
    tensors.set(name, { dtype: e.dtype, shape: e.shape, begin, end });
  }
  return { dataStart, tensors, metadata: header.__metadata__ || {} };
}
