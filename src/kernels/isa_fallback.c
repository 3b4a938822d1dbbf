/*
 * kernels/isa_fallback — on CPUs other than x86-64 the AVX2 / AVX-512 files compile to
 * nothing; this gives their kernels.h names a body (the scalar reference) so code and tests
 * that name a variant still link. Dispatch never picks them there: kr_isa_supported() is 0.
 */
#include "kernels/calibrate.h"
#include "kernels/kernels.h"
#include "kernels/kv_convert.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/quant.h"
#include "kernels/train_kernels.h"

#if !defined(__x86_64__)
void kr_gemm_f32_reserve_avx512(int M, int K) {
    (void)M;
    (void)K;
}
void kr_gemm_f32_reserve_avx2(int M, int K) {
    (void)M;
    (void)K;
}
size_t kr_gemm_f32_packed_a_floats_avx512(int M, int K) {
    (void)M;
    (void)K;
    return 0;
}
void kr_gemm_f32_pack_a_avx512(int M, int K, const float *A, int lda, float *pa, int m0, int m1) {
    (void)M, (void)K, (void)A, (void)lda, (void)pa, (void)m0, (void)m1;
}
void kr_gemm_f32_packed_avx512(int M, int N, int K, const float *A, int lda, const float *pa,
                               const float *W, const float *bias, float *C, int ldc, int ith,
                               int nth) {
    (void)pa;
    kr_gemm_f32_scalar(M, N, K, A, lda, W, bias, C, ldc, ith, nth);
}
#define KR_FALLBACK(isa)                                                                           \
    void kr_gemm_f32_##isa(int M, int N, int K, const float *A, int lda, const float *W,           \
                           const float *bias, float *C, int ldc, int ith, int nth) {               \
        kr_gemm_f32_scalar(M, N, K, A, lda, W, bias, C, ldc, ith, nth);                            \
    }                                                                                              \
    void kr_attend_f32_##isa(const float *q, int head_dim, float scale, const kr_kv_span *spans,   \
                             int n_spans, float *scratch, float *out) {                            \
        kr_attend_f32_scalar(q, head_dim, scale, spans, n_spans, scratch, out);                    \
    }                                                                                              \
    void kr_attend_multi_f32_##isa(int nq, const float *const *q, int head_dim, float scale,       \
                                   const kr_kv_span *shared, int n_shared,                         \
                                   const kr_kv_span *const *own, const int *n_own, float *scratch, \
                                   int scratch_stride, float *const *out) {                        \
        kr_attend_multi_f32_scalar(nq, q, head_dim, scale, shared, n_shared, own, n_own, scratch,  \
                                   scratch_stride, out);                                           \
    }                                                                                              \
    void kr_attend_causal_f32_##isa(int nq, const float *const *q, int head_dim, float scale,      \
                                    const kr_kv_span *spans, int n_spans, const int *n_keys,       \
                                    float *scratch, int scratch_stride, float *const *out) {       \
        kr_attend_causal_f32_scalar(nq, q, head_dim, scale, spans, n_spans, n_keys, scratch,       \
                                    scratch_stride, out);                                          \
    }                                                                                              \
    void kr_rmsnorm_f32_##isa(int n_rows, int d, const float *x, int ldx, const float *w,          \
                              float eps, float *y, int ldy) {                                      \
        kr_rmsnorm_f32_scalar(n_rows, d, x, ldx, w, eps, y, ldy);                                  \
    }                                                                                              \
    void kr_rope_f32_##isa(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,     \
                           const float *inv_freq) {                                                \
        kr_rope_f32_scalar(n_rows, n_heads, head_dim, x, ldx, pos0, inv_freq);                     \
    }                                                                                              \
    void kr_silu_mul_f32_##isa(int n, const float *a, const float *b, float *out) {                \
        kr_silu_mul_f32_scalar(n, a, b, out);                                                      \
    }                                                                                              \
    void kr_add_f32_##isa(int n, const float *x, float *y) { kr_add_f32_scalar(n, x, y); }         \
    void kr_softmax_f32_##isa(int n, const float *x, float *y) { kr_softmax_f32_scalar(n, x, y); } \
    double kr_fma_burn_##isa(long iters) { return kr_fma_burn_scalar(iters); }                     \
    void kr_gemm_nn_f32_##isa(int M, int N, int K, const float *A, int lda, const float *B,        \
                              int ldb, float *C, int ldc, int accumulate, int ith, int nth) {      \
        kr_gemm_nn_f32_scalar(M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);              \
    }                                                                                              \
    void kr_gemm_tn_f32_##isa(int M, int N, int K, const float *A, int lda, const float *B,        \
                              int ldb, float *C, int ldc, int accumulate, int ith, int nth) {      \
        kr_gemm_tn_f32_scalar(M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);              \
    }                                                                                              \
    void kr_gemm_nn_bias_f32_##isa(int M, int N, int K, const float *A, int lda, const float *B,   \
                                   int ldb, const float *bias, float *C, int ldc, int ith,         \
                                   int nth) {                                                      \
        kr_gemm_nn_bias_f32_scalar(M, N, K, A, lda, B, ldb, bias, C, ldc, ith, nth);               \
    }

KR_FALLBACK(avx2)
KR_FALLBACK(avx512)

/* W8A8 (quant.h). */
#define KR_FALLBACK_INT8(isa)                                                                     \
    void kr_quant_act_u8_##isa(int m0, int m1, int k, int kp, const float *A, int lda,            \
                               const float *in_scale, uint8_t *q, float *scale, int32_t *zero) {  \
        kr_quant_act_u8_scalar(m0, m1, k, kp, A, lda, in_scale, q, scale, zero);                  \
    }                                                                                             \
    void kr_qgemm_int8_##isa(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,     \
                             const int32_t *azero, const float *bias, float *C, int ldc, int ith, \
                             int nth) {                                                           \
        kr_qgemm_int8_scalar(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);                    \
    }

KR_FALLBACK_INT8(avx2)
void kr_qgemm_int8_avx2_reserve(int M, const kr_qmat *w) {
    (void)M;
    (void)w;
}
KR_FALLBACK_INT8(avx512)
const int kr_qgemm_int8_avxvnni_built = 0;
void kr_qgemm_int8_avxvnni_reserve(int M, const kr_qmat *w) {
    (void)M;
    (void)w;
}
void kr_qgemm_int8_avxvnni(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                           const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                           int nth) {
    kr_qgemm_int8_scalar(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);
}

/* KV-cache conversions (kv_convert.h). */
#define KR_FALLBACK_KV(isa)                                                                 \
    void kr_kv_pack_bf16_##isa(const float *x, uint16_t *out, size_t n) {                   \
        kr_kv_pack_bf16_scalar(x, out, n);                                                  \
    }                                                                                       \
    void kr_kv_unpack_bf16_##isa(const uint16_t *h, float *out, size_t n) {                 \
        kr_kv_unpack_bf16_scalar(h, out, n);                                                \
    }                                                                                       \
    void kr_kv_pack_int8_##isa(const float *x, int8_t *q, float *scale, int d, int group) { \
        kr_kv_pack_int8_scalar(x, q, scale, d, group);                                      \
    }                                                                                       \
    void kr_kv_unpack_int8_##isa(const int8_t *q, const float *scale, float *out, int d,    \
                                 int group) {                                               \
        kr_kv_unpack_int8_scalar(q, scale, out, d, group);                                  \
    }

KR_FALLBACK_KV(avx2)
KR_FALLBACK_KV(avx512)

/* Training (train_kernels.h). */
#define KR_FALLBACK_TRAIN(isa)                                                                  \
    void kr_attn_head_fwd_##isa(const kr_attn_head *h, const float *q, const float *k,          \
                                const float *v, float *out, float *scratch) {                   \
        kr_attn_head_fwd_scalar(h, q, k, v, out, scratch);                                      \
    }                                                                                           \
    void kr_attn_head_bwd_##isa(const kr_attn_head *h, const float *q, const float *k,          \
                                const float *v, const float *out, const float *dout, float *dq, \
                                float *dk, float *dv, float *scratch) {                         \
        kr_attn_head_bwd_scalar(h, q, k, v, out, dout, dq, dk, dv, scratch);                    \
    }

#define KR_FALLBACK_TRAIN_OPS(isa)                                                                 \
    void kr_rmsnorm_fwd_rows_##isa(int n_rows, int d, const float *x, const float *w, float eps,   \
                                   float *y, float *rstd) {                                        \
        kr_rmsnorm_fwd_rows_scalar(n_rows, d, x, w, eps, y, rstd);                                 \
    }                                                                                              \
    void kr_rmsnorm_apply_rows_##isa(int n_rows, int d, const float *x, const float *rstd,         \
                                     const float *w, float *y) {                                   \
        kr_rmsnorm_apply_rows_scalar(n_rows, d, x, rstd, w, y);                                    \
    }                                                                                              \
    void kr_rmsnorm_bwd_rows_##isa(int n_rows, int d, const float *dy, const float *x,             \
                                   const float *rstd, const float *w, float *dx, int accumulate) { \
        kr_rmsnorm_bwd_rows_scalar(n_rows, d, dy, x, rstd, w, dx, accumulate);                     \
    }                                                                                              \
    void kr_rmsnorm_gw_cols_##isa(int n_rows, int d, int c0, int c1, const float *dy,              \
                                  const float *x, const float *rstd, float *gw) {                  \
        kr_rmsnorm_gw_cols_scalar(n_rows, d, c0, c1, dy, x, rstd, gw);                             \
    }                                                                                              \
    void kr_colsum_add_cols_##isa(int n_rows, int ld, int c0, int c1, const float *x,              \
                                  float *out) {                                                    \
        kr_colsum_add_cols_scalar(n_rows, ld, c0, c1, x, out);                                     \
    }                                                                                              \
    void kr_swiglu_bwd_##isa(int n, const float *dg, float *h1, float *h3, float *g) {             \
        kr_swiglu_bwd_scalar(n, dg, h1, h3, g);                                                    \
    }                                                                                              \
    void kr_rope_rows_##isa(int n_rows, int n_heads, int half, float *x, int ld, const float *cos, \
                            const float *sin, float sign) {                                        \
        kr_rope_rows_scalar(n_rows, n_heads, half, x, ld, cos, sin, sign);                         \
    }                                                                                              \
    double kr_softmax_xent_row_##isa(int V, float *x, int target) {                                \
        return kr_softmax_xent_row_scalar(V, x, target);                                           \
    }                                                                                              \
    void kr_xent_grad_row_##isa(int V, float *p, int target, float scale) {                        \
        kr_xent_grad_row_scalar(V, p, target, scale);                                              \
    }                                                                                              \
    void kr_adamw_f32_##isa(size_t n, const kr_adamw *a, float *w, const float *g, float *m,       \
                            float *v) {                                                            \
        kr_adamw_f32_scalar(n, a, w, g, m, v);                                                     \
    }

KR_FALLBACK_TRAIN_OPS(avx2)
KR_FALLBACK_TRAIN_OPS(avx512)
KR_FALLBACK_TRAIN(avx2)
KR_FALLBACK_TRAIN(avx512)

/* Dequantisers and the BF16 × BF16 path (quant.h); the latter is only reached when
 * kr_cpu_has_avx512_bf16(), never off x86. */
void kr_dequant_rows_avx2(const kr_qmat *w, int r0, int r1, float *out, int ldo) {
    kr_dequant_rows_scalar(w, r0, r1, out, ldo);
}
void kr_dequant_rows_avx512(const kr_qmat *w, int r0, int r1, float *out, int ldo) {
    kr_dequant_rows_scalar(w, r0, r1, out, ldo);
}
void kr_quant_act_bf16_avx512(int m0, int m1, int k, int kp, const float *A, int lda,
                              const float *in_scale, uint16_t *out) {
    kr_quant_act_bf16_scalar(m0, m1, k, kp, A, lda, in_scale, out);
}
void kr_qgemm_bf16_avx512bf16(int M, const kr_qmat *w, const uint16_t *abf, const float *bias,
                              float *C, int ldc, int ith, int nth) {
    kr_qgemm_bf16_scalar(M, w, abf, bias, C, ldc, ith, nth);
}
#endif
