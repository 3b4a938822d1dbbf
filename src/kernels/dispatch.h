/*
 * kernels/dispatch — the one kernel dispatch table (internal to src/kernels/): a row per ISA
 * holding that ISA's variant of every kernel family, filled once on first use from CPUID
 * (+ XGETBV), and the active row chosen at run time (KRONOS_ISA=scalar|avx2|avx512 lowers it;
 * kr_isa_set switches it; KRONOS_AMX=0 keeps the AVX-512 row's int8 GEMM off AMX,
 * KRONOS_AVXVNNI=0 the AVX2 row's off AVX-VNNI). Every dispatched entry point — kernels.h,
 * quant.h, kv_convert.h, calibrate.h, train_kernels.h — goes through it, so adding a family is
 * one field and one entry per ISA here, and which variant runs is never decided anywhere else
 * (as ggml's type_traits).
 *
 * Off x86 only the scalar row is ever chosen (isa_fallback.c gives the other names a body so
 * the rows still link).
 */
#ifndef KR_KERNELS_DISPATCH_H
#define KR_KERNELS_DISPATCH_H

#include "kernels/calibrate.h"
#include "kernels/kernels.h"
#include "kernels/kv_convert.h"
#include "kernels/quant.h"
#include "kernels/train_kernels.h"

typedef void (*kr_rmsnorm_f32_fn)(int n_rows, int d, const float *x, int ldx, const float *w,
                                  float eps, float *y, int ldy);
typedef void (*kr_rope_f32_fn)(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
                               const float *inv_freq);
typedef void (*kr_silu_mul_f32_fn)(int n, const float *a, const float *b, float *out);
typedef void (*kr_add_f32_fn)(int n, const float *x, float *y);
typedef void (*kr_softmax_f32_fn)(int n, const float *x, float *y);
typedef void (*kr_quant_act_bf16_fn)(int m0, int m1, int k, int kp, const float *A, int lda,
                                     const float *in_scale, uint16_t *out);
typedef void (*kr_qgemm_bf16_fn)(int M, const kr_qmat *w, const uint16_t *abf, const float *bias,
                                 float *C, int ldc, int ith, int nth);
typedef void (*kr_kv_pack_bf16_fn)(const float *x, uint16_t *out, size_t n);
typedef void (*kr_kv_unpack_bf16_fn)(const uint16_t *h, float *out, size_t n);
typedef void (*kr_kv_pack_int8_fn)(const float *x, int8_t *q, float *scale, int d, int group);
typedef void (*kr_kv_unpack_int8_fn)(const int8_t *q, const float *scale, float *out, int d,
                                     int group);
typedef double (*kr_fma_burn_fn)(long iters);
typedef void (*kr_rmsnorm_fwd_rows_fn)(int n_rows, int d, const float *x, const float *w, float eps,
                                       float *y, float *rstd);
typedef void (*kr_rmsnorm_apply_rows_fn)(int n_rows, int d, const float *x, const float *rstd,
                                         const float *w, float *y);
typedef void (*kr_rmsnorm_bwd_rows_fn)(int n_rows, int d, const float *dy, const float *x,
                                       const float *rstd, const float *w, float *dx,
                                       int accumulate);
typedef void (*kr_rmsnorm_gw_cols_fn)(int n_rows, int d, int c0, int c1, const float *dy,
                                      const float *x, const float *rstd, float *gw);
typedef void (*kr_colsum_add_cols_fn)(int n_rows, int ld, int c0, int c1, const float *x,
                                      float *out);
typedef void (*kr_swiglu_bwd_fn)(int n, const float *dg, float *h1, float *h3, float *g);
typedef void (*kr_rope_rows_fn)(int n_rows, int n_heads, int half, float *x, int ld,
                                const float *cos, const float *sin, float sign);
typedef double (*kr_softmax_xent_row_fn)(int V, float *x, int target);
typedef void (*kr_xent_grad_row_fn)(int V, float *p, int target, float scale);
typedef void (*kr_adamw_f32_fn)(size_t n, const kr_adamw *a, float *w, const float *g, float *m,
                                float *v);

/* One ISA's variant of every family. */
typedef struct kr_kernel_table {
    kr_isa isa;
    /* f32 (kernels.h) */
    kr_gemm_f32_fn gemm_f32;
    /* GEMM on a packed A: only in the AVX-512 row (the others read A in place), else NULL */
    kr_gemm_f32_packed_a_floats_fn gemm_f32_packed_a_floats;
    kr_gemm_f32_pack_a_fn gemm_f32_pack_a;
    kr_gemm_f32_packed_fn gemm_f32_packed;
    kr_gemm_f32_reserve_fn gemm_f32_reserve; /* NULL: the GEMM keeps no per-thread buffer */
    kr_gemm_nn_f32_fn gemm_nn_f32; /* C (+)= A·B, B as stored */
    kr_gemm_nn_f32_fn gemm_tn_f32; /* C (+)= Aᵀ·B */
    kr_gemm_nn_bias_f32_fn gemm_nn_bias_f32; /* C = bias + A·B */
    kr_attend_f32_fn attend_f32;
    kr_attend_multi_f32_fn attend_multi_f32;
    kr_attend_causal_f32_fn attend_causal_f32;
    kr_rmsnorm_f32_fn rmsnorm_f32;
    kr_rope_f32_fn rope_f32;
    kr_silu_mul_f32_fn silu_mul_f32;
    kr_add_f32_fn add_f32;
    kr_softmax_f32_fn softmax_f32;
    /* quantised weights (quant.h) */
    kr_dequant_rows_fn dequant_rows;
    kr_quant_act_u8_fn quant_act_u8;
    kr_qgemm_int8_fn qgemm_int8;
    /* per-thread buffer of qgemm_int8 (the AMX picker's), else NULL */
    void (*qgemm_int8_reserve)(int M, const kr_qmat *w);
    /* bf16 × bf16 products: only in the AVX-512 row of a CPU with AVX512_BF16, else NULL
     * (bf16 weights then run weight-only) */
    kr_quant_act_bf16_fn quant_act_bf16;
    kr_qgemm_bf16_fn qgemm_bf16;
    /* KV-cache storage (kv_convert.h) */
    kr_kv_pack_bf16_fn kv_pack_bf16;
    kr_kv_unpack_bf16_fn kv_unpack_bf16;
    kr_kv_pack_int8_fn kv_pack_int8;
    kr_kv_unpack_int8_fn kv_unpack_int8;
    /* training (train_kernels.h) */
    kr_attn_head_fwd_fn attn_head_fwd;
    kr_attn_head_bwd_fn attn_head_bwd;
    kr_rmsnorm_fwd_rows_fn rmsnorm_fwd_rows;
    kr_rmsnorm_apply_rows_fn rmsnorm_apply_rows;
    kr_rmsnorm_bwd_rows_fn rmsnorm_bwd_rows;
    kr_rmsnorm_gw_cols_fn rmsnorm_gw_cols;
    kr_colsum_add_cols_fn colsum_add_cols;
    kr_swiglu_bwd_fn swiglu_bwd;
    kr_rope_rows_fn rope_rows;
    kr_softmax_xent_row_fn softmax_xent_row;
    kr_xent_grad_row_fn xent_grad_row;
    kr_adamw_f32_fn adamw_f32;
    /* machine-peak probe (calibrate.h) */
    kr_fma_burn_fn fma_burn;
} kr_kernel_table;

/* The AVX-512 row's int8 GEMM on a CPU with AMX (kr_cpu_has_amx_int8): kr_qgemm_int8_amx
 * from a measured M up, kr_qgemm_int8_avx512 below (same bits either way). Without AMX the
 * row holds kr_qgemm_int8_avx512 itself. */
void kr_qgemm_int8_avx512_auto(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                               const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                               int nth);

/* kr_qgemm_int8_avx512_auto's per-thread AMX buffer, when M takes the AMX path. */
void kr_qgemm_int8_avx512_auto_reserve(int M, const kr_qmat *w);

/* The active row. Cheap (one atomic load after the first call); thread-safe. */
const kr_kernel_table *kr_kernels(void);
/* The row of isa, or NULL when this CPU does not run it. */
const kr_kernel_table *kr_kernels_for(kr_isa isa);

#endif
