// The cpu-simd backend: executes Plans as C kernels compiled by the system C compiler, on the host's threads.
//
// Per compile: the cpu-simd target (preset_caps("cpu-simd"): the cpu plan's register tiles and window blocks,
// ComputeLimits::register_tiles) -> target_policy -> schedule -> the target's emitter (make_emitter: C11) per kernel
// -> the kernels concatenated into one translation unit -> one compiler run (cpu_simd_compiler.h: the
// kernel cache keyed by source, flags, compiler version and CPU) -> dlopen, one entry point per kernel. Per run: the
// fed inputs copied into their buffers, each kernel's workgroups run in Plan::kernels order (split over a small
// thread pool when the kernel has enough work, else on the calling thread), the program outputs copied out, then the
// front/back buffers of every updated persistent value swapped (update kernels write the back buffer: no kernel
// reads what it writes) — the native backends' execution model (plan_executor.h) over host memory. Buffers are 64-byte
// aligned float arrays rounded up to whole vec4s (sg/compute_kernel.h's contract).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "cpu_simd_compiler.h"
#include "plan_executor.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/cpu_simd_work.h"
#include "sg/dump.h"
#include "sg/error.h"
#include "sg/feeds.h"
#include "sg/kernel_cache.h"
#include "sg/kernel_ir.h"
#include "shared_context_backend.h"

namespace sg {

namespace {

/// A kernel's exported entry point: workgroups [begin, end) over its buffers in binding order.
using EntryFn = void (*)(float* const* buf, int64_t begin, int64_t end);

/// A float array, 64-byte aligned, at least numel floats rounded up to a whole vec4 (zero-filled).
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(int64_t numel) : n_(numel) {
    const size_t bytes = (static_cast<size_t>(std::max<int64_t>(numel, 1)) * 4 + 63) / 64 * 64;
    p_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!p_) throw BackendError(fmt::format("cpu-simd: cannot allocate a buffer of {} bytes", bytes));
    std::memset(p_.get(), 0, bytes);
  }
  float* data() const { return p_.get(); }
  int64_t numel() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> p_;
  int64_t n_ = 0;
};

/// plan_executor.h's BufferStorage device over host memory: allocations and copies.
struct HostDevice {
  HostBuffer create_buffer(int64_t numel, std::string_view) { return HostBuffer(numel); }
  void upload(HostBuffer& b, const float* data, int64_t numel) { std::copy(data, data + numel, b.data()); }
  void download(const HostBuffer& b, float* data, int64_t numel) { std::copy(b.data(), b.data() + numel, data); }
};
using Storage = detail::BufferStorage<HostDevice, HostBuffer>;
using Persistent = detail::PersistentValues<Storage>;

/// Worker threads that run the workgroups of one kernel at a time together with the calling thread: the range is cut
/// into chunks taken in turn (contiguous workgroups per chunk: neighbouring tiles share rows). The chunk counter
/// carries the job's generation, so a worker that wakes late for a finished job takes nothing of the next one.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  /// Runs f(buf, begin, end) over [0, total) in chunks on every thread; returns when all are done.
  void run(EntryFn f, float* const* buf, int64_t total) {
    const Job job{f, buf, total, std::min<int64_t>(total, int64_t{threads()} * kCpuSimdChunksPerThread)};
    uint32_t gen = 0;
    {
      std::lock_guard<std::mutex> l(m_);
      job_ = job;
      gen = ++generation_;
      next_.store(uint64_t{gen} << 32);
      left_ = job.chunks;
    }
    cv_.notify_all();
    take_chunks(job, gen);
    std::unique_lock<std::mutex> l(m_);
    done_cv_.wait(l, [&] { return left_ == 0; });
  }

 private:
  struct Job {
    EntryFn f = nullptr;
    float* const* buf = nullptr;
    int64_t total = 0, chunks = 0;
  };
  /// Runs chunks of job `gen` until none is left (or another job has started).
  void take_chunks(const Job& job, uint32_t gen) {
    int64_t finished = 0;
    for (;;) {
      uint64_t v = next_.load();
      int64_t c = 0;
      do {
        c = static_cast<int64_t>(v & 0xffffffffu);
        if (static_cast<uint32_t>(v >> 32) != gen || c >= job.chunks) c = -1;
      } while (c >= 0 && !next_.compare_exchange_weak(v, v + 1));
      if (c < 0) break;
      job.f(job.buf, job.total * c / job.chunks, job.total * (c + 1) / job.chunks);
      ++finished;
    }
    if (finished == 0) return;
    std::lock_guard<std::mutex> l(m_);
    left_ -= finished;
    if (left_ == 0) done_cv_.notify_all();
  }
  void work() {
    uint32_t seen = 0;
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      take_chunks(job, seen);
    }
  }
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  Job job_;                          ///< the current job (under m_)
  std::atomic<uint64_t> next_{0};    ///< the current job's generation (high 32 bits) and next chunk (low 32 bits)
  int64_t left_ = 0;                 ///< chunks of the current job not yet finished (under m_)
  uint32_t generation_ = 0;          ///< jobs started (under m_)
  bool stop_ = false;
};

class CpuSimdContext;

class CpuSimdExecutable final : public Executable {
 public:
  CpuSimdExecutable(std::shared_ptr<CpuSimdContext> be, Plan plan, std::vector<ComputeKernel> kernels,
                    std::shared_ptr<cpu_simd::Library> lib);
  std::vector<std::vector<float>> run(const std::vector<Feed>& feeds) override;
  int kernels_per_step() const override { return static_cast<int>(plan_.kernels.size()); }
  const Plan* plan() const override { return &plan_; }
  std::vector<KernelTiming> last_timings() const override { return timings_; }
  std::vector<std::pair<std::string, double>> last_phases() const override { return phases_; }
  const std::vector<ComputeKernel>* compute_kernels() const override { return &kernels_; }

 private:
  std::shared_ptr<CpuSimdContext> be_;  ///< first: destroyed last
  Plan plan_;
  FeedChecker feeds_{plan_.program};
  std::vector<ComputeKernel> kernels_;
  std::shared_ptr<cpu_simd::Library> lib_;  ///< keeps the entry points loaded
  std::vector<EntryFn> entries_;
  std::vector<int64_t> workgroups_;  ///< per kernel: workgroups of its grid
  std::vector<bool> parallel_;       ///< per kernel: enough work for the pool
  std::unique_ptr<detail::PlanSlots<Storage>> slots_;
  std::vector<KernelTiming> timings_;
  std::vector<std::pair<std::string, double>> phases_;
};

/// The compiler, thread pool and persistent values of the backend, shared by the backend and every executable it
/// compiled (an executable may outlive its backend: sg::Backend's contract).
class CpuSimdContext final : public std::enable_shared_from_this<CpuSimdContext> {
 public:
  explicit CpuSimdContext(const BackendOptions& opt)
      : opt_(opt), compiler_(opt.cpu_simd.compiler, opt.cpu_simd.cache_dir), pool_(thread_count(opt)) {
    caps_ = preset_caps("cpu-simd");
    dump_dir_ = opt.dump_dir;
    if (dump_dir_.empty())
      if (const char* e = std::getenv("SG_DUMP")) dump_dir_ = e;
  }

  static int thread_count(const BackendOptions& opt) {
    int n = opt.cpu_simd.threads;
    if (n <= 0)
      if (const char* e = std::getenv("SG_THREADS"); e && *e) n = std::atoi(e);
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(n, 1, 256);
  }

  std::string name() const { return "cpu-simd"; }
  std::string device() const {
    return fmt::format("host CPU, {} thread{} (C kernels compiled by {})", pool_.threads(), pool_.threads() > 1 ? "s" : "",
                       compiler_.compiler());
  }
  Target target() const { return make_target(TargetName::CpuSimd, caps_); }
  const ComputeLimits& limits() const { return caps_.compute; }

  std::unique_ptr<Executable> compile(const Program& p) {
    const Target t = target();
    const TargetPolicy policy = target_policy(t, opt_);  // the one policy (sg/backend.h)
    const auto emitter = make_emitter(t, policy.emit);    // C11 (the cpu-simd target's emitter)
    Plan plan = schedule(p, policy.schedule);
    std::vector<ComputeKernel> kernels;
    std::string tu = "// shadergrad cpu-simd: the kernels of one program, one translation unit\n";
    for (const Kernel& k : plan.kernels) {
      kernels.push_back(emitter->compute_kernel(plan, k));
      tu += kernels.back().source + "\n";
    }
    const std::string what =
        plan.kernels.empty() ? std::string("an empty program") : fmt::format("{} kernels ({}...)", plan.kernels.size(), plan.kernels.front().name);
    cpu_simd::Build b = compiler_.build(tu, what);
    {
      std::lock_guard<std::mutex> l(m_);
      last_ = {b.source_path, b.library_path, b.cache_hit, b.compile_ms, static_cast<int>(kernels.size())};
      has_last_ = true;
    }
    auto exe = std::make_unique<CpuSimdExecutable>(shared_from_this(), std::move(plan), std::move(kernels), b.library);
    if (!dump_dir_.empty()) {
      KernelCache unused(std::filesystem::path{});
      dump_plan(*exe->plan(), fmt::format("{}/program{:02}", dump_dir_, dumps_++), unused,
                {.fragment = false, .compute = true, .compute_limits = emitter->options().limits, .glsl450 = false,
                 .spirv = false, .gles = false, .wgsl = false, .c = true});
    }
    return exe;
  }

  std::vector<float> read(const Tensor& leaf) { return persistent_.read(storage_, leaf); }
  void write(const Tensor& leaf, const std::vector<float>& data) { persistent_.write(storage_, leaf, data); }
  Storage& storage() { return storage_; }
  Persistent& persistent() { return persistent_; }

  ThreadPool& pool() { return pool_; }
  bool profile() const { return opt_.profile; }
  CpuSimdBuild last_build() {
    std::lock_guard<std::mutex> l(m_);
    if (!has_last_) throw ValueError("cpu_simd_last_build: the backend has compiled nothing yet");
    return last_;
  }

 private:
  BackendOptions opt_;
  DeviceCaps caps_;
  cpu_simd::Compiler compiler_;
  ThreadPool pool_;
  HostDevice dev_;
  Storage storage_{&dev_};
  Persistent persistent_{"cpu-simd"};
  std::string dump_dir_;
  int dumps_ = 0;
  std::mutex m_;
  CpuSimdBuild last_;
  bool has_last_ = false;
};

CpuSimdExecutable::CpuSimdExecutable(std::shared_ptr<CpuSimdContext> be, Plan plan, std::vector<ComputeKernel> kernels,
                                     std::shared_ptr<cpu_simd::Library> lib)
    : be_(std::move(be)), plan_(std::move(plan)), kernels_(std::move(kernels)), lib_(std::move(lib)) {
  slots_ = std::make_unique<detail::PlanSlots<Storage>>(be_->storage(), be_->persistent(), plan_);
  for (size_t i = 0; i < plan_.kernels.size(); ++i) {
    const ComputeKernel& ck = kernels_[i];
    entries_.push_back(reinterpret_cast<EntryFn>(lib_->symbol(ck.entry)));
    workgroups_.push_back(int64_t{ck.workgroups[0]} * ck.workgroups[1] * ck.workgroups[2]);
    const double work = cpu_simd_kernel_work(plan_, plan_.kernels[i]);  // sg/cpu_simd_work.h: the wasm plan's rule too
    parallel_.push_back(be_->pool().threads() > 1 && workgroups_.back() > 1 && work >= kCpuSimdParallelWork);
  }
}

std::vector<std::vector<float>> CpuSimdExecutable::run(const std::vector<Feed>& feeds) {
  using Clock = std::chrono::steady_clock;
  std::vector<float*> bind;
  return slots_->run(
      phases_, [&] { slots_->upload_feeds(feeds_, feeds); },  // ValueError before any copy
      [&] {
        timings_.clear();
        slots_->launch_each(
            [&](size_t k) {
              bind.clear();
              for (int v : kernels_[k].bindings) bind.push_back(slots_->of(v).data());
              const Clock::time_point tk = Clock::now();
              if (parallel_[k]) be_->pool().run(entries_[k], bind.data(), workgroups_[k]);
              else entries_[k](bind.data(), 0, workgroups_[k]);
              if (be_->profile())
                timings_.push_back({plan_.kernels[k].name,
                                    std::chrono::duration<double, std::milli>(Clock::now() - tk).count(), false});
            },
            [this](int k, const auto& read) { notify_hook(k, plan_.kernels[k], plan_, read); });
      });
}

using CpuSimdBackend = SharedContextBackend<CpuSimdContext>;

}  // namespace

std::unique_ptr<Backend> make_cpu_simd_backend(const BackendOptions& opt) { return std::make_unique<CpuSimdBackend>(opt); }

CpuSimdBuild cpu_simd_last_build(Backend& backend) {
  auto* b = dynamic_cast<CpuSimdBackend*>(&backend);
  if (!b) throw ValueError(fmt::format("cpu_simd_last_build: '{}' is not a cpu-simd backend", backend.name()));
  return b->context().last_build();
}

}  // namespace sg
