// Seed 002's compression study reproduced with shadergrad (every run is generated shaders on --backend):
// teacher, global, iterative and structured pruning, the sparsity sweep, distillation, PTQ vs QAT, the int8 export.
//
//   build/bin/bench_seed002 --backend vulkan --seeds 5 --out seed002.json          # everything, one process
//   build/bin/bench_seed002 --backend vulkan --table sweep --seed 3 --rows 0.95,0.99 --models DIR --reuse --out F
//   /usr/bin/python3 scripts/seed002/merge.py F1.json F2.json ... --out merged.json   # partial files -> one
//   /usr/bin/python3 scripts/seed002/render_results.py merged.json                    # -> docs/RESULTS.md section
//
// The output is a list of records, one per (table, seed, row): the unit a run can be split into. A record's
// result depends only on its table, seed, row, backend and the models it reads, never on which other records the
// same process computed, so N one-record jobs merged equal one run of N records (scripts/seed002/test_merge.sh).
//
// Tables (default all, in this order) and what their seed S means:
//   teacher   make_cnn(64,128,256) from init seed S, shuffling seed S, 40 epochs (seed 002: S = 0 only)
//   prune     teacher S: global L1 90 %, 10 fine-tune epochs (shuffling seed S), prune.remove; sizes raw/gzip
//   iterative teacher S: 4 rounds of global pruning to 90 % overall with 10 fine-tune epochs each (seeds 4S+r)
//   sweep     teacher S: global L1 at each row's sparsity (0.5 ... 0.99), 10 fine-tune epochs (seed S)
//   slim      teacher S: structured pruning of each row's fraction of channels (0.25, 0.5, 0.75), 10 fine-tune
//             epochs (seed S), and the same shape trained from scratch (init and shuffling seed S, 40 epochs)
//   student   make_cnn(8,16,32) from init seed S, 150 epochs
//   distill   student S distilled from teacher 0 (T 4, alpha 0.9): rows plain (600 labeled, 150 epochs) and
//             unlabeled (+ the 400 pool images, 90 epochs)
//   quant     student S: PTQ and QAT (30 epochs) at 8, 6, 5, 4, 3, 2 bits, and the float retrained 30 epochs
//   int8      student 0: per-channel int8, moving-average observers, QAT 30 epochs, the int8 file and inference
// Teachers and students are saved in --models as teacher_model_S / student_model_S.safetensors; --reuse loads
// them from there instead of training (parallel jobs share one --models directory; saves are atomic). The JSON is
// rewritten after every record, and a run given an --out file that already holds some records skips them, so a
// run cut short keeps and resumes what it finished.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/shadergrad.h"

namespace c = sg::compress;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const std::vector<std::string> kTables = {"teacher", "prune", "iterative", "sweep", "slim",
                                          "student", "distill", "quant",     "int8"};
const std::vector<std::string> kSweepRows = {"0.5", "0.7", "0.8", "0.9", "0.95", "0.98", "0.99"};
const std::vector<std::string> kSlimRows = {"0.25", "0.5", "0.75"};
const std::vector<std::string> kDistillRows = {"plain", "unlabeled"};

/// The rows a table has (a record per seed and row); {""} for tables of one record per seed.
const std::vector<std::string>& rows_of(const std::string& table) {
  static const std::vector<std::string> one = {""};
  if (table == "sweep") return kSweepRows;
  if (table == "slim") return kSlimRows;
  if (table == "distill") return kDistillRows;
  return one;
}

struct Args {
  std::string backend = "gles", out = "seed002.json", tmp, models, split = "seed002";
  int seeds = 5;
  int seed = -1;               ///< --seed: this seed only (-1: seeds 0 .. --seeds - 1)
  double scale = 1;            ///< --epoch-scale: every epoch count times this (at least 1): smoke runs and timing
  std::vector<std::string> tables, rows;
  std::vector<int64_t> teacher = {64, 128, 256};  ///< --teacher c1,c2,hidden (smaller for smoke runs)
  bool reuse = false;
  std::vector<int> seed_list() const {
    if (seed >= 0) return {seed};
    std::vector<int> v(static_cast<size_t>(seeds));
    for (int s = 0; s < seeds; ++s) v[static_cast<size_t>(s)] = s;
    return v;
  }
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"Seed 002's compression study on shadergrad; see the comment at the top of bench/bench_seed002.cpp"};
  app.add_option("--backend", a.backend, "gles | gles-compute | vulkan | cpu");
  app.add_option("--out", a.out, "the JSON of records (read first: records already in it are skipped)");
  app.add_option("--tmp", a.tmp, "scratch directory for the size measurements (default /tmp/sg_seed002_<pid>)");
  app.add_option("--models", a.models, "where teachers and students are saved / loaded (default --tmp)");
  app.add_option("--split", a.split, "digits split")->check(CLI::IsMember({"seed002", "ours"}));
  app.add_option("--seeds", a.seeds, "seeds 0 .. N-1")->check(CLI::Range(1, 100));
  app.add_option("--seed", a.seed, "one seed only (a job of a split run)")->check(CLI::Range(0, 99));
  app.add_option("--epoch-scale", a.scale, "every epoch count times this, at least 1 (smoke runs)")->check(CLI::PositiveNumber);
  app.add_option("--table,--parts", a.tables, "tables to run: " + join(kTables))->delimiter(',')->check(CLI::IsMember(kTables));
  app.add_option("--rows", a.rows, "rows of the chosen table(s): sweep " + join(kSweepRows) + "; slim " + join(kSlimRows) +
                                       "; distill " + join(kDistillRows))->delimiter(',');
  app.add_option("--teacher", a.teacher, "teacher widths c1,c2,hidden")->delimiter(',')->expected(3);
  app.add_flag("--reuse", a.reuse, "load teachers / students found in --models instead of training them");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  if (a.tmp.empty()) a.tmp = fmt::format("/tmp/sg_seed002_{}", ::getpid());
  if (a.models.empty()) a.models = a.tmp;
  if (a.tables.empty()) a.tables = kTables;
  for (auto& r : a.rows) {
    bool known = false;
    for (auto& t : a.tables)
      for (auto& x : rows_of(t)) known |= x == r;
    if (!known) throw sg::ValueError(fmt::format("--rows: '{}' is no row of the tables {} (rows: sweep {}; slim {}; distill {})",
                                                 r, join(a.tables), join(kSweepRows), join(kSlimRows), join(kDistillRows)));
  }
  return a;
}

json sparsity_json(const c::Model& m) {
  json j = json::array();
  for (auto& s : c::sparsity(m)) j.push_back({{"name", s.name}, {"shape", s.shape}, {"sparsity", s.sparsity()}, {"zeros", s.zeros}});
  return j;
}
int64_t zeros(const c::Model& m) {
  int64_t z = 0;
  for (auto& s : c::sparsity(m)) z += s.zeros;
  return z;
}
double overall_sparsity(const c::Model& m) {
  int64_t z = 0, n = 0;
  for (auto& s : c::sparsity(m)) z += s.zeros, n += s.numel;
  return n ? static_cast<double>(z) / static_cast<double>(n) : 0.0;
}
std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}
std::string hostname() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}
/// The machine a record names: $SEED002_MACHINE (the device phase sets it) or the host name.
std::string machine() {
  const char* m = std::getenv("SEED002_MACHINE");
  return m && *m ? m : hostname();
}

/// The records of one --out file: loaded at the start (resume), rewritten after each new record.
struct Records {
  std::string path;
  json doc;
  void load(const std::string& p) {
    path = p;
    std::ifstream f(p);
    if (f) doc = json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object() && !doc.contains("records"))
      throw sg::ValueError(fmt::format("{} is a bench_seed002 JSON of the older format (no \"records\"): give another "
                                       "--out, and merge both with scripts/seed002/merge.py", p));
    if (!doc.is_object()) doc = {{"format", "seed002/2"}, {"records", json::array()}};
  }
  const json* find(const std::string& table, int seed, const std::string& row) const {
    for (auto& r : doc["records"])
      if (r["table"] == table && r["seed"] == seed && r["row"] == row) return &r;
    return nullptr;
  }
  void add(json r) {
    doc["records"].push_back(std::move(r));
    std::string tmp = path + ".part";
    {
      std::ofstream f(tmp);
      f << doc.dump(2) << "\n";
    }
    std::filesystem::rename(tmp, path);
  }
};

struct Study {
  Args args;
  c::Data data;
  std::unique_ptr<sg::Backend> be;
  std::map<int, c::Model> teachers, students;  ///< by seed, trained or loaded once per process

  int64_t E(int64_t epochs) const { return std::max<int64_t>(1, static_cast<int64_t>(std::lround(epochs * args.scale))); }
  double eval(const c::Model& m) { return c::evaluate(m, data, *be); }
  json sizes(const c::Model& m, const std::string& name) {
    std::string p = args.tmp + "/" + name + ".safetensors";
    c::save(p, m);
    auto s = c::file_size(p);
    return {{"raw", s.raw}, {"gzip", s.gzipped}};
  }
  c::Model trained(const c::CnnSpec& spec, uint64_t seed, int64_t epochs, double lr, c::TrainOptions opt = {}) {
    c::Model m = c::init_cnn(spec, seed);
    opt.epochs = epochs, opt.lr = lr, opt.seed = seed;
    c::train(m, data, opt, *be);
    return m;
  }
  void log(const std::string& s) { std::cout << s << std::endl; }

  /// Teacher or student `seed`: from --models when --reuse finds it, else trained (and saved there).
  const c::Model& model(bool teacher, int seed) {
    auto& cache = teacher ? teachers : students;
    if (auto it = cache.find(seed); it != cache.end()) return it->second;
    std::string p = fmt::format("{}/{}_model_{}.safetensors", args.models, teacher ? "teacher" : "student", seed);
    c::Model m;
    if (args.reuse && std::filesystem::exists(p)) {
      m = c::load(p);
      log("loaded " + p);
    } else if (teacher) {
      m = trained({args.teacher[0], args.teacher[1], args.teacher[2]}, static_cast<uint64_t>(seed), E(40), 2e-3);
      c::save(p, m);
    } else {
      m = trained({8, 16, 32}, static_cast<uint64_t>(seed), E(150), 2e-3);
      c::save(p, m);
    }
    return cache.emplace(seed, std::move(m)).first->second;
  }

  json teacher(int s) {
    const c::Model& t = model(true, s);
    return {{"parameters", t.spec.num_parameters()}, {"accuracy", eval(t)}, {"size", sizes(t, "teacher")}};
  }
  json prune(int s) {  // seed 002: global 90 %, fine-tune 10 epochs lr 1e-3, prune.remove
    c::Model m = model(true, s);
    json j;
    j["original"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "orig")}};
    c::prune_global_l1(m, 0.9);
    j["pruned"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "pruned")}, {"layers", sparsity_json(m)}};
    c::train(m, data, {.epochs = E(10), .lr = 1e-3, .seed = static_cast<uint64_t>(s)}, *be);
    j["finetuned"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "finetuned")}};
    c::remove_masks(m);
    j["removed"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "removed")}};
    return j;
  }
  json iterative(int s) {  // 4 rounds to 90 % overall: 1 - 0.1^(1/4) of the still-kept weights each round
    c::Model it = model(true, s);
    const double per_round = 1 - std::pow(0.1, 0.25);
    json rounds = json::array();
    for (int r = 0; r < 4; ++r) {
      c::prune_global_l1(it, per_round);
      double pruned = eval(it);
      c::train(it, data, {.epochs = E(10), .lr = 1e-3, .seed = static_cast<uint64_t>(4 * s + r)}, *be);
      rounds.push_back({{"sparsity", overall_sparsity(it)},
                        {"pruned", pruned}, {"finetuned", eval(it)}});
    }
    json j = {{"rounds", rounds}, {"accuracy", eval(it)}, {"zeros", zeros(it)}, {"layers", sparsity_json(it)},
              {"size_masked", sizes(it, "iterative_masked")}};
    c::remove_masks(it);
    j["size"] = sizes(it, "iterative_removed");
    return j;
  }
  json sweep(int s, double amount) {
    c::Model m = model(true, s);
    c::prune_global_l1(m, amount);
    double before = eval(m);
    c::train(m, data, {.epochs = E(10), .lr = 1e-3, .seed = static_cast<uint64_t>(s)}, *be);
    double emptiest = 0;
    for (auto& l : c::sparsity(m)) emptiest = std::max(emptiest, l.sparsity());
    c::remove_masks(m);
    return {{"amount", amount}, {"before", before}, {"after", eval(m)}, {"emptiest", emptiest},
            {"zeros", zeros(m)}, {"size", sizes(m, "sweep_removed")}};
  }
  json slim(int s, double amount) {
    c::Slim sl = c::slim(model(true, s), amount);
    auto a = c::logits(sl.masked, data, *be, data.split.test), b = c::logits(sl.small, data, *be, data.split.test);
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    double pruned = c::accuracy(b, data);
    c::train(sl.small, data, {.epochs = E(10), .lr = 1e-3, .seed = static_cast<uint64_t>(s)}, *be);
    c::Model scratch = trained(sl.small.spec, static_cast<uint64_t>(s), E(40), 2e-3);
    return {{"amount", amount}, {"shape", {sl.small.spec.c1, sl.small.spec.c2, sl.small.spec.hidden}},
            {"parameters", sl.small.spec.num_parameters()}, {"max_diff", diff}, {"pruned", pruned},
            {"finetuned", eval(sl.small)}, {"scratch", eval(scratch)}, {"size", sizes(sl.small, "slim")}};
  }
  json student(int s) {
    const c::Model& m = model(false, s);
    return {{"parameters", m.spec.num_parameters()}, {"accuracy", eval(m)}, {"size", sizes(m, "student")}};
  }
  json distill(int s, const std::string& row) {
    c::Distill dist{c::logits(model(true, 0), data, *be), 4.0, 0.9};
    json j = {{"teacher_seed", 0}, {"temperature", dist.temperature}, {"alpha", dist.alpha}};
    if (row == "plain") {
      j["accuracy"] = eval(trained({8, 16, 32}, static_cast<uint64_t>(s), E(150), 2e-3, {.distill = dist}));
    } else {
      std::vector<int64_t> more = data.split.train;
      more.insert(more.end(), data.split.pool.begin(), data.split.pool.end());
      j["accuracy"] = eval(trained({8, 16, 32}, static_cast<uint64_t>(s), E(90), 2e-3, {.data = more, .distill = dist}));
    }
    return j;
  }
  json quant(int s) {
    const c::Model& f = model(false, s);
    c::Model m = f;
    c::train(m, data, {.epochs = E(30), .lr = 1e-3, .seed = static_cast<uint64_t>(s)}, *be);
    json j = {{"float", eval(f)}, {"float_retrain", eval(m)}, {"bits", json::array()}};
    for (int bits : {8, 6, 5, 4, 3, 2}) {
      c::Model q = c::quantize(f, {.bits = bits}, data, *be);
      double ptq = eval(q);
      c::train(q, data, {.epochs = E(30), .lr = 1e-3, .seed = static_cast<uint64_t>(s)}, *be);
      j["bits"].push_back({{"bits", bits}, {"ptq", ptq}, {"qat", eval(q)}});
    }
    return j;
  }
  json int8(int s) {  // seed 002's torch.ao flow: per-channel weights, moving-average observers, QAT 30 epochs
    const c::Model& f = model(false, s);
    c::Model q = c::quantize(f, {.bits = 8, .per_channel = true, .observer = c::QuantConfig::Observer::moving_average},
                             data, *be);
    double ptq = eval(q);
    c::train(q, data, {.epochs = E(30), .lr = 1e-3}, *be);
    double qat = eval(q);
    std::string p = args.tmp + "/student.int8.safetensors";
    c::save_int8(p, c::to_int8(q));
    c::Int8Model back = c::load_int8(p);
    double cpu = c::accuracy(c::int8_logits_cpu(back, data, data.split.test), data);
    double gpu = eval(c::from_int8(back));
    auto fs = c::file_size(p);
    return {{"float_accuracy", eval(f)}, {"float_size", sizes(f, "student_float")},
            {"ptq_fake_quant", ptq}, {"qat_fake_quant", qat}, {"int8_cpu", cpu}, {"int8_gpu", gpu},
            {"int8_size", {{"raw", fs.raw}, {"gzip", fs.gzipped}}}};
  }

  json run(const std::string& t, int s, const std::string& row) {
    if (t == "teacher") return teacher(s);
    if (t == "prune") return prune(s);
    if (t == "iterative") return iterative(s);
    if (t == "sweep") return sweep(s, std::stod(row));
    if (t == "slim") return slim(s, std::stod(row));
    if (t == "student") return student(s);
    if (t == "distill") return distill(s, row);
    if (t == "quant") return quant(s);
    return int8(s);
  }
};

/// Every (table, seed, row) of the run, in table order, then seed, then row.
std::vector<std::tuple<std::string, int, std::string>> plan(const Args& a) {
  std::vector<std::tuple<std::string, int, std::string>> todo;
  for (auto& t : kTables) {
    if (std::find(a.tables.begin(), a.tables.end(), t) == a.tables.end()) continue;
    for (int s : a.seed_list()) {
      if (t == "int8" && s != 0) continue;  // seed 002 exports student 0 only
      for (auto& r : rows_of(t)) {
        bool row_chosen = a.rows.empty() || r.empty() || std::find(a.rows.begin(), a.rows.end(), r) != a.rows.end();
        if (row_chosen) todo.emplace_back(t, s, r);
      }
    }
  }
  return todo;
}

int run_study(int argc, char** argv) {
  Study st;
  st.args = parse(argc, argv);
  st.data = c::load_data(st.args.split);
  std::filesystem::create_directories(st.args.tmp);
  std::filesystem::create_directories(st.args.models);
  st.be = sg::make_backend({.kind = st.args.backend}).backend;
  Records rec;
  rec.load(st.args.out);
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const json where = {{"backend", st.be->name()}, {"device", st.be->device()}, {"host", hostname()}, {"machine", machine()},
                      {"split", st.args.split}, {"epoch_scale", st.args.scale}, {"teacher_widths", st.args.teacher}};
  auto t_all = Clock::now();
  for (auto& [t, s, row] : plan(st.args)) {
    if (rec.find(t, s, row)) {
      st.log(fmt::format("{} seed {} {}: in {} already", t, s, row, st.args.out));
      continue;
    }
    auto t0 = Clock::now();
    json r = {{"table", t}, {"seed", s}, {"row", row}, {"result", st.run(t, s, row)}};
    r.update(where);
    r["wall_seconds"] = since(t0), r["date"] = utc_now(), r["command"] = command;
    st.log(fmt::format("{} seed {} {} ({:.0f} s): {}", t, s, row, since(t0), r["result"].dump()));
    rec.add(std::move(r));
  }
  st.log(fmt::format("done in {:.0f} s", since(t_all)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_study(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench_seed002: " << e.what() << "\n";
    return 1;
  }
}
