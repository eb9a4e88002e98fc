// The machine's own limits, measured there and then: memory read bandwidth over an array far
// larger than the caches, and fp32 fused multiply-add throughput, both with all the threads the
// run uses and the best SIMD target. They are the rooflines `kvlm bench` holds the engine to.
#pragma once

#include <cstddef>
#include <memory>

#include "kvlm/status.h"
#include "ops/parallel.h"

namespace kvlm {

// Bytes per second of reading n_bytes (rounded down to whole vectors), best of `repeats`
// passes after one pass that touches the pages. Each thread sums its own contiguous part with
// independent vector accumulators. Fails if the array cannot be allocated.
Result<double> measure_read_bandwidth(size_t n_bytes, int repeats, const Parallel& par);

// The same measurement, repeated beside each timed window: the array is allocated and touched
// once, so a measurement costs only its passes (about 5 ms per 256 MB at 50 GB/s). Shared
// machines here switch between bandwidth states within milliseconds to seconds, so a fraction
// of the roofline is only meaningful against a bandwidth read right next to the window it
// judges.
class ReadBandwidthProbe {
 public:
  static Result<ReadBandwidthProbe> create(size_t n_bytes, const Parallel& par);
  // Bytes per second, best of `repeats` passes: the machine's peak.
  double measure(int repeats) const;
  // Bytes per second sustained over passes for at least `seconds`: all bytes over all the time.
  // Single passes here (about 5 ms each) range from 11 to 73 GB/s within a second as other
  // tenants come and go, so a window of decode steps is judged against what a plain stream got
  // over a window as long, not against the best pass.
  double measure_sustained(double seconds) const;
  size_t bytes() const;  // of the array, all resident

 private:
  struct Array;
  std::shared_ptr<Array> array_;
  int n_threads_ = 1;
};

// fp32 FLOP/s (an fma counts 2) of independent fma chains in registers on every thread, best
// of `repeats` runs of about `seconds_per_run` each.
double measure_fma_throughput(int repeats, double seconds_per_run, const Parallel& par);

}  // namespace kvlm
