// How idle OpenMP workers wait, set before the OpenMP runtime starts.
#pragma once

namespace kvlm::cli {

// Decode runs about 75 parallel regions per token; between them GNU OpenMP's workers spin,
// by default for 300,000 rounds before they sleep. On a machine where other work competes for
// the cores, a spinning worker holds a core its peer needs, and a decode step that takes
// 25 ms alone took 300 ms (measured: `kvlm demo` under a parallel build went from 0.5 s to
// 10.7 s cached). A spin of 10,000 rounds still covers the short gaps between regions on an
// idle machine and gives the core back soon on a busy one.
//
// libgomp reads its settings once, when it is loaded, before main; so when the user has set
// neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, this sets GOMP_SPINCOUNT and runs the program
// again in place (execv of /proc/self/exe, same arguments). Where that is impossible it
// returns and the program goes on with the library's defaults. Where threads are bound
// (OMP_PROC_BIND, OMP_PLACES), the program runs again on every CPU of the places, not on the
// one place libgomp had already bound the first thread to.
void set_openmp_wait_and_reexec(char** argv);

}  // namespace kvlm::cli
