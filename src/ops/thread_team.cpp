// run_team's workers: one set per calling thread, each worker woken through its own word.
#include "ops/thread_team.h"

#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

namespace kvlm::team_detail {
namespace {

// How long a waiter spins before it sleeps: long enough to span the gaps between a decode
// step's jobs and between steps (sampling, the scheduler), short enough that an idle engine
// gives its CPUs back at once. OpenMP's default (GOMP_SPINCOUNT) spins for a similar time.
constexpr auto kSpinFor = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The CPUs of each of OpenMP's places where the user asked for binding (OMP_PROC_BIND,
// OMP_PLACES): libgomp then binds the first thread to the first place before main, and a worker
// started from it would inherit that one place (measured on 2 cores with OMP_PROC_BIND=true:
// both members on CPU 0, half the tokens/s). Empty where nothing is bound.
const std::vector<std::vector<int>>& bound_places() {
  static const std::vector<std::vector<int>> places = [] {
    std::vector<std::vector<int>> list;
    if (omp_get_proc_bind() == omp_proc_bind_false) return list;
    for (int p = 0; p < omp_get_num_places(); ++p) {
      std::vector<int> cpus(static_cast<size_t>(std::max(omp_get_place_num_procs(p), 0)));
      omp_get_place_proc_ids(p, cpus.data());
      if (!cpus.empty()) list.push_back(std::move(cpus));
    }
    return list;
  }();
  return places;
}

// Binds the calling thread to the place OpenMP's close binding gives member `member`.
void bind_like_openmp(int member) {
#ifdef __linux__
  const auto& places = bound_places();
  if (places.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : places[static_cast<size_t>(member) % places.size()])
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);  // where it fails the worker runs where it started
#else
  (void)member;
#endif
}

// The CPUs the team's threads may run on: every place's where threads are bound, else the
// process's.
int process_cpus() {
  const auto& places = bound_places();
  if (!places.empty()) {
    std::vector<int> all;
    for (const auto& place : places) all.insert(all.end(), place.begin(), place.end());
    std::sort(all.begin(), all.end());
    return static_cast<int>(std::unique(all.begin(), all.end()) - all.begin());
  }
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

bool passive_wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy != nullptr && strcasecmp(policy, "passive") == 0;
}

// Spins until pred(w.word) holds, for kSpinFor at most when `spin`, then sleeps until it does.
template <class Pred>
uint32_t wait_until(const Wakeable& w, bool spin, Pred pred) {
  uint32_t v = w.word.load(std::memory_order_acquire);
  if (pred(v)) return v;
  if (spin) {
    const auto until = std::chrono::steady_clock::now() + kSpinFor;
    for (int i = 1;; ++i) {
      cpu_relax();
      v = w.word.load(std::memory_order_acquire);
      if (pred(v)) return v;
      if (i % 256 == 0 && std::chrono::steady_clock::now() > until) break;
    }
  }
  auto& sleepers = const_cast<std::atomic<int>&>(w.sleepers);
  for (;;) {
    // Counted before the word is read again: whoever changes the word after this read sees the
    // count and wakes us; a change before it is seen here (both orders are sequentially
    // consistent).
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    v = w.word.load(std::memory_order_acquire);
    if (!pred(v)) w.word.wait(v, std::memory_order_acquire);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    v = w.word.load(std::memory_order_acquire);
    if (pred(v)) return v;
  }
}

// Whether this thread is running a team's job: a run_team inside one runs on its caller alone.
thread_local bool t_in_job = false;

// The workers of one calling thread. Worker i is member i + 1; a job wakes only its members.
class Team {
 public:
  Team() = default;
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  ~Team() {
    stopping_.store(true, std::memory_order_relaxed);
    for (auto& w : workers_) add_and_wake(w->epoch, 1);
    for (auto& w : workers_) w->thread.join();
  }

  void run(int n, void (*fn)(void*, int, int), void* ctx) {
    while (static_cast<int>(workers_.size()) < n - 1) start_worker();
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    spin_.store(may_spin(n), std::memory_order_relaxed);
    finished_.word.store(0, std::memory_order_relaxed);
    for (int i = 0; i < n - 1; ++i) add_and_wake(workers_[i]->epoch, 1);  // publishes the job
    std::exception_ptr error;
    t_in_job = true;
    try {
      fn(ctx, 0, n);
    } catch (...) {
      error = std::current_exception();  // rethrown once no worker uses the caller's frame
    }
    t_in_job = false;
    const uint32_t want = static_cast<uint32_t>(n - 1);
    wait_until(finished_, spin_.load(std::memory_order_relaxed),
               [want](uint32_t v) { return v == want; });
    if (error) std::rethrow_exception(error);
  }

 private:
  struct Worker {
    Wakeable epoch;  // bumped once per job this worker takes part in
    std::thread thread;
  };

  void start_worker() {
    auto w = std::make_unique<Worker>();
    const int member = static_cast<int>(workers_.size()) + 1;
    Worker* self = w.get();
    w->thread = std::thread([this, self, member] { work(*self, member); });
    workers_.push_back(std::move(w));
  }

  void work(Worker& self, int member) {
    bind_like_openmp(member);
    uint32_t seen = 0;
    for (;;) {
      seen = wait_while_equal(self.epoch, seen, spin_.load(std::memory_order_relaxed));
      if (stopping_.load(std::memory_order_relaxed)) return;
      t_in_job = true;
      fn_(ctx_, member, n_);  // an exception here ends the program, as in an OpenMP region
      t_in_job = false;
      add_and_wake(finished_, 1);
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  // The job: written by the caller before it bumps the members' epochs, read by them after.
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
  int n_ = 1;
  std::atomic<bool> spin_{true};  // set per job; read by idle workers too
  std::atomic<bool> stopping_{false};
  Wakeable finished_;  // members 1..n-1 done with the job
};

}  // namespace

uint32_t wait_while_equal(const Wakeable& w, uint32_t old, bool spin) {
  return wait_until(w, spin, [old](uint32_t v) { return v != old; });
}

uint32_t add_and_wake(Wakeable& w, uint32_t delta) {
  const uint32_t v = w.word.fetch_add(delta, std::memory_order_seq_cst) + delta;
  if (w.sleepers.load(std::memory_order_seq_cst) > 0) w.word.notify_all();
  return v;
}

bool may_spin(int n_threads) {
  static const bool passive = passive_wait_policy();
  static const int cpus = process_cpus();
  return !passive && n_threads <= cpus;
}

void run(int n_threads, void (*fn)(void* ctx, int t, int n), void* ctx) {
  if (n_threads <= 1 || t_in_job) {
    fn(ctx, 0, 1);
    return;
  }
  thread_local Team team;
  team.run(n_threads, fn, ctx);
}

}  // namespace kvlm::team_detail
