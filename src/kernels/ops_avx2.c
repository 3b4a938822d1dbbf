/* kernels/ops_avx2 — the row-wise ops (kernels/ops_simd.h) at 8 lanes, AVX2 + FMA. */
#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/ops_simd.h"
#endif
