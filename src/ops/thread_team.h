// The threads kernels run on: run_team(n, f) calls f(t, n) for t in [0, n) on n threads at once,
// the calling thread as member 0, and returns when every member has returned.
//
// Why not `#pragma omp parallel`: a decode step opens about 60 parallel regions (a matrix, a
// layer's attention, an activation each), and a libgomp region costs about 3 us to open and
// close on the 2-core machines here (a barrier 1.3 us), where handing a job to a spinning worker
// through one shared cache line and waiting for it costs 0.15 us: 0.2 ms of a 5 ms step.
//
// Each calling thread has its own workers, started when it first asks for them, as OpenMP gives
// each thread its own team; a call from inside a job runs on its caller alone (n = 1), as
// OpenMP's nested regions do. Between jobs a worker spins for 0.1 ms and then sleeps;
// OMP_WAIT_POLICY=passive (as the test suite sets, several tests sharing the cores) makes it
// sleep at once, and so does a team larger than the machine's CPUs. Which member computes what
// is the kernels' own fixed split, so results never depend on the team.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace kvlm {

namespace team_detail {
// A word threads wait on: they spin on it for a while, then sleep (std::atomic::wait) counted in
// `sleepers`, so that changing it wakes someone only when someone sleeps.
struct Wakeable {
  alignas(64) std::atomic<uint32_t> word{0};
  std::atomic<int> sleepers{0};
};
// Waits until w.word != old; returns the new value.
uint32_t wait_while_equal(const Wakeable& w, uint32_t old, bool spin);
// Adds `delta` to w.word, wakes its sleepers, and returns the new value.
uint32_t add_and_wake(Wakeable& w, uint32_t delta);
// Whether waits may spin for a team of n threads: not under OMP_WAIT_POLICY=passive, nor when
// the team has more threads than the process has CPUs (a spinning thread would hold a CPU that
// a working one needs).
bool may_spin(int n_threads);
// Runs fn(ctx, t, n) on n members (the caller as t = 0); see run_team.
void run(int n_threads, void (*fn)(void* ctx, int t, int n), void* ctx);
}  // namespace team_detail

// Calls f(t, n) on n = max(1, n_threads) threads (fewer never: a member may count on its share).
template <class F>
void run_team(int n_threads, F&& f) {
  using Fn = std::remove_reference_t<F>;
  team_detail::run(
      n_threads, [](void* ctx, int t, int n) { (*static_cast<Fn*>(ctx))(t, n); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Member t's share [begin, end) of n tasks split as OpenMP's schedule(static) does: contiguous,
// the first n % members one longer.
template <class Index>
std::pair<Index, Index> static_share(Index n_tasks, int t, int n_members) {
  const Index members = static_cast<Index>(n_members), member = static_cast<Index>(t);
  const Index base = n_tasks / members, extra = n_tasks % members;
  const Index begin = member * base + std::min(member, extra);
  return {begin, begin + base + (member < extra ? 1 : 0)};
}

// f(i) for every i in [0, n), split over at most n_threads threads by static_share: `omp
// parallel for schedule(static)`.
template <class Index, class F>
void parallel_for(int n_threads, Index n, F&& f) {
  if (n <= 0) return;
  const int threads = static_cast<int>(std::min<Index>(std::max(n_threads, 1), n));
  run_team(threads, [&](int t, int nt) {
    const auto [begin, end] = static_share(n, t, nt);
    for (Index i = begin; i < end; ++i) f(i);
  });
}

// Members meet here: arrive_and_wait returns once all n have arrived. Reusable.
class TeamBarrier {
 public:
  explicit TeamBarrier(int n_members)
      : n_members_(n_members), spin_(team_detail::may_spin(n_members)) {}
  void arrive_and_wait() {
    if (n_members_ <= 1) return;
    const uint32_t generation = generation_.word.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_members_) {
      // Nobody leaves before the generation moves, so nobody arrives at the next round first.
      arrived_.store(0, std::memory_order_relaxed);
      team_detail::add_and_wake(generation_, 1);
      return;
    }
    team_detail::wait_while_equal(generation_, generation, spin_);
  }

 private:
  const int n_members_;
  const bool spin_;
  alignas(64) std::atomic<int> arrived_{0};
  team_detail::Wakeable generation_;
};

// Tasks handed out one at a time, for tasks of uneven length (OpenMP's schedule(dynamic)):
// claim() returns the next unclaimed task, or a value >= n_tasks once all are taken.
class TaskCounter {
 public:
  int claim() { return next_.fetch_add(1, std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<int> next_{0};
};

}  // namespace kvlm
