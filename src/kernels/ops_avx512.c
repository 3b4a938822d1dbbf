/* kernels/ops_avx512 — the row-wise ops (kernels/ops_simd.h) at 16 lanes, AVX-512. */
#if defined(__x86_64__)
#define KR_WIDTH_AVX512
#include "kernels/ops_simd.h"
#endif
