// shadergrad — datasets: MNIST-style IDX files (Fashion-MNIST), sklearn's 8x8 digits, seeded splits, batching.
//
// Everything here is plain CPU data (std::vector<float>), independent of the graph IR: the trainer copies a
// Batch into its input tensors. All loaders throw sg::IOError with a message naming the file, the byte offset
// (or line) and how to fix it (e.g. which Debian package ships the default data).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

namespace sg::data {

/// Default location of Fashion-MNIST (Debian package `dataset-fashion-mnist`).
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
/// Default location of sklearn's 8x8 digits (Debian package `python3-sklearn`).
inline constexpr const char* kDigitsCsvPath = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

/// An in-memory labelled image dataset.
///   images: n*c*h*w floats, row-major N x C x H x W (sample-major, then channel, row, column), dtype f32.
///   labels: n class indices in [0, num_classes).
struct Dataset {
  std::vector<float> images;
  std::vector<int32_t> labels;
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t num_classes = 0;  ///< max label + 1 for loaded data (10 for Fashion-MNIST and digits)
  std::string name;         ///< e.g. "fashion-mnist-train", "digits"

  /// Elements of one sample (c*h*w).
  int64_t sample_size() const { return c * h * w; }
  /// Pointer to sample i's c*h*w floats. Precondition: 0 <= i < n.
  const float* sample(int64_t i) const { return images.data() + i * sample_size(); }
  /// A new dataset holding the samples at `indices`, in that order (duplicates allowed).
  /// Throws sg::ValueError if an index is outside [0, n). num_classes and name (+ "[subset]") are kept.
  Dataset subset(llvm::ArrayRef<int64_t> indices) const;
};

/// Load an MNIST IDX pair: images (magic 0x00000803: u8, 3 dims N x H x W, big-endian u32 dims) and labels
/// (magic 0x00000801: u8, 1 dim N). Each file may be gzip-compressed (detected by the 1f 8b magic) or raw.
/// Pixels are converted as float(byte) * scale; the result has c = 1. Byte offsets in error messages refer
/// to the decompressed stream (identical to the file offset for raw files).
/// Throws sg::IOError: missing/unreadable file (names the file; for files under kFashionMnistDir also the
/// Debian package `dataset-fashion-mnist`), wrong magic (file, offset 0, expected vs found), corrupt gzip
/// stream, truncated data (file, offset where data ended, bytes expected), image/label count mismatch
/// (both counts, both files).
Dataset load_idx(const std::string& images_path, const std::string& labels_path, float scale = 1.0f / 255.0f);

/// Fashion-MNIST (Xiao et al. 2017) from `dir`: train (60000) or test ("t10k", 10000) split, 1x28x28,
/// pixels / 255 in [0, 1], labels 0..9. Files: {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
/// Throws sg::IOError as load_idx.
Dataset load_fashion_mnist(bool train, const std::string& dir = kFashionMnistDir);

/// sklearn's copy of the UCI optical-recognition 8x8 digits (gzip CSV: one row per sample, 64 pixel values
/// 0..16 in row-major order, then the label 0..9; 1797 rows in the shipped file). Pixels are divided by 16
/// (as torch.tensor(digits.images) / 16), shape 1x8x8, name "digits".
/// Throws sg::IOError: missing file (names the Debian package `python3-sklearn`), a malformed row (file, 1-based
/// line number, what was found), or no rows.
Dataset load_digits(const std::string& path = kDigitsCsvPath);

/// The generated "shapes" task (stdlib/src/shapes.cpp): `n` gray images 1 x side x side, pixels in [0, 1], one
/// filled shape each, label = its class: 0 disc, 1 square, 2 triangle, 3 plus (kShapeNames), classes in rotation
/// (sample i has class i % 4). Per sample, from std::mt19937 seeded with `seed` (24-bit uniform draws, bit-exact
/// everywhere): radius 0.12..0.34 of the side, centre so that the shape's circle stays inside, rotation 0..2 pi,
/// background 0.1..0.4, foreground 0.3..0.8 brighter, uniform noise +-0.1 per pixel, clamped to [0, 1].
/// name "shapes", num_classes 4. Throws ValueError for n < 1 or side < 16.
inline constexpr int64_t kShapeClasses = 4;
inline constexpr const char* kShapeNames[kShapeClasses] = {"disc", "square", "triangle", "plus"};
Dataset make_shapes(int64_t n, uint64_t seed, int64_t side = 128);

/// A seeded random permutation of 0..n-1: Fisher–Yates driven by std::mt19937_64(seed), for i = n-1 down to 1
/// swap(p[i], p[j]) with j = rng() % (i + 1) (modulo bias < 2^-50 here). Deterministic across platforms and
/// standard libraries (std::uniform_int_distribution is deliberately not used: it is implementation-defined).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

/// Index split of the 1797 digits: permutation p = seeded_permutation(1797, seed), then
/// train = p[0:600], pool = p[600:1000] (treated as unlabeled), test = p[1000:1797] (797), each in permutation
/// order. The sizes match the seed article's split; the membership does not (it used torch.randperm: its exact
/// indices are digits_split_seed002()).
struct DigitsSplit {
  std::vector<int64_t> train, pool, test;
};
DigitsSplit digits_split(uint64_t seed = 0);

/// Seed 002's own split: order = torch.randperm(1797, generator=torch.Generator().manual_seed(0)), train =
/// order[:600], pool = order[600:1000], test = order[1000:]. The permutation was computed with Debian's torch by
/// scripts/seed002/make_split.py and is compiled in (stdlib/src/digits_seed002_split.inc): no torch at run time.
DigitsSplit digits_split_seed002();

/// A digits split by name: "ours" = digits_split(0), "seed002" = digits_split_seed002().
/// Throws sg::ValueError naming the choices for other names.
DigitsSplit digits_split_named(const std::string& name);

/// Default location of the English word list (Debian package `wamerican`: SCOWL's "american-english", one word per
/// line, UTF-8).
inline constexpr const char* kWordsPath = "/usr/share/dict/words";

/// The "words" dataset of the character language models (`shadergrad train --model charlm|lstm`), makemore-style.
/// Rule (load_words): every line of the file is lower-cased (ASCII A-Z -> a-z only; bytes >= 0x80 are left as they
/// are), a line is kept iff it is non-empty and every byte is then in a-z (this drops possessives such as "aaron's",
/// accented words such as "éclair" and anything with a digit, hyphen or space), and duplicates are removed ("Bill"
/// and "bill" are one word); the words are sorted (byte order). Split BY WORD, deterministic and independent of the
/// file's order: a word is a validation word iff fnv1a64(word) % 10 == 0 (word_is_validation; ~10 %), else a
/// training word. On Debian 12's wamerican (2020.12.07-2) this gives 73,445 words, 66,112 training and 7,333
/// validation (66,577 validation characters, the end boundaries included), 1 to 22 letters.
struct Words {
  std::vector<std::string> train, validation;  ///< each sorted
  std::string name = "words";
};

/// FNV-1a 64-bit (offset basis 14695981039346656037, prime 1099511628211) of the word's bytes.
uint64_t fnv1a64(const std::string& s);
/// The split rule above: fnv1a64(word) % 10 == 0.
bool word_is_validation(const std::string& word);

/// Reads the word list at `path` with the rule above. Throws sg::IOError: a missing or unreadable file (names the
/// file and the Debian package `wamerican`), or a file without any word the rule keeps.
Words load_words(const std::string& path = kWordsPath);

/// The character vocabulary of the words models: token 0 is the word boundary '.', used both as the start and the
/// end of a word (makemore's convention), tokens 1..26 are 'a'..'z'. No padding token: padded positions hold the
/// boundary token and are masked out of the loss (WordRows).
inline constexpr int64_t kCharVocab = 27;
inline constexpr char kBoundaryChar = '.';
/// 'a'..'z' -> 1..26, '.' -> 0, anything else -> -1.
int32_t char_token(char c);
/// The inverse of char_token for 0..26; ValueError for other tokens.
char token_char(int32_t token);

/// Words as fixed-length training rows, one word per row (nats per character are then the makemore measure: each
/// word is predicted from its start alone). Word w = c_1..c_L becomes the token sequence
///   s = [0, tok(c_1), ..., tok(c_L), 0]       (boundary, letters, boundary; L + 2 tokens)
/// and with context T the row's inputs are x[t] = s[t] and targets y[t] = s[t + 1] for t < min(T, L + 1), mask 1;
/// positions t >= L + 1 are padding: x[t] = y[t] = 0, mask 0. A word longer than T - 1 letters is cut: its row holds
/// its first T targets (the end boundary is then not predicted). The loss is the mean of -log p(y[t] | x[0..t]) over
/// the positions with mask 1: nats per character, the end-of-word boundary counting as one character.
///   x, y: n x T floats holding exact token ids (i32 inputs); mask: n x T floats 0/1; n = words.size().
struct WordRows {
  std::vector<float> x, y, mask;
  int64_t n = 0, context = 0;
  /// Sum of the mask: the number of predicted characters.
  int64_t targets() const;
};
/// Throws sg::ValueError for context < 2 or a word with a character outside a-z.
WordRows make_word_rows(const std::vector<std::string>& words, int64_t context);
/// Rows `indices` of `rows` (in that order) as one batch; ValueError for an index outside [0, n).
WordRows take_rows(const WordRows& rows, llvm::ArrayRef<int64_t> indices);

/// One mini-batch. images: size*c*h*w floats (B x C x H x W); labels: size floats holding exact integer class
/// indices (floats so they can be uploaded to a float tensor directly); indices: the dataset rows used.
struct Batch {
  std::vector<float> images;
  std::vector<float> labels;
  std::vector<int64_t> indices;
  int64_t size = 0;  ///< B: batch_size, or fewer for the last partial batch
};

/// Iterates a Dataset in mini-batches, epoch after epoch.
/// Epoch e visits every sample exactly once: in order 0..n-1 if !shuffle, else in the order
/// seeded_permutation(n, seed + e). The last partial batch is returned unless drop_last is set.
/// Usage:  BatchIterator it(ds, 64, true, 42);  Batch b;  while (it.next(b)) { ... }  // one epoch
/// After next() returns false the iterator has moved to the next epoch; the next call starts it.
/// The Dataset must outlive the iterator.
class BatchIterator {
 public:
  /// Throws sg::ValueError if batch_size < 1.
  BatchIterator(const Dataset& ds, int64_t batch_size, bool shuffle = true, uint64_t seed = 0,
                bool drop_last = false);

  /// Fill `out` with the next batch of the current epoch; false (out untouched) when the epoch is done.
  bool next(Batch& out);
  /// Restart at the beginning of epoch `epoch` (re-derives the order from seed + epoch).
  void reset(int64_t epoch = 0);

  int64_t epoch() const { return epoch_; }
  int64_t batch_size() const { return batch_size_; }
  /// Batches per epoch: ceil(n / B), or floor(n / B) with drop_last.
  int64_t batches_per_epoch() const;
  /// The sample order of the current epoch.
  const std::vector<int64_t>& order() const { return order_; }

 private:
  const Dataset* ds_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t pos_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace sg::data
