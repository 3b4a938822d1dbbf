/*
 * kernels/gemm_nn_avx2 — C (+)= A·B and Aᵀ·B (kernels.h) with AVX2 + FMA: 6 × 16 register
 * tiles (12 accumulators of the 16 registers), the loop nest of gemm_nn_body.h.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/simd_width.h"

#define GNN_MR 6
/* pack_a stores GNN_MR = 6 of the 8 lanes: one VMASKMOVPS, as this kernel always has
 * (VW_STOREN would make it a 4- and a 2-lane store). */
#define GNN_STOREN(p, n, v) _mm256_maskstore_ps((p), kr_mask8(n), (v))
#include "kernels/gemm_nn_body.h"
#endif
