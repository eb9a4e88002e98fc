// run_team and its parts: every member runs once, on its own thread, all at once; barriers
// order the members' rounds; static shares and claimed tasks cover each task once; a run inside
// a job stays on its caller; a member 0 exception comes back after the workers finish; teams of
// several calling threads do not mix; workers that slept between jobs wake for the next one.
#include "ops/thread_team.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/test_support.h"

namespace kvlm {
namespace {

// Waits, for 10 s at most, until `count` reaches `want`; whether it did.
bool await_count(const std::atomic<int>& count, int want) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.load() < want)
    if (std::chrono::steady_clock::now() > until) return false;
  return true;
}

TEST(ThreadTeamTest, EveryMemberRunsOnceOnItsOwnThreadAllAtOnce) {
  for (int n : {1, 2, 3, 5}) {
    std::mutex m;
    std::vector<int> members;
    std::set<std::thread::id> threads;
    std::atomic<int> arrived{0};
    std::atomic<int> all_met{0};
    run_team(n, [&](int t, int nt) {
      {
        std::lock_guard<std::mutex> lock(m);
        members.push_back(t);
        threads.insert(std::this_thread::get_id());
        EXPECT_EQ(nt, n);
      }
      arrived.fetch_add(1);
      // Only members running at the same time all see the count reach n.
      if (await_count(arrived, n)) all_met.fetch_add(1);
    });
    std::sort(members.begin(), members.end());
    std::vector<int> want(n);
    for (int t = 0; t < n; ++t) want[t] = t;
    EXPECT_EQ(members, want) << n << " members";
    EXPECT_EQ(threads.size(), static_cast<size_t>(n));
    EXPECT_TRUE(threads.count(std::this_thread::get_id())) << "the caller is member 0";
    EXPECT_EQ(all_met.load(), n);
  }
}

TEST(ThreadTeamTest, BarrierOrdersRounds) {
  for (int n : {2, 3, 4}) {
    constexpr int kRounds = 2000;
    std::vector<std::atomic<int>> slot(n);
    std::atomic<int> wrong{0};
    TeamBarrier barrier(n);
    run_team(n, [&](int t, int nt) {
      for (int round = 1; round <= kRounds; ++round) {
        slot[t].store(round, std::memory_order_relaxed);
        barrier.arrive_and_wait();
        for (int i = 0; i < nt; ++i)  // all wrote this round, none the next yet
          if (slot[i].load(std::memory_order_relaxed) != round) wrong.fetch_add(1);
        barrier.arrive_and_wait();
      }
    });
    EXPECT_EQ(wrong.load(), 0) << n << " members";
  }
}

TEST(ThreadTeamTest, StaticSharesAreContiguousAndEven) {
  for (int n_tasks : {0, 1, 7, 12, 100})
    for (int members : {1, 2, 3, 5, 16}) {
      int next = 0;
      for (int t = 0; t < members; ++t) {
        const auto [begin, end] = static_share(n_tasks, t, members);
        EXPECT_EQ(begin, next);
        const int len = end - begin;
        EXPECT_TRUE(len == n_tasks / members || len == n_tasks / members + 1);
        EXPECT_EQ(len, n_tasks / members + (t < n_tasks % members ? 1 : 0));
        next = end;
      }
      EXPECT_EQ(next, n_tasks);
    }
}

TEST(ThreadTeamTest, ParallelForAndClaimedTasksCoverEachTaskOnce) {
  for (int n : {0, 1, 2, 5, 99, 1000})
    for (int threads : {1, 2, 3, 7}) {
      std::vector<std::atomic<int>> seen(n);
      parallel_for(threads, size_t(n), [&](size_t i) { seen[i].fetch_add(1); });
      for (int i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << "parallel_for, task " << i;
      std::vector<std::atomic<int>> claimed(n);
      TaskCounter tasks;
      run_team(threads, [&](int, int) {
        for (int task = tasks.claim(); task < n; task = tasks.claim()) claimed[task].fetch_add(1);
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(claimed[i].load(), 1) << "claimed, task " << i;
    }
}

TEST(ThreadTeamTest, ARunInsideAJobStaysOnItsCaller) {
  std::atomic<int> inner_calls{0}, wrong{0};
  run_team(2, [&](int, int) {
    const auto outer = std::this_thread::get_id();
    run_team(4, [&](int t, int nt) {
      inner_calls.fetch_add(1);
      if (t != 0 || nt != 1 || std::this_thread::get_id() != outer) wrong.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_calls.load(), 2);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadTeamTest, MemberZerosExceptionReturnsAfterTheWorkersFinish) {
  std::atomic<int> workers_done{0};
  EXPECT_THROW(run_team(3,
                        [&](int t, int) {
                          if (t == 0) throw std::runtime_error("member 0 failed");
                          std::this_thread::sleep_for(std::chrono::milliseconds(20));
                          workers_done.fetch_add(1);
                        }),
               std::runtime_error);
  EXPECT_EQ(workers_done.load(), 2);
  std::atomic<int> ran{0};
  run_team(3, [&](int, int) { ran.fetch_add(1); });  // the team still works
  EXPECT_EQ(ran.load(), 3);
}

TEST(ThreadTeamTest, CallingThreadsHaveTheirOwnTeams) {
  constexpr int kCallers = 3, kJobs = 300;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&] {
      for (int job = 0; job < kJobs; ++job) {
        std::vector<int> ran(2, 0);
        run_team(2, [&](int t, int) { ++ran[t]; });
        if (ran[0] != 1 || ran[1] != 1) wrong.fetch_add(1);
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadTeamTest, WorkersThatSleptWakeForTheNextJob) {
  for (int pause_ms : {0, 1, 5, 20}) {  // past the workers' spinning: they sleep, then wake
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    std::atomic<int> ran{0};
    run_team(2, [&](int, int) { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), 2) << "after " << pause_ms << " ms idle";
  }
}

// Where OpenMP binds threads (OMP_PROC_BIND), libgomp binds the first thread to one place before
// main; a worker started from it must not stay there. Runs in the child process of the test
// below, which sets OMP_PROC_BIND=true; skipped elsewhere.
TEST(ThreadTeamBoundTest, MembersRunOnTheirOwnPlaces) {
  if (omp_get_proc_bind() == omp_proc_bind_false || omp_get_num_places() < 2)
    GTEST_SKIP() << "needs OMP_PROC_BIND and two places or more";
  const int n = std::min(omp_get_num_places(), 4);
  std::vector<std::set<int>> cpus(n);
  run_team(n, [&](int t, int) {
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus[t].insert(cpu);
  });
  for (int t = 1; t < n; ++t) {
    std::vector<int> place(static_cast<size_t>(omp_get_place_num_procs(t)));
    omp_get_place_proc_ids(t, place.data());
    EXPECT_EQ(cpus[t], std::set<int>(place.begin(), place.end())) << "member " << t;
  }
}

TEST(ThreadTeamTest, BoundThreadsRunOnTheirOwnPlaces) {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(len, 0);
  self[len] = 0;
  const auto r = test::run_program(
      "env", std::string("OMP_PROC_BIND=true '") + self +
                 "' --gtest_filter=ThreadTeamBoundTest.MembersRunOnTheirOwnPlaces");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  if (r.out.find("[  SKIPPED ] 1 test") != std::string::npos)
    GTEST_SKIP() << "one place: nothing to bind apart on this machine";
  EXPECT_NE(r.out.find("[  PASSED  ] 1 test"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvlm
