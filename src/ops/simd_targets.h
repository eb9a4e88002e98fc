// Which Highway targets kvlm's kernels are compiled for. Include this before any hwy header in
// every file that compiles per target (and in tests that list targets), so they all agree.
//
// Arm's SVE targets are left out: the tile kernels keep register tiles in arrays of vectors,
// which SVE's sizeless vector types do not allow. NEON serves Arm; x86 gets SSSE3, SSE4, AVX2
// and AVX-512, and EMU128 is the portable fallback.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
