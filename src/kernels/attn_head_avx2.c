/*
 * kernels/attn_head_avx2 — attention of one head over a sequence (train_kernels.h) with AVX2
 * + FMA: blocks of 24 queries in three vectors, 4-key score tiles, the loop nest of
 * attn_head_body.h.
 */
#include "kernels/train_kernels.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/simd_width.h"

#define AH_ACC 12
#define AH_NAME(x) x##_avx2_ah
#include "kernels/attn_head_body.h"

void kr_attn_head_fwd_avx2(const kr_attn_head *h, const float *q, const float *k, const float *v,
                           float *out, float *scratch) {
    kr_attn_head_fwd_avx2_ah(h, q, k, v, out, scratch);
}

void kr_attn_head_bwd_avx2(const kr_attn_head *h, const float *q, const float *k, const float *v,
                           const float *out, const float *dout, float *dq, float *dk, float *dv,
                           float *scratch) {
    kr_attn_head_bwd_avx2_ah(h, q, k, v, out, dout, dq, dk, dv, scratch);
}
#endif
