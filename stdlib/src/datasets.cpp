// shadergrad — datasets: IDX (Fashion-MNIST), sklearn digits CSV, seeded splits, batching.
#include "sg/datasets.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <limits>
#include <random>
#include <string_view>

#include <fmt/format.h>
#include <zlib.h>

#include "sg/error.h"

namespace sg::data {
namespace {

/// Hint appended to "cannot open" messages for files of the default datasets.
std::string package_hint(const std::string& path) {
  std::string_view p(path);
  std::string_view base = p.substr(p.find_last_of('/') == std::string_view::npos ? 0 : p.find_last_of('/') + 1);
  const bool fashion_name = (base.starts_with("train-") || base.starts_with("t10k-")) &&
                            (base.ends_with("-images-idx3-ubyte.gz") || base.ends_with("-labels-idx1-ubyte.gz"));
  if (p.starts_with(kFashionMnistDir) || fashion_name)
    return fmt::format(" Fashion-MNIST is shipped by the Debian package 'dataset-fashion-mnist' (sudo apt-get "
                       "install dataset-fashion-mnist, or run scripts/setup.sh); it installs into {}.",
                       kFashionMnistDir);
  if (base == "digits.csv.gz")
    return fmt::format(" The 8x8 digits CSV is shipped by the Debian package 'python3-sklearn' (sudo apt-get "
                       "install python3-sklearn, or run scripts/setup.sh); it installs {}.",
                       kDigitsCsvPath);
  return "";
}

/// Whole content of a file, transparently gunzipped (zlib's gzread passes non-gzip files through unchanged).
/// `compressed` reports whether the file started with the gzip magic 1f 8b.
std::vector<uint8_t> read_maybe_gzip(const std::string& path, bool* compressed) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    int e = errno;
    throw IOError(fmt::format("cannot open '{}': {}.{}", path, e ? std::strerror(e) : "out of memory",
                              package_hint(path)));
  }
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> out;
  // read through a fixed buffer: growing `out` by 1 MiB per read zero-filled 1 MiB even for a 100-byte file (the
  // fuzz targets ran at ~140 files/s under ASan)
  constexpr size_t kChunk = 1 << 16;
  std::vector<uint8_t> chunk(kChunk);
  for (;;) {
    int got = gzread(f, chunk.data(), static_cast<unsigned>(kChunk));
    if (got < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      if (err == Z_ERRNO)
        throw IOError(fmt::format("cannot read '{}': {}.", path, std::strerror(errno)));
      throw IOError(fmt::format(
          "'{}': corrupt gzip stream ({}) after {} decompressed bytes; the file is damaged or truncated — "
          "re-download or reinstall it.{}",
          path, msg, out.size(), package_hint(path)));
    }
    if (got == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + got);
  }
  // A truncated gzip member can end reading with no error from gzread but a pending one in gzerror.
  int err = 0;
  std::string msg = gzerror(f, &err);
  if (compressed) *compressed = gzdirect(f) == 0;
  gzclose(f);
  if (err != Z_OK)
    throw IOError(fmt::format("'{}': corrupt gzip stream ({}) after {} decompressed bytes; the file is damaged "
                              "or truncated — re-download or reinstall it.",
                              path, msg, out.size()));
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

/// Parsed IDX file: dims and the offset of the payload in `bytes`.
struct Idx {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> dims;
  size_t data_offset = 0;
};

Idx read_idx(const std::string& path, uint32_t expected_magic, const char* what) {
  Idx idx;
  bool gz = false;
  idx.bytes = read_maybe_gzip(path, &gz);
  const char* kind = gz ? " (after gunzip)" : "";
  const size_t ndims = expected_magic & 0xff;
  const size_t header = 4 + 4 * ndims;
  if (idx.bytes.size() < 4)
    throw IOError(fmt::format("'{}': truncated IDX {} file: data ends at byte offset {}{}, expected at least 4 "
                              "bytes for the magic number.",
                              path, what, idx.bytes.size(), kind));
  uint32_t magic = be32(idx.bytes.data());
  if (magic != expected_magic)
    throw IOError(fmt::format("'{}': byte offset 0{}: expected IDX {} magic 0x{:08x} (unsigned bytes, {} "
                              "dimension(s)), found 0x{:08x}. Is this the right file (images vs labels)?",
                              path, kind, what, expected_magic, ndims, magic));
  if (idx.bytes.size() < header)
    throw IOError(fmt::format("'{}': truncated IDX {} header: data ends at byte offset {}{}, expected {} bytes "
                              "(magic + {} big-endian u32 dimensions).",
                              path, what, idx.bytes.size(), kind, header, ndims));
  // the payload size and also the size of one item (dims after the first: with 0 items the product is 0 but
  // Dataset::sample_size() multiplies the rest; fuzz_idx found 0 x (2^32-1) x (2^32-1))
  int64_t count = 1, item = 1;
  for (size_t d = 0; d < ndims; ++d) {
    idx.dims.push_back(be32(idx.bytes.data() + 4 + 4 * d));
    if (__builtin_mul_overflow(count, static_cast<int64_t>(idx.dims.back()), &count) ||
        (d > 0 && __builtin_mul_overflow(item, static_cast<int64_t>(idx.dims.back()), &item)) ||
        count > std::numeric_limits<int64_t>::max() - static_cast<int64_t>(header)) {
      std::string dims;
      for (size_t k = 0; k < ndims; ++k)
        dims += fmt::format("{}{}", k ? " x " : "", be32(idx.bytes.data() + 4 + 4 * k));
      throw IOError(fmt::format("'{}': byte offset 4{}: IDX {} header dimensions {} hold more than 2^63 bytes; the "
                                "header is corrupt.", path, kind, what, dims));
    }
  }
  idx.data_offset = header;
  uint64_t expected = header + static_cast<uint64_t>(count);
  if (idx.bytes.size() < expected)
    throw IOError(fmt::format("'{}': truncated IDX {} data: data ends at byte offset {}{}, expected {} bytes "
                              "({} header + {} payload). The file is incomplete — re-download it.",
                              path, what, idx.bytes.size(), kind, expected, header, count));
  return idx;
}

}  // namespace

Dataset Dataset::subset(llvm::ArrayRef<int64_t> indices) const {
  Dataset out;
  out.c = c;
  out.h = h;
  out.w = w;
  out.num_classes = num_classes;
  out.name = name + "[subset]";
  out.n = static_cast<int64_t>(indices.size());
  const int64_t ss = sample_size();
  out.images.resize(static_cast<size_t>(out.n * ss));
  out.labels.resize(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    int64_t i = indices[k];
    if (i < 0 || i >= n)
      throw ValueError(fmt::format("Dataset::subset('{}'): index {} (position {}) is outside [0, {}).", name, i,
                                   k, n));
    std::copy_n(sample(i), ss, out.images.begin() + static_cast<ptrdiff_t>(k * ss));
    out.labels[k] = labels[static_cast<size_t>(i)];
  }
  return out;
}

Dataset load_idx(const std::string& images_path, const std::string& labels_path, float scale) {
  Idx im = read_idx(images_path, 0x00000803u, "images");
  Idx lb = read_idx(labels_path, 0x00000801u, "labels");
  if (im.dims[0] != lb.dims[0])
    throw IOError(fmt::format("image/label count mismatch: '{}' holds {} images but '{}' holds {} labels. "
                              "Pass matching files (same split: train with train, t10k with t10k).",
                              images_path, im.dims[0], labels_path, lb.dims[0]));
  Dataset ds;
  ds.n = im.dims[0];
  ds.c = 1;
  ds.h = im.dims[1];
  ds.w = im.dims[2];
  const size_t count = static_cast<size_t>(ds.n * ds.h * ds.w);
  ds.images.resize(count);
  const uint8_t* px = im.bytes.data() + im.data_offset;
  for (size_t i = 0; i < count; ++i) ds.images[i] = static_cast<float>(px[i]) * scale;
  ds.labels.resize(static_cast<size_t>(ds.n));
  const uint8_t* l = lb.bytes.data() + lb.data_offset;
  int32_t maxl = -1;
  for (int64_t i = 0; i < ds.n; ++i) {
    ds.labels[static_cast<size_t>(i)] = l[i];
    maxl = std::max<int32_t>(maxl, l[i]);
  }
  ds.num_classes = maxl + 1;
  ds.name = images_path;
  return ds;
}

Dataset load_fashion_mnist(bool train, const std::string& dir) {
  const char* split = train ? "train" : "t10k";
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const std::string images = fmt::format("{}/{}-images-idx3-ubyte.gz", d, split);
  const std::string labels = fmt::format("{}/{}-labels-idx1-ubyte.gz", d, split);
  Dataset ds = load_idx(images, labels);
  if (ds.h != 28 || ds.w != 28)
    throw IOError(fmt::format("'{}': Fashion-MNIST images are 28x28, this file holds {}x{} images (byte offsets 8 "
                              "and 12 of the IDX header). Is it another dataset? Use load_idx for other sizes.",
                              images, ds.h, ds.w));
  for (int64_t i = 0; i < ds.n; ++i)
    if (ds.labels[static_cast<size_t>(i)] > 9)
      throw IOError(fmt::format("'{}': byte offset {}: label {} of sample {} is outside Fashion-MNIST's classes 0..9. "
                                "The file is corrupt or another dataset.", labels, 8 + i,
                                ds.labels[static_cast<size_t>(i)], i));
  ds.num_classes = 10;
  ds.name = train ? "fashion-mnist-train" : "fashion-mnist-test";
  return ds;
}

Dataset load_digits(const std::string& path) {
  bool gz = false;
  std::vector<uint8_t> bytes = read_maybe_gzip(path, &gz);
  Dataset ds;
  ds.c = 1;
  ds.h = 8;
  ds.w = 8;
  ds.name = "digits";
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t line_no = 0;
  size_t pos = 0;
  int32_t maxl = -1;
  std::string field;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank line
    float vals[65];
    size_t nf = 0;
    size_t start = 0;
    for (;;) {
      size_t comma = line.find(',', start);
      std::string_view f = line.substr(start, comma == std::string_view::npos ? line.size() - start : comma - start);
      if (nf < 65) {
        field.assign(f);
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(field.c_str(), &end);
        while (end && (*end == ' ' || *end == '\t')) ++end;
        if (field.empty() || end == field.c_str() || *end != '\0' || errno == ERANGE)
          throw IOError(fmt::format("'{}': line {}: field {} is '{}', not a number (expected 64 pixel values "
                                    "0..16 and a label 0..9, comma-separated).",
                                    path, line_no, nf + 1, field));
        bool is_label = nf == 64;
        double hi = is_label ? 9 : 16;
        if (!(v >= 0 && v <= hi) || v != std::floor(v))
          throw IOError(fmt::format("'{}': line {}: field {} is {}, expected an integer {} 0..{}.", path, line_no,
                                    nf + 1, field, is_label ? "label" : "pixel value", hi));
        vals[nf] = static_cast<float>(v);
      }
      ++nf;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (nf != 65)
      throw IOError(fmt::format("'{}': line {}: found {} comma-separated values, expected 65 (64 pixel values "
                                "0..16, then the label).",
                                path, line_no, nf));
    for (int i = 0; i < 64; ++i) ds.images.push_back(vals[i] / 16.0f);
    int32_t label = static_cast<int32_t>(vals[64]);
    ds.labels.push_back(label);
    maxl = std::max(maxl, label);
  }
  ds.n = static_cast<int64_t>(ds.labels.size());
  if (ds.n == 0)
    throw IOError(fmt::format("'{}': no data rows found (expected 1797 rows of 65 values).{}", path,
                              package_hint(path)));
  ds.num_classes = maxl + 1;
  return ds;
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  if (n < 0) throw ValueError(fmt::format("seeded_permutation: n = {} must be >= 0.", n));
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    uint64_t j = rng() % static_cast<uint64_t>(i + 1);
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

DigitsSplit digits_split(uint64_t seed) {
  std::vector<int64_t> p = seeded_permutation(1797, seed);
  DigitsSplit s;
  s.train.assign(p.begin(), p.begin() + 600);
  s.pool.assign(p.begin() + 600, p.begin() + 1000);
  s.test.assign(p.begin() + 1000, p.end());
  return s;
}

DigitsSplit digits_split_seed002() {
  static const int64_t order[] = {
#include "digits_seed002_split.inc"
  };
  static_assert(sizeof(order) / sizeof(order[0]) == 1797, "digits_seed002_split.inc must hold 1797 indices");
  DigitsSplit s;
  s.train.assign(order, order + 600);
  s.pool.assign(order + 600, order + 1000);
  s.test.assign(order + 1000, order + 1797);
  return s;
}

DigitsSplit digits_split_named(const std::string& name) {
  if (name == "ours") return digits_split(0);
  if (name == "seed002") return digits_split_seed002();
  throw ValueError(fmt::format("unknown digits split '{}' (choose ours: a seeded mt19937_64 permutation, or "
                               "seed002: seed 002's torch.randperm split)", name));
}

BatchIterator::BatchIterator(const Dataset& ds, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last)
    : ds_(&ds), batch_size_(batch_size), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  if (batch_size < 1)
    throw ValueError(fmt::format("BatchIterator: batch_size = {} must be >= 1.", batch_size));
  reset(0);
}

void BatchIterator::reset(int64_t epoch) {
  epoch_ = epoch;
  pos_ = 0;
  if (shuffle_) {
    order_ = seeded_permutation(ds_->n, seed_ + static_cast<uint64_t>(epoch));
  } else {
    order_.resize(static_cast<size_t>(ds_->n));
    for (int64_t i = 0; i < ds_->n; ++i) order_[static_cast<size_t>(i)] = i;
  }
}

int64_t BatchIterator::batches_per_epoch() const {
  // n / b rounded up without n + b - 1, which overflows for b near 2^63 (--batch 9223372036854775807 gave 0)
  return ds_->n / batch_size_ + (!drop_last_ && ds_->n % batch_size_ != 0 ? 1 : 0);
}

bool BatchIterator::next(Batch& out) {
  const int64_t n = ds_->n;
  int64_t b = std::min(batch_size_, n - pos_);
  if (b <= 0 || (drop_last_ && b < batch_size_)) {
    reset(epoch_ + 1);
    return false;
  }
  const int64_t ss = ds_->sample_size();
  out.size = b;
  out.images.resize(static_cast<size_t>(b * ss));
  out.labels.resize(static_cast<size_t>(b));
  out.indices.resize(static_cast<size_t>(b));
  for (int64_t k = 0; k < b; ++k) {
    int64_t i = order_[static_cast<size_t>(pos_ + k)];
    out.indices[static_cast<size_t>(k)] = i;
    std::copy_n(ds_->sample(i), ss, out.images.begin() + static_cast<ptrdiff_t>(k * ss));
    out.labels[static_cast<size_t>(k)] = static_cast<float>(ds_->labels[static_cast<size_t>(i)]);
  }
  pos_ += b;
  return true;
}

// ---- words (the character language models' data) ----

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool word_is_validation(const std::string& word) { return fnv1a64(word) % 10 == 0; }

Words load_words(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    const int e = errno;
    throw IOError(fmt::format("cannot open '{}': {}.{}", path, e ? std::strerror(e) : "unreadable",
                              path == kWordsPath ? " The English word list is shipped by the Debian package 'wamerican' "
                                                   "(sudo apt-get install wamerican, or run scripts/setup.sh)."
                                                 : ""));
  }
  std::set<std::string> words;
  std::string line;
  while (std::getline(f, line)) {
    bool ok = !line.empty();
    for (char& c : line) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      ok = ok && c >= 'a' && c <= 'z';
    }
    if (ok) words.insert(line);
  }
  if (f.bad()) throw IOError(fmt::format("'{}': read error", path));
  if (words.empty())
    throw IOError(fmt::format("'{}': no word made only of the letters a-z (after lower-casing) in the file: the words "
                              "dataset wants one word per line",
                              path));
  Words w;
  for (const std::string& s : words) (word_is_validation(s) ? w.validation : w.train).push_back(s);
  return w;
}

int32_t char_token(char c) {
  if (c == kBoundaryChar) return 0;
  if (c >= 'a' && c <= 'z') return c - 'a' + 1;
  return -1;
}

char token_char(int32_t token) {
  if (token == 0) return kBoundaryChar;
  if (token >= 1 && token <= 26) return static_cast<char>('a' + token - 1);
  throw ValueError(fmt::format("token_char: token {} is not in the character vocabulary (0 = '.', 1..26 = a..z)", token));
}

int64_t WordRows::targets() const {
  double s = 0;
  for (float m : mask) s += m;
  return static_cast<int64_t>(s);
}

WordRows make_word_rows(const std::vector<std::string>& words, int64_t context) {
  if (context < 2) throw ValueError(fmt::format("make_word_rows: context must be >= 2, got {}", context));
  WordRows r;
  r.n = static_cast<int64_t>(words.size());
  r.context = context;
  const size_t T = static_cast<size_t>(context);
  r.x.assign(words.size() * T, 0.f);
  r.y.assign(words.size() * T, 0.f);
  r.mask.assign(words.size() * T, 0.f);
  std::vector<int32_t> s;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    s.assign(1, 0);
    for (size_t k = 0; k < w.size(); ++k) {
      const int32_t t = char_token(w[k]);
      if (t <= 0)
        throw ValueError(fmt::format("make_word_rows: word {} '{}' has '{}' at position {}: words hold a-z only", i, w,
                                     w[k], k + 1));
      s.push_back(t);
    }
    s.push_back(0);
    const size_t n = std::min(T, s.size() - 1);
    for (size_t t = 0; t < n; ++t) {
      r.x[i * T + t] = static_cast<float>(s[t]);
      r.y[i * T + t] = static_cast<float>(s[t + 1]);
      r.mask[i * T + t] = 1.f;
    }
  }
  return r;
}

WordRows take_rows(const WordRows& rows, llvm::ArrayRef<int64_t> indices) {
  WordRows r;
  r.n = static_cast<int64_t>(indices.size());
  r.context = rows.context;
  const size_t T = static_cast<size_t>(rows.context);
  r.x.resize(indices.size() * T);
  r.y.resize(indices.size() * T);
  r.mask.resize(indices.size() * T);
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (i < 0 || i >= rows.n)
      throw ValueError(fmt::format("take_rows: index {} is outside the {} rows", i, rows.n));
    const size_t o = static_cast<size_t>(i) * T;
    std::copy_n(rows.x.begin() + static_cast<ptrdiff_t>(o), T, r.x.begin() + static_cast<ptrdiff_t>(k * T));
    std::copy_n(rows.y.begin() + static_cast<ptrdiff_t>(o), T, r.y.begin() + static_cast<ptrdiff_t>(k * T));
    std::copy_n(rows.mask.begin() + static_cast<ptrdiff_t>(o), T, r.mask.begin() + static_cast<ptrdiff_t>(k * T));
  }
  return r;
}

}  // namespace sg::data
