/* kernels/calibrate_avx512 — the FMA peak probe (kernels/calibrate_simd.h), 512-bit. */
#if defined(__x86_64__)
#define KR_WIDTH_AVX512
#include "kernels/calibrate_simd.h"
#endif
