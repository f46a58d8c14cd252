// Word-completion page — the sampler of `shadergrad sample` (sg::lm::sample_token and sample_words, stdlib/src/lm.cpp)
// in JavaScript, so a seed gives the page the words the native command prints for the same weights:
//   - std::mt19937_64 (the C++ standard's 64-bit Mersenne twister: n 312, m 156, r 31, a 0xB5026F5AA96619E9,
//     u 29 d 0x5555555555555555, s 17 b 0x71D67FFFEDA60000, t 37 c 0xFFF7EEE000000000, l 43, f 6364136223846793005)
//     over BigInt;
//   - a draw: u = (rng() >> 11) * 2^-53 (uniform in [0, 1)) times the sum of p_k = exp((l_k - l_max) / T) in f64; the
//     token is the first k whose running sum of p exceeds u; temperature 0 is the first argmax (no draw);
//   - words: rows [boundary, prefix...], at each position t one infer run, every unfinished row in order draws its
//     next token; a row ends at the boundary token (0) or after `context` letters.

const N = 312, M = 156;
const MATRIX_A = 0xB5026F5AA96619E9n, UPPER = 0xFFFFFFFF80000000n, LOWER = 0x7FFFFFFFn;

/** std::mt19937_64 seeded with `seed` (a non-negative integer); next() returns the next 64-bit BigInt. */
export class MT19937_64 {
  constructor(seed) {
    this.mt = new BigUint64Array(N);
    this.mt[0] = BigInt.asUintN(64, BigInt(seed));
    for (let i = 1; i < N; ++i) {
      const p = this.mt[i - 1];
      this.mt[i] = 6364136223846793005n * (p ^ (p >> 62n)) + BigInt(i);  // stored mod 2^64
    }
    this.i = N;
  }
  twist() {
    const mt = this.mt;
    for (let i = 0; i < N; ++i) {
      const x = (mt[i] & UPPER) | (mt[(i + 1) % N] & LOWER);
      let xa = x >> 1n;
      if (x & 1n) xa ^= MATRIX_A;
      mt[i] = mt[(i + M) % N] ^ xa;
    }
    this.i = 0;
  }
  next() {
    if (this.i >= N) this.twist();
    let x = this.mt[this.i++];
    x ^= (x >> 29n) & 0x5555555555555555n;
    x ^= (x << 17n) & 0x71D67FFFEDA60000n;
    x ^= (x << 37n) & 0xFFF7EEE000000000n;
    x ^= x >> 43n;
    return BigInt.asUintN(64, x);
  }
}

/** sg::lm::sample_token: one token from logits[off .. off + vocab) at `temperature` (>= 0). */
export function sampleToken(logits, off, vocab, temperature, rng) {
  let best = 0;
  for (let k = 1; k < vocab; ++k) if (logits[off + k] > logits[off + best]) best = k;
  if (temperature === 0) return best;
  const p = new Float64Array(vocab);
  let total = 0;
  for (let k = 0; k < vocab; ++k) total += p[k] = Math.exp((logits[off + k] - logits[off + best]) / temperature);
  const u = Number(rng.next() >> 11n) * 2 ** -53 * total;
  let acc = 0, last = best;
  for (let k = 0; k < vocab; ++k) {
    if (p[k] <= 0) continue;
    last = k;
    acc += p[k];
    if (acc > u) return k;
  }
  return last;
}

/** Tokens of a prefix: A-Z lower-cased, then every character must be a-z (Error naming it otherwise), fewer than
 * `context` letters. */
export function encodePrefix(prefix, vocabChars, context) {
  const out = [];
  [...prefix.toLowerCase()].forEach((c, i) => {
    const t = vocabChars.indexOf(c);
    if (t <= 0) throw new Error(`'${prefix}': character '${c}' at position ${i + 1} is not a letter a-z`);
    out.push(t);
  });
  if (out.length >= context)
    throw new Error(`'${prefix}' has ${out.length} letters: the model's context ${context} leaves room for ${context - 1}`);
  return out;
}

/**
 * sg::lm::sample_words with `infer(rows)` (an Int32Array of n x context tokens -> Promise of the logits, n x context
 * x vocab): n words that start with `prefix`. Returns {words, rows} (the final token rows).
 */
export async function sampleWords({ infer, n, context, vocabChars, prefix, temperature, seed }) {
  const vocab = vocabChars.length;
  const pre = encodePrefix(prefix, vocabChars, context);
  const rows = new Int32Array(n * context);
  const words = new Array(n).fill(prefix.toLowerCase());
  for (let r = 0; r < n; ++r) pre.forEach((t, k) => { rows[r * context + 1 + k] = t; });
  const done = new Array(n).fill(false);
  const rng = new MT19937_64(seed);
  for (let t = pre.length; t < context; ++t) {
    const logits = await infer(rows);
    let any = false;
    for (let r = 0; r < n; ++r) {
      if (done[r]) continue;
      const tok = sampleToken(logits, (r * context + t) * vocab, vocab, temperature, rng);
      if (tok === 0) { done[r] = true; continue; }
      words[r] += vocabChars[tok];
      if (t + 1 < context) rows[r * context + t + 1] = tok;
      any = true;
    }
    if (!any) break;
  }
  return { words, rows };
}

/** data::make_word_rows for a batch: words (a-z strings) -> {x, y, mask} (n x context), x/y Int32Array tokens,
 * mask Float32Array 0/1; a word longer than context - 1 letters keeps its first `context` targets. */
export function wordRows(words, vocabChars, context) {
  const n = words.length;
  const x = new Int32Array(n * context), y = new Int32Array(n * context), mask = new Float32Array(n * context);
  words.forEach((w, r) => {
    const s = [0, ...[...w].map((c) => vocabChars.indexOf(c)), 0];
    for (let t = 0; t < Math.min(context, w.length + 1); ++t) {
      x[r * context + t] = s[t];
      y[r * context + t] = s[t + 1];
      mask[r * context + t] = 1;
    }
  });
  return { x, y, mask };
}
