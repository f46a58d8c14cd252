// Seed 002's compression study reproduced with shadergrad (every run is generated shaders on --backend):
// teacher, global and structured pruning, distillation, PTQ vs QAT, the int8 export.
//
//   build/bin/bench_seed002 --backend gles --seeds 5 --out seed002.json [--parts teacher,prune,...] [--split seed002|ours]
//       [--reuse] [--tmp DIR] [--epoch-scale F] [--teacher c1,c2,hidden]
//   /usr/bin/python3 scripts/seed002/render_results.py bench/results/seed002.json   # -> docs/RESULTS.md section
//
// Parts (default all, in this order): teacher prune iterative sweep slim student distill quant int8. Each part needs the
// parts before it that it uses (prune/sweep/slim/distill need the teacher, quant/int8 the students); the JSON is
// rewritten after every part (and every seed or row of distill, sweep and slim, which resume from an earlier
// --out file), with the wall time of each, so a run cut short keeps what it finished.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/shadergrad.h"

namespace c = sg::compress;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Args {
  std::string backend = "gles", out = "seed002.json", tmp = "/tmp/sg_seed002", split = "seed002";
  int seeds = 5;
  double scale = 1;  ///< --epoch-scale: every epoch count times this (at least 1): smoke runs and timing
  std::set<std::string> parts;
  std::vector<std::string> order;  ///< --parts in the order given (run in that order, after what they need)
  std::vector<int64_t> teacher = {64, 128, 256};  ///< --teacher c1,c2,hidden (smaller for smoke runs)
  bool reuse = false;  ///< --reuse: load the teacher and students saved in --tmp by an earlier run
  bool has(const std::string& p) const { return parts.empty() || parts.count(p); }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw sg::ValueError(fmt::format("{} needs a value", k));
      return argv[++i];
    };
    if (k == "--backend") a.backend = val();
    else if (k == "--out") a.out = val();
    else if (k == "--tmp") a.tmp = val();
    else if (k == "--split") a.split = val();
    else if (k == "--seeds") a.seeds = std::stoi(val());
    else if (k == "--epoch-scale") a.scale = std::stod(val());
    else if (k == "--reuse") a.reuse = true;
    else if (k == "--teacher") {
      a.teacher.clear();
      std::stringstream ss(val());
      for (std::string p; std::getline(ss, p, ',');) a.teacher.push_back(std::stoll(p));
      if (a.teacher.size() != 3) throw sg::ValueError("--teacher needs c1,c2,hidden");
    }
    else if (k == "--parts") {
      std::stringstream ss(val());
      for (std::string p; std::getline(ss, p, ',');) a.parts.insert(p), a.order.push_back(p);
    } else {
      throw sg::ValueError(fmt::format("unknown argument '{}' (--backend B --seeds N --out FILE --tmp DIR --parts a,b)", k));
    }
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

struct Study {
  Args args;
  c::Data data;
  std::unique_ptr<sg::Backend> be;
  json out;
  c::Model teacher;
  std::vector<c::Model> students;

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
  void save_json() {
    std::ofstream f(args.out);
    f << out.dump(2) << "\n";
  }
  void log(const std::string& s) { std::cout << s << std::endl; }

  void part_teacher() {
    std::string p = args.tmp + "/teacher_model.safetensors";
    if (args.reuse && std::filesystem::exists(p)) {
      teacher = c::load(p);
      log("teacher loaded from " + p);
    } else {
      teacher = trained({args.teacher[0], args.teacher[1], args.teacher[2]}, 0, E(40), 2e-3);
      c::save(p, teacher);
    }
    out["teacher"] = {{"parameters", teacher.spec.num_parameters()}, {"accuracy", eval(teacher)},
                      {"size", sizes(teacher, "teacher")}};
    log(fmt::format("teacher {:.4f}", out["teacher"]["accuracy"].get<double>()));
  }
  void part_prune() {  // seed 002: global 90 %, fine-tune 10 epochs lr 1e-3, prune.remove
    c::Model m = teacher;
    json j;
    j["original"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "orig")}};
    c::prune_global_l1(m, 0.9);
    j["pruned"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "pruned")}, {"layers", sparsity_json(m)}};
    c::train(m, data, {.epochs = E(10), .lr = 1e-3}, *be);
    j["finetuned"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "finetuned")}};
    c::remove_masks(m);
    j["removed"] = {{"accuracy", eval(m)}, {"zeros", zeros(m)}, {"size", sizes(m, "removed")}};
    out["prune"] = j;
    log(fmt::format("prune 90%: {:.4f} -> {:.4f}", j["pruned"]["accuracy"].get<double>(),
                    j["finetuned"]["accuracy"].get<double>()));
  }
  void part_iterative() {  // 4 rounds of prune-and-fine-tune to the same 90 % (1 - 0.1^(1/4) of the rest each round)
    c::Model it = teacher;
    double per_round = 1 - std::pow(0.1, 0.25);
    for (int r = 0; r < 4; ++r) {
      c::prune_global_l1(it, per_round);
      c::train(it, data, {.epochs = E(10), .lr = 1e-3, .seed = static_cast<uint64_t>(r)}, *be);
    }
    out["prune"]["iterative"] = {{"rounds", 4}, {"accuracy", eval(it)}, {"zeros", zeros(it)}, {"layers", sparsity_json(it)}};
    log(out["prune"]["iterative"].dump());
  }
  void part_sweep() {
    json& rows = out["sweep"];
    if (!rows.is_array()) rows = json::array();
    for (double amount : {0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99}) {
      bool done = false;  // resumed from an earlier run's JSON
      for (auto& r : rows) done |= r["amount"].get<double>() == amount;
      if (done) continue;
      c::Model m = teacher;
      c::prune_global_l1(m, amount);
      double before = eval(m);
      c::train(m, data, {.epochs = E(10), .lr = 1e-3}, *be);
      double emptiest = 0;
      for (auto& s : c::sparsity(m)) emptiest = std::max(emptiest, s.sparsity());
      rows.push_back({{"amount", amount}, {"before", before}, {"after", eval(m)}, {"emptiest", emptiest}});
      log(rows.back().dump());
      save_json();
    }
  }
  void part_slim() {
    json& rows = out["slim"];
    if (!rows.is_array()) rows = json::array();
    for (double amount : {0.25, 0.5, 0.75}) {
      bool done = false;
      for (auto& r : rows) done |= r["amount"].get<double>() == amount;
      if (done) continue;
      c::Slim s = c::slim(teacher, amount);
      auto a = c::logits(s.masked, data, *be, data.split.test), b = c::logits(s.small, data, *be, data.split.test);
      double diff = 0;
      for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
      double pruned = c::accuracy(b, data);
      c::train(s.small, data, {.epochs = E(10), .lr = 1e-3}, *be);
      c::Model scratch = trained(s.small.spec, 0, E(40), 2e-3);
      rows.push_back({{"amount", amount}, {"shape", {s.small.spec.c1, s.small.spec.c2, s.small.spec.hidden}},
                      {"parameters", s.small.spec.num_parameters()}, {"max_diff", diff}, {"pruned", pruned},
                      {"finetuned", eval(s.small)}, {"scratch", eval(scratch)}, {"size", sizes(s.small, "slim")}});
      log(rows.back().dump());
      save_json();
    }
  }
  json seeds_json(const std::vector<double>& v) { return json(v); }
  void part_student() {
    std::vector<double> acc;
    students.clear();
    for (int s = 0; s < args.seeds; ++s) {
      std::string p = fmt::format("{}/student_model_{}.safetensors", args.tmp, s);
      if (args.reuse && std::filesystem::exists(p)) {
        students.push_back(c::load(p));
      } else {
        students.push_back(trained({8, 16, 32}, static_cast<uint64_t>(s), E(150), 2e-3));
        c::save(p, students.back());
      }
      acc.push_back(eval(students.back()));
      log(fmt::format("student seed {} {:.4f}", s, acc.back()));
    }
    out["student"] = {{"parameters", students[0].spec.num_parameters()}, {"accuracy", acc},
                      {"size", sizes(students[0], "student")}};
  }
  void part_distill() {
    c::Distill dist{c::logits(teacher, data, *be), 4.0, 0.9};
    std::vector<int64_t> more = data.split.train;
    more.insert(more.end(), data.split.pool.begin(), data.split.pool.end());
    json& j = out["distill"];
    if (!j.is_object()) j = {{"distilled", json::array()}, {"distilled_unlabeled", json::array()}};
    j["temperature"] = 4.0, j["alpha"] = 0.9;
    std::vector<double> a = j["distilled"], b = j["distilled_unlabeled"];
    for (int s = static_cast<int>(std::min(a.size(), b.size())); s < args.seeds; ++s) {
      a.resize(static_cast<size_t>(s)), b.resize(static_cast<size_t>(s));
      a.push_back(eval(trained({8, 16, 32}, static_cast<uint64_t>(s), E(150), 2e-3, {.distill = dist})));
      b.push_back(eval(trained({8, 16, 32}, static_cast<uint64_t>(s), E(90), 2e-3, {.data = more, .distill = dist})));
      log(fmt::format("distill seed {} {:.4f} +unlabeled {:.4f}", s, a.back(), b.back()));
      j["distilled"] = a, j["distilled_unlabeled"] = b;
      save_json();
    }
  }
  void part_quant() {
    std::vector<double> fl, retrain;
    for (size_t s = 0; s < students.size(); ++s) {
      fl.push_back(eval(students[s]));
      c::Model m = students[s];
      c::train(m, data, {.epochs = E(30), .lr = 1e-3, .seed = s}, *be);
      retrain.push_back(eval(m));
    }
    json rows = json::array();
    for (int bits : {8, 6, 5, 4, 3, 2}) {
      std::vector<double> ptq, qat;
      for (size_t s = 0; s < students.size(); ++s) {
        c::Model q = c::quantize(students[s], {.bits = bits}, data, *be);
        ptq.push_back(eval(q));
        c::train(q, data, {.epochs = E(30), .lr = 1e-3, .seed = s}, *be);
        qat.push_back(eval(q));
      }
      rows.push_back({{"bits", bits}, {"ptq", ptq}, {"qat", qat}});
      log(rows.back().dump());
    }
    out["quant"] = {{"float", fl}, {"float_retrain", retrain}, {"bits", rows}};
  }
  void part_int8() {  // seed 002's torch.ao flow: per-channel weights, moving-average observers, QAT 30 epochs
    const c::Model& f = students.at(0);
    c::Model q = c::quantize(f, {.bits = 8, .per_channel = true, .observer = c::QuantConfig::Observer::moving_average},
                             data, *be);
    double ptq = eval(q);
    c::train(q, data, {.epochs = E(30), .lr = 1e-3}, *be);
    double qat = eval(q);
    c::Int8Model i8 = c::to_int8(q);
    std::string p = args.tmp + "/student.int8.safetensors";
    c::save_int8(p, i8);
    c::Int8Model back = c::load_int8(p);
    double cpu = c::accuracy(c::int8_logits_cpu(back, data, data.split.test), data);
    double gpu = eval(c::from_int8(back));
    auto fs = c::file_size(p);
    out["int8"] = {{"float_accuracy", eval(f)}, {"float_size", sizes(f, "student_float")},
                   {"ptq_fake_quant", ptq}, {"qat_fake_quant", qat}, {"int8_cpu", cpu}, {"int8_gpu", gpu},
                   {"int8_size", {{"raw", fs.raw}, {"gzip", fs.gzipped}}}};
    log(out["int8"].dump());
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    Study st;
    st.args = parse(argc, argv);
    st.data = c::load_data(st.args.split);
    std::filesystem::create_directories(st.args.tmp);
    auto choice = sg::make_backend({.kind = st.args.backend});
    st.be = std::move(choice.backend);
    std::ifstream prev(st.args.out);
    if (prev) st.out = json::parse(prev, nullptr, /*allow_exceptions=*/false);
    if (!st.out.is_object()) st.out = json::object();
    st.out["backend"] = st.be->name();
    st.out["device"] = st.be->device();
    st.out["seeds"] = st.args.seeds;
    st.out["split"] = st.args.split;
    auto t_all = Clock::now();
    const std::pair<const char*, void (Study::*)()> parts[] = {
        {"teacher", &Study::part_teacher}, {"prune", &Study::part_prune}, {"iterative", &Study::part_iterative},
        {"sweep", &Study::part_sweep},
        {"slim", &Study::part_slim},       {"student", &Study::part_student}, {"distill", &Study::part_distill},
        {"quant", &Study::part_quant},     {"int8", &Study::part_int8}};
    const std::set<std::string> need_teacher = {"prune", "iterative", "sweep", "slim", "distill"}, need_students = {"quant", "int8"};
    bool teacher_needed = false, students_needed = false;
    for (auto& [name, fn] : parts) {
      teacher_needed |= st.args.has(name) && need_teacher.count(name);
      students_needed |= st.args.has(name) && need_students.count(name);
    }
    std::vector<std::pair<const char*, void (Study::*)()>> todo;
    for (auto& p : parts) {  // what the chosen parts need first, then the parts in the order given
      const std::string n = p.first;
      if ((n == "teacher" && teacher_needed) || (n == "student" && students_needed)) todo.push_back(p);
    }
    for (const std::string& want : st.args.order.empty() ? std::vector<std::string>{} : st.args.order) {
      bool known = false;
      for (auto& p : parts)
        if (want == p.first) {
          known = true;
          if (want != "teacher" && want != "student") todo.push_back(p);
          else if (!(want == "teacher" ? teacher_needed : students_needed)) todo.push_back(p);
        }
      if (!known) throw sg::ValueError(fmt::format("unknown part '{}' (teacher prune iterative sweep slim student distill quant int8)", want));
    }
    if (st.args.order.empty()) todo.assign(std::begin(parts), std::end(parts));
    for (auto& [name, fn] : todo) {
      const std::string n = name;
      auto t0 = Clock::now();
      (st.*fn)();
      st.out["wall_seconds"][n] = since(t0);
      st.save_json();
      std::cout << fmt::format("part {} done in {:.0f} s", n, since(t0)) << std::endl;
    }
    st.out["wall_seconds"]["total"] = since(t_all);
    st.save_json();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_seed002: " << e.what() << "\n";
    return 1;
  }
}
