// Tests for sg/datasets.h: IDX loading (raw + gzip, every error message), real Fashion-MNIST checked against an
// independent Python reader, sklearn digits checked against `zcat | head`, seeded splits and batching.
#include <catch2/catch.hpp>

#include "test_util.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <limits>
#include <string>
#include <vector>

#include <zlib.h>

#include "sg/datasets.h"
#include "sg/error.h"

namespace fs = std::filesystem;
using namespace sg::data;
using Catch::Matchers::Contains;

namespace {

using sg::testing::TempDir;

void write_raw(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  v.push_back(uint8_t(x >> 24));
  v.push_back(uint8_t(x >> 16));
  v.push_back(uint8_t(x >> 8));
  v.push_back(uint8_t(x));
}

/// IDX images file: magic 0x803, dims n,h,w, then pixels (value of pixel p of image i = (i*31 + p*7) % 256).
std::vector<uint8_t> idx_images(uint32_t n, uint32_t h, uint32_t w, uint32_t payload_images) {
  std::vector<uint8_t> v;
  put_be32(v, 0x00000803);
  put_be32(v, n);
  put_be32(v, h);
  put_be32(v, w);
  for (uint32_t i = 0; i < payload_images; ++i)
    for (uint32_t p = 0; p < h * w; ++p) v.push_back(uint8_t((i * 31 + p * 7) % 256));
  return v;
}

std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> v;
  put_be32(v, 0x00000801);
  put_be32(v, static_cast<uint32_t>(labels.size()));
  v.insert(v.end(), labels.begin(), labels.end());
  return v;
}

std::string run(const std::string& cmd) { return sg::testing::run_command(cmd); }

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const sg::IOError& e) {
    return e.what();
  }
  FAIL("expected sg::IOError");
  return "";
}

}  // namespace

TEST_CASE("load_idx reads raw and gzip IDX files identically", "[datasets][idx]") {
  TempDir dir;
  auto im = idx_images(3, 2, 4, 3);
  auto lb = idx_labels({7, 0, 2});
  write_raw(dir / "im.raw", im);
  write_raw(dir / "lb.raw", lb);
  write_gz(dir / "im.gz", im);
  write_gz(dir / "lb.gz", lb);
  REQUIRE(read_bytes(dir / "im.gz")[0] == 0x1f);  // really compressed

  for (auto [ip, lp] : {std::pair{dir / "im.raw", dir / "lb.raw"}, std::pair{dir / "im.gz", dir / "lb.gz"},
                        std::pair{dir / "im.gz", dir / "lb.raw"}}) {
    Dataset ds = load_idx(ip, lp);
    CHECK(ds.n == 3);
    CHECK(ds.c == 1);
    CHECK(ds.h == 2);
    CHECK(ds.w == 4);
    CHECK(ds.num_classes == 8);
    CHECK(ds.labels == std::vector<int32_t>{7, 0, 2});
    REQUIRE(ds.images.size() == 24);
    for (uint32_t i = 0; i < 3; ++i)
      for (uint32_t p = 0; p < 8; ++p) CHECK(ds.images[i * 8 + p] == float((i * 31 + p * 7) % 256) * (1.0f / 255));
  }
  Dataset scaled = load_idx(dir / "im.raw", dir / "lb.raw", 1.0f);
  CHECK(scaled.images[9] == float((31 + 7) % 256));
}

TEST_CASE("load_idx error messages name file, offset and expectation", "[datasets][idx]") {
  TempDir dir;
  write_raw(dir / "im", idx_images(3, 2, 4, 3));
  write_raw(dir / "lb", idx_labels({1, 2, 3}));

  SECTION("missing file") {
    std::string m = error_of([&] { load_idx(dir / "nope", dir / "lb"); });
    CHECK_THAT(m, Contains(dir / "nope"));
    CHECK_THAT(m, Contains("No such file"));
    CHECK_THAT(m, !Contains("dataset-fashion-mnist"));
  }
  SECTION("missing Fashion-MNIST names the Debian package") {
    std::string m = error_of([&] { load_fashion_mnist(true, dir.path.string()); });
    CHECK_THAT(m, Contains(dir / "train-images-idx3-ubyte.gz"));
    CHECK_THAT(m, Contains("dataset-fashion-mnist"));
    m = error_of([&] { load_idx(std::string(kFashionMnistDir) + "/missing.gz", dir / "lb"); });
    CHECK_THAT(m, Contains("dataset-fashion-mnist"));
  }
  SECTION("wrong magic (labels passed as images)") {
    std::string m = error_of([&] { load_idx(dir / "lb", dir / "lb"); });
    CHECK_THAT(m, Contains(dir / "lb"));
    CHECK_THAT(m, Contains("byte offset 0"));
    CHECK_THAT(m, Contains("0x00000803"));
    CHECK_THAT(m, Contains("found 0x00000801"));
  }
  SECTION("truncated payload (raw and gzip)") {
    auto im = idx_images(3, 2, 4, 2);  // header says 3 images, only 2 present: 16 + 16 bytes
    im.push_back(5);                   // plus one byte of the third
    write_raw(dir / "short", im);
    write_gz(dir / "short.gz", im);
    for (const std::string& p : {dir / "short", dir / "short.gz"}) {
      std::string m = error_of([&] { load_idx(p, dir / "lb"); });
      CHECK_THAT(m, Contains(p));
      CHECK_THAT(m, Contains("byte offset 33"));
      CHECK_THAT(m, Contains("expected 40 bytes"));
    }
  }
  SECTION("truncated header") {
    auto im = idx_images(3, 2, 4, 0);
    im.resize(10);
    write_raw(dir / "hdr", im);
    std::string m = error_of([&] { load_idx(dir / "hdr", dir / "lb"); });
    CHECK_THAT(m, Contains(dir / "hdr"));
    CHECK_THAT(m, Contains("byte offset 10"));
    CHECK_THAT(m, Contains("expected 16 bytes"));
  }
  SECTION("corrupt gzip stream (compressed file cut in half)") {
    write_gz(dir / "full.gz", idx_images(50, 8, 8, 50));
    auto gz = read_bytes(dir / "full.gz");
    gz.resize(gz.size() / 2);
    write_raw(dir / "cut.gz", gz);
    std::string m = error_of([&] { load_idx(dir / "cut.gz", dir / "lb"); });
    CHECK_THAT(m, Contains(dir / "cut.gz"));
    CHECK_THAT(m, Contains("gzip"));
  }
  SECTION("image/label count mismatch names both counts and files") {
    write_raw(dir / "lb2", idx_labels({1, 2}));
    std::string m = error_of([&] { load_idx(dir / "im", dir / "lb2"); });
    CHECK_THAT(m, Contains(dir / "im"));
    CHECK_THAT(m, Contains(dir / "lb2"));
    CHECK_THAT(m, Contains("3 images"));
    CHECK_THAT(m, Contains("2 labels"));
  }
}

TEST_CASE("Fashion-MNIST loads and matches an independent Python reader", "[datasets][fashion]") {
  Dataset train = load_fashion_mnist(true);
  Dataset test = load_fashion_mnist(false);
  CHECK(train.n == 60000);
  CHECK(test.n == 10000);
  for (const Dataset* d : {&train, &test}) {
    CHECK(d->c == 1);
    CHECK(d->h == 28);
    CHECK(d->w == 28);
    CHECK(d->num_classes == 10);
    REQUIRE(d->images.size() == static_cast<size_t>(d->n) * 784);
    auto [mn, mx] = std::minmax_element(d->images.begin(), d->images.end());
    CHECK(*mn == 0.0f);
    CHECK(*mx == 1.0f);
    // Fashion-MNIST is balanced: 6000 (train) / 1000 (test) samples per class.
    std::array<int64_t, 10> counts{};
    for (int32_t l : d->labels) {
      REQUIRE(l >= 0);
      REQUIRE(l < 10);
      ++counts[static_cast<size_t>(l)];
    }
    for (int64_t c : counts) CHECK(c == d->n / 10);
  }
  // Independent reader: Python's gzip + struct on the same file.
  std::string py = run(
      "/usr/bin/python3 -c \"import gzip,struct; d=gzip.open('" + std::string(kFashionMnistDir) +
      "/train-images-idx3-ubyte.gz').read(); n,h,w=struct.unpack('>III', d[4:16]); "
      "l=gzip.open('" + std::string(kFashionMnistDir) + "/train-labels-idx1-ubyte.gz').read(); "
      "print(n, h, w, sum(d[16:16+784]), sum(d[16+784*59999:16+784*60000]), l[8], l[8+59999])\"");
  std::istringstream ss(py);
  int64_t n, h, w, sum0, sumlast, l0, llast;
  ss >> n >> h >> w >> sum0 >> sumlast >> l0 >> llast;
  REQUIRE(ss);
  CHECK(n == 60000);
  CHECK(h == 28);
  CHECK(w == 28);
  auto pixel_sum = [&](int64_t i) {
    int64_t s = 0;
    for (int64_t p = 0; p < 784; ++p) s += std::lround(train.sample(i)[p] * 255.0f);
    return s;
  };
  CHECK(pixel_sum(0) == sum0);
  CHECK(pixel_sum(59999) == sumlast);
  CHECK(train.labels[0] == l0);
  CHECK(train.labels[59999] == llast);
}

TEST_CASE("sklearn digits load and match zcat", "[datasets][digits]") {
  Dataset d = load_digits();
  CHECK(d.n == 1797);
  CHECK(d.c == 1);
  CHECK(d.h == 8);
  CHECK(d.w == 8);
  CHECK(d.num_classes == 10);
  CHECK(d.name == "digits");
  std::array<int64_t, 10> counts{};
  for (int32_t l : d.labels) ++counts[static_cast<size_t>(l)];
  CHECK(std::accumulate(counts.begin(), counts.end(), int64_t{0}) == 1797);
  for (int64_t c : counts) CHECK(c >= 170);  // roughly balanced (174..183 per class)
  for (float v : d.images) {
    REQUIRE(v >= 0.0f);
    REQUIRE(v <= 1.0f);
  }
  for (const char* cmd : {"head -1", "tail -1"}) {
    std::string line = run(std::string("zcat ") + kDigitsCsvPath + " | " + cmd);
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    std::vector<double> vals;
    double v;
    while (ss >> v) vals.push_back(v);
    REQUIRE(vals.size() == 65);
    const int64_t row = std::string(cmd) == "head -1" ? 0 : 1796;
    for (int p = 0; p < 64; ++p) CHECK(d.sample(row)[p] == static_cast<float>(vals[static_cast<size_t>(p)] / 16.0));
    CHECK(d.labels[static_cast<size_t>(row)] == static_cast<int32_t>(vals[64]));
  }
}

TEST_CASE("load_digits errors name file, line and what was found", "[datasets][digits]") {
  TempDir dir;
  std::string ok;
  for (int i = 0; i < 64; ++i) ok += std::to_string(i % 17) + ",";
  ok += "3\n";
  SECTION("wrong field count") {
    std::string short_row;
    for (int i = 0; i < 62; ++i) short_row += "1,";
    short_row += "2\n";  // 63 values
    std::string text = ok + short_row;
    write_gz(dir / "bad.csv.gz", std::vector<uint8_t>(text.begin(), text.end()));
    std::string m = error_of([&] { load_digits(dir / "bad.csv.gz"); });
    CHECK_THAT(m, Contains(dir / "bad.csv.gz"));
    CHECK_THAT(m, Contains("line 2"));
    CHECK_THAT(m, Contains("found 63"));
  }
  SECTION("non-numeric field") {
    std::string text = "1,abc," + ok;
    write_gz(dir / "bad2.csv.gz", std::vector<uint8_t>(text.begin(), text.end()));
    std::string m = error_of([&] { load_digits(dir / "bad2.csv.gz"); });
    CHECK_THAT(m, Contains("line 1"));
    CHECK_THAT(m, Contains("field 2"));
    CHECK_THAT(m, Contains("'abc'"));
  }
  SECTION("pixel out of range") {
    std::string text = ok + "17," + ok.substr(ok.find(',') + 1);
    write_gz(dir / "bad3.csv.gz", std::vector<uint8_t>(text.begin(), text.end()));
    std::string m = error_of([&] { load_digits(dir / "bad3.csv.gz"); });
    CHECK_THAT(m, Contains("line 2"));
    CHECK_THAT(m, Contains("17"));
  }
  SECTION("valid tiny file (raw, not gzip)") {
    std::string text = ok + ok;
    write_raw(dir / "ok.csv", std::vector<uint8_t>(text.begin(), text.end()));
    Dataset d = load_digits(dir / "ok.csv");
    CHECK(d.n == 2);
    CHECK(d.labels == std::vector<int32_t>{3, 3});
    CHECK(d.images[16] == 16.0f / 16.0f);
    CHECK(d.images[17] == 0.0f);
  }
  SECTION("missing file names python3-sklearn") {
    std::string m = error_of([&] { load_digits(dir / "digits.csv.gz"); });
    CHECK_THAT(m, Contains(dir / "digits.csv.gz"));
    CHECK_THAT(m, Contains("python3-sklearn"));
  }
}

TEST_CASE("digits_split: sizes, disjoint, covering, seeded", "[datasets][split]") {
  DigitsSplit a = digits_split(0), b = digits_split(0), c = digits_split(1);
  CHECK(a.train.size() == 600);
  CHECK(a.pool.size() == 400);
  CHECK(a.test.size() == 797);
  std::vector<int64_t> all = a.train;
  all.insert(all.end(), a.pool.begin(), a.pool.end());
  all.insert(all.end(), a.test.begin(), a.test.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> iota(1797);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(all == iota);  // disjoint and covering
  CHECK(a.train == b.train);
  CHECK(a.pool == b.pool);
  CHECK(a.test == b.test);
  CHECK(a.train != c.train);
  // The permutation is not the identity and differs per seed.
  std::vector<int64_t> p = seeded_permutation(1797, 0);
  CHECK(p != iota);
  CHECK(std::vector<int64_t>(p.begin(), p.begin() + 600) == a.train);
  CHECK(seeded_permutation(0, 5).empty());
  CHECK(seeded_permutation(1, 5) == std::vector<int64_t>{0});
}

TEST_CASE("Fisher-Yates matches the documented recipe step by step", "[datasets][split]") {
  // Recompute by hand for n = 5 with the same engine: p[i] <-> p[rng() % (i+1)], i = 4..1.
  std::mt19937_64 rng(123);
  std::vector<int64_t> p{0, 1, 2, 3, 4};
  for (int i = 4; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[rng() % static_cast<uint64_t>(i + 1)]);
  CHECK(seeded_permutation(5, 123) == p);
}

TEST_CASE("BatchIterator covers each sample once per epoch", "[datasets][batch]") {
  Dataset ds;
  ds.n = 10;
  ds.c = 1;
  ds.h = 1;
  ds.w = 2;
  ds.num_classes = 10;
  for (int i = 0; i < 10; ++i) {
    ds.images.push_back(float(i));
    ds.images.push_back(float(100 + i));
    ds.labels.push_back(9 - i);
  }

  SECTION("shuffled, last partial batch included") {
    BatchIterator it(ds, 4, true, 7);
    CHECK(it.batches_per_epoch() == 3);
    std::vector<std::vector<int64_t>> epochs;
    for (int e = 0; e < 3; ++e) {
      Batch b;
      std::vector<int64_t> seen, sizes;
      while (it.next(b)) {
        sizes.push_back(b.size);
        REQUIRE(b.images.size() == static_cast<size_t>(b.size) * 2);
        REQUIRE(b.labels.size() == static_cast<size_t>(b.size));
        for (int64_t k = 0; k < b.size; ++k) {
          int64_t i = b.indices[static_cast<size_t>(k)];
          CHECK(b.images[static_cast<size_t>(2 * k)] == float(i));
          CHECK(b.images[static_cast<size_t>(2 * k + 1)] == float(100 + i));
          CHECK(b.labels[static_cast<size_t>(k)] == float(9 - i));
          seen.push_back(i);
        }
      }
      CHECK(sizes == std::vector<int64_t>{4, 4, 2});
      epochs.push_back(seen);
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> iota(10);
      std::iota(iota.begin(), iota.end(), 0);
      CHECK(seen == iota);
      CHECK(it.epoch() == e + 1);
    }
    CHECK(epochs[0] == seeded_permutation(10, 7));
    CHECK(epochs[1] == seeded_permutation(10, 8));
    CHECK(epochs[0] != epochs[1]);
    it.reset(1);  // deterministic: epoch 1 replays
    Batch b;
    std::vector<int64_t> replay;
    while (it.next(b)) replay.insert(replay.end(), b.indices.begin(), b.indices.end());
    CHECK(replay == epochs[1]);
  }
  SECTION("in order, drop_last") {
    BatchIterator it(ds, 4, false, 0, true);
    CHECK(it.batches_per_epoch() == 2);
    Batch b;
    std::vector<int64_t> seen;
    int count = 0;
    while (it.next(b)) {
      CHECK(b.size == 4);
      seen.insert(seen.end(), b.indices.begin(), b.indices.end());
      ++count;
    }
    CHECK(count == 2);
    CHECK(seen == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  }
  SECTION("batch size larger than the dataset") {
    BatchIterator it(ds, 64, false);
    Batch b;
    REQUIRE(it.next(b));
    CHECK(b.size == 10);
    CHECK_FALSE(it.next(b));
  }
  SECTION("subset and bad arguments") {
    Dataset s = ds.subset(std::vector<int64_t>{3, 1, 3});
    CHECK(s.n == 3);
    CHECK(s.images == std::vector<float>{3, 103, 1, 101, 3, 103});
    CHECK(s.labels == std::vector<int32_t>{6, 8, 6});
    CHECK_THROWS_AS(ds.subset(std::vector<int64_t>{10}), sg::ValueError);
    CHECK_THROWS_AS(BatchIterator(ds, 0), sg::ValueError);
  }
}

// ---- issue 19: sizes from file headers and flags are checked ----

TEST_CASE("load_idx: header dimensions whose product overflows 64 bits are a corrupt header, not a wrapped size",
          "[datasets][idx]") {
  TempDir dir;
  // 2^22 x 2^21 x 2^21 = 2^64 wrapped to 0 bytes of payload: the "truncated data" check passed, and the image
  // count times 0 bytes per image left a dataset reading past its (empty) pixel buffer
  write_raw(dir / "im", idx_images(1u << 22, 1u << 21, 1u << 21, 0));
  write_raw(dir / "lb", idx_labels({1}));
  std::string m = error_of([&] { load_idx(dir / "im", dir / "lb"); });
  CHECK_THAT(m, Contains(dir / "im") && Contains("4194304 x 2097152 x 2097152") && Contains("header is corrupt"));
  // 0 images of (2^32-1) x (2^32-1) pixels: no payload, but one image's size overflows (found by fuzz_idx)
  write_raw(dir / "im0", idx_images(0, 0xffffffffu, 0xffffffffu, 0));
  write_raw(dir / "lb0", idx_labels({}));
  m = error_of([&] { load_idx(dir / "im0", dir / "lb0"); });
  CHECK_THAT(m, Contains("0 x 4294967295 x 4294967295") && Contains("header is corrupt"));
}

TEST_CASE("load_fashion_mnist refuses images that are not 28x28 and labels above 9", "[datasets][fashion]") {
  TempDir dir;
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_images(2, 8, 8, 2));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_labels({1, 2}));
  std::string m = error_of([&] { load_fashion_mnist(true, dir.path.string()); });
  CHECK_THAT(m, Contains("train-images-idx3-ubyte.gz") && Contains("28x28") && Contains("8x8"));
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_images(3, 28, 28, 3));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_labels({1, 12, 2}));
  m = error_of([&] { load_fashion_mnist(true, dir.path.string()); });
  CHECK_THAT(m, Contains("train-labels-idx1-ubyte.gz") && Contains("byte offset 9") && Contains("label 12 of sample 1"));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_labels({1, 9, 2}));
  Dataset ok = load_fashion_mnist(true, dir.path.string());
  CHECK(ok.num_classes == 10);  // the dataset's 10 classes, not max label + 1
  CHECK(ok.labels == std::vector<int32_t>{1, 9, 2});
}

TEST_CASE("BatchIterator: a batch size near 2^63 is one batch per epoch (n + b - 1 overflowed to 0 batches)",
          "[datasets][batch]") {
  Dataset ds;
  ds.n = 5, ds.c = 1, ds.h = 1, ds.w = 2, ds.num_classes = 2;
  ds.images.assign(10, 0.5f);
  ds.labels = {0, 1, 0, 1, 1};
  BatchIterator it(ds, std::numeric_limits<int64_t>::max(), false);
  CHECK(it.batches_per_epoch() == 1);
  Batch b;
  REQUIRE(it.next(b));
  CHECK(b.size == 5);
  CHECK_FALSE(it.next(b));
  BatchIterator drop(ds, std::numeric_limits<int64_t>::max(), false, 0, /*drop_last=*/true);
  CHECK(drop.batches_per_epoch() == 0);
}
