/* kernels/calibrate_avx2 — the FMA peak probe (kernels/calibrate_simd.h), 256-bit. */
#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/calibrate_simd.h"
#endif
