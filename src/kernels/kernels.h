/*
 * kernels — the numeric inner loops of the engine: GEMM, attention, norms, RoPE, activations.
 *
 * Every kernel has a scalar reference (always built, any CPU) and AVX2 / AVX-512 variants in
 * files compiled with their own ISA flags. The variant is chosen once from CPUID (+ XGETBV)
 * at first use; KRONOS_ISA=scalar|avx2|avx512 forces one (never above what the CPU has).
 * No ISA #ifdef leaves this folder.
 *
 * Determinism contract (the engine's exactness rests on it): for a given active ISA, every
 * output element is computed with a reduction order that depends only on the reduction length
 * (K, head_dim, number of keys) — never on M, on the row's position in the batch, on N tiling
 * or on the thread split. So a row gives bit-identical results alone or in a batch of 64, and
 * a KV-cached decode equals a full recomputation bit for bit.
 *
 * Threading: kernels that take (ith, nth) compute only their slice; the caller runs them on a
 * kr_pool. ith in [0, nth).
 */
#ifndef KR_KERNELS_H
#define KR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

typedef enum kr_isa { KR_ISA_SCALAR = 0, KR_ISA_AVX2 = 1, KR_ISA_AVX512 = 2, KR_ISA_COUNT } kr_isa;

/* Best variant this CPU runs, honouring KRONOS_ISA. */
kr_isa kr_isa_best(void);
/* Variant the dispatched kr_* entry points use now (kr_isa_best() until kr_isa_set). */
KR_PRIVATE kr_isa kr_isa_active(void);
/* 1 if the CPU (and OS) support the variant. */
KR_PRIVATE int kr_isa_supported(kr_isa isa);
/* Switches the dispatched variant (tests, bench). Ignored if unsupported; returns the
 * variant now active. Not thread-safe against running kernels. */
kr_isa kr_isa_set(kr_isa isa);
KR_PRIVATE const char *kr_isa_name(kr_isa isa);

/* ---- GEMM: C[M×N] = A[M×K] · Wᵀ + bias, W stored [N×K] row-major (a Linear weight).
 * lda/ldc are row strides in floats; bias may be NULL. Threads split the N dimension. */
typedef void (*kr_gemm_f32_fn)(int M, int N, int K, const float *A, int lda, const float *W,
                               const float *bias, float *C, int ldc, int ith, int nth);
void kr_gemm_f32(int M, int N, int K, const float *A, int lda, const float *W, const float *bias,
                 float *C, int ldc, int ith, int nth);
void kr_gemm_f32_scalar(int M, int N, int K, const float *A, int lda, const float *W,
                        const float *bias, float *C, int ldc, int ith, int nth);
void kr_gemm_f32_avx2(int M, int N, int K, const float *A, int lda, const float *W,
                      const float *bias, float *C, int ldc, int ith, int nth);
void kr_gemm_f32_avx512(int M, int N, int K, const float *A, int lda, const float *W,
                        const float *bias, float *C, int ldc, int ith, int nth);

/* ---- GEMM with B as stored (the backward pass's products): C[M×N] (+)= op(A)·B with
 *   NN  op(A) = A, A stored [M×K] (lda >= K):  dX = dY·W,  P·V;
 *   TN  op(A) = Aᵀ, A stored [K×M] (lda >= M): dW = dYᵀ·X, dK = dSᵀ·Q;
 * B stored [K×N] row-major (ldb >= N), C [M×N] (ldc >= N). accumulate = 1 adds to C, 0
 * overwrites it. Threads split the larger of M and N (each computes whole C elements).
 * Determinism: each C element is C's old value (or 0), then + a[k]·b[k] for k = 0, 1, ... in
 * order, one fused multiply-add at a time in the SIMD variants — a result never depends on M,
 * N, the tiling or the thread split. */
typedef void (*kr_gemm_nn_f32_fn)(int M, int N, int K, const float *A, int lda, const float *B,
                                  int ldb, float *C, int ldc, int accumulate, int ith, int nth);
void kr_gemm_nn_f32(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                    int ldc, int accumulate, int ith, int nth);
void kr_gemm_tn_f32(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                    int ldc, int accumulate, int ith, int nth);
void kr_gemm_nn_f32_scalar(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth);
void kr_gemm_tn_f32_scalar(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth);
void kr_gemm_nn_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float *C, int ldc, int accumulate, int ith, int nth);
void kr_gemm_tn_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float *C, int ldc, int accumulate, int ith, int nth);
void kr_gemm_nn_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth);
void kr_gemm_tn_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth);

/* C[M×N] = bias + A·B (NN; bias [N], in every row): each element its column's bias, then the
 * fused multiply-adds of kr_gemm_nn_f32 in order — the bits of copying the bias into C and
 * accumulating, without that pass over C (a Linear's forward from its transposed weight). */
typedef void (*kr_gemm_nn_bias_f32_fn)(int M, int N, int K, const float *A, int lda, const float *B,
                                       int ldb, const float *bias, float *C, int ldc, int ith,
                                       int nth);
void kr_gemm_nn_bias_f32(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         const float *bias, float *C, int ldc, int ith, int nth);
void kr_gemm_nn_bias_f32_scalar(int M, int N, int K, const float *A, int lda, const float *B,
                                int ldb, const float *bias, float *C, int ldc, int ith, int nth);
void kr_gemm_nn_bias_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                              const float *bias, float *C, int ldc, int ith, int nth);
void kr_gemm_nn_bias_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B,
                                int ldb, const float *bias, float *C, int ldc, int ith, int nth);

/* ---- The same GEMM with A packed once for several calls (Linears reading one input, N cut
 * into more slices than threads), where the active ISA's GEMM packs A (AVX-512, M >= 64).
 * kr_gemm_f32_packed_a_floats: floats of that packed copy (64-byte aligned), 0 when the GEMM
 * reads A in place (then call kr_gemm_f32). kr_gemm_f32_pack_a fills rows [m0, m1) of it (m0
 * a multiple of 4, so threads may split the rows). kr_gemm_f32_packed gives kr_gemm_f32's bits
 * from it; A itself is still passed (read in place if the packed path cannot run). */
size_t kr_gemm_f32_packed_a_floats(int M, int K);
void kr_gemm_f32_pack_a(int M, int K, const float *A, int lda, float *pa, int m0, int m1);
void kr_gemm_f32_packed(int M, int N, int K, const float *A, int lda, const float *pa,
                        const float *W, const float *bias, float *C, int ldc, int ith, int nth);
typedef size_t (*kr_gemm_f32_packed_a_floats_fn)(int M, int K);
typedef void (*kr_gemm_f32_pack_a_fn)(int M, int K, const float *A, int lda, float *pa, int m0,
                                      int m1);
typedef void (*kr_gemm_f32_packed_fn)(int M, int N, int K, const float *A, int lda, const float *pa,
                                      const float *W, const float *bias, float *C, int ldc, int ith,
                                      int nth);
/* Allocates the calling thread's packing buffer (kept per thread) at the size an M×·×K GEMM
 * uses, as its first such call would: a caller whose threads take slices as they go (so a
 * thread may take none of a region) calls it on each thread so that no later step allocates. */
void kr_gemm_f32_reserve(int M, int K);
typedef void (*kr_gemm_f32_reserve_fn)(int M, int K);
void kr_gemm_f32_reserve_avx512(int M, int K);
void kr_gemm_f32_reserve_avx2(int M, int K);
size_t kr_gemm_f32_packed_a_floats_avx512(int M, int K);
void kr_gemm_f32_pack_a_avx512(int M, int K, const float *A, int lda, float *pa, int m0, int m1);
void kr_gemm_f32_packed_avx512(int M, int N, int K, const float *A, int lda, const float *pa,
                               const float *W, const float *bias, float *C, int ldc, int ith,
                               int nth);

/* ---- Attention for one query and one head over keys given as spans (KV blocks).
 * out[head_dim] = Σ_j softmax_j(scale · q·k_j) · v_j over every key of every span, in span
 * order. k/v rows are head_dim floats at `stride` floats apart. scratch: >= total keys floats.
 * Keys are visited strictly in order, so splitting the same keys into different spans gives
 * bit-identical output. total keys must be >= 1. */
typedef struct kr_kv_span {
    const float *k;
    const float *v;
    int n; /* keys in this span */
    int stride; /* floats between consecutive keys (and values) */
} kr_kv_span;
typedef void (*kr_attend_f32_fn)(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                                 int n_spans, float *scratch, float *out);
void kr_attend_f32(const float *q, int head_dim, float scale, const kr_kv_span *spans, int n_spans,
                   float *scratch, float *out);
void kr_attend_f32_scalar(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                          int n_spans, float *scratch, float *out);
void kr_attend_f32_avx2(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                        int n_spans, float *scratch, float *out);
void kr_attend_f32_avx512(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                          int n_spans, float *scratch, float *out);

/* ---- Attention for nq queries of one head whose keys are the same `shared` spans followed by
 * each query's own spans (own[i][0 .. n_own[i]); own / n_own may be NULL for none). out[i] is
 * bit-identical to kr_attend_f32(q[i], head_dim, scale, shared ++ own[i], ...) for the active
 * ISA, but the shared keys and values are loaded once per block for all queries (L1 reuse).
 * scratch: nq × scratch_stride floats, scratch_stride >= total keys of any query. out[i] may
 * alias q[i]; the out rows must not overlap each other. A query with no keys gets zeros. */
typedef void (*kr_attend_multi_f32_fn)(int nq, const float *const *q, int head_dim, float scale,
                                       const kr_kv_span *shared, int n_shared,
                                       const kr_kv_span *const *own, const int *n_own,
                                       float *scratch, int scratch_stride, float *const *out);
void kr_attend_multi_f32(int nq, const float *const *q, int head_dim, float scale,
                         const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                         const int *n_own, float *scratch, int scratch_stride, float *const *out);
void kr_attend_multi_f32_scalar(int nq, const float *const *q, int head_dim, float scale,
                                const kr_kv_span *shared, int n_shared,
                                const kr_kv_span *const *own, const int *n_own, float *scratch,
                                int scratch_stride, float *const *out);
void kr_attend_multi_f32_avx2(int nq, const float *const *q, int head_dim, float scale,
                              const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                              const int *n_own, float *scratch, int scratch_stride,
                              float *const *out);
void kr_attend_multi_f32_avx512(int nq, const float *const *q, int head_dim, float scale,
                                const kr_kv_span *shared, int n_shared,
                                const kr_kv_span *const *own, const int *n_own, float *scratch,
                                int scratch_stride, float *const *out);

/* ---- Causal attention for nq queries of one head over one key sequence: query i attends to
 * the first n_keys[i] keys of the spans (the rows of a prompt or a re-run window, each seeing
 * itself and what precedes it). out[i] is bit-identical to kr_attend_f32(q[i], head_dim,
 * scale, those keys, ...) for the active ISA; each block of keys is read once for all queries,
 * and the AVX-512 variant scores 16 queries per vector (kernels/attn_qt_avx512.h). scratch: nq
 * × scratch_stride floats, scratch_stride >= every n_keys[i]; n_keys[i] <= the spans' keys.
 * out[i] may alias q[i]; the out rows must not overlap. A query with no keys gets zeros. */
typedef void (*kr_attend_causal_f32_fn)(int nq, const float *const *q, int head_dim, float scale,
                                        const kr_kv_span *spans, int n_spans, const int *n_keys,
                                        float *scratch, int scratch_stride, float *const *out);
void kr_attend_causal_f32(int nq, const float *const *q, int head_dim, float scale,
                          const kr_kv_span *spans, int n_spans, const int *n_keys, float *scratch,
                          int scratch_stride, float *const *out);
void kr_attend_causal_f32_scalar(int nq, const float *const *q, int head_dim, float scale,
                                 const kr_kv_span *spans, int n_spans, const int *n_keys,
                                 float *scratch, int scratch_stride, float *const *out);
void kr_attend_causal_f32_avx2(int nq, const float *const *q, int head_dim, float scale,
                               const kr_kv_span *spans, int n_spans, const int *n_keys,
                               float *scratch, int scratch_stride, float *const *out);
void kr_attend_causal_f32_avx512(int nq, const float *const *q, int head_dim, float scale,
                                 const kr_kv_span *spans, int n_spans, const int *n_keys,
                                 float *scratch, int scratch_stride, float *const *out);

/* ---- Row-wise ops (dispatched; _scalar/_avx2/_avx512 variants exist with the same
 * signatures). */
/* y[i] = x[i] · rsqrt(mean(x²) + eps) · w[i] for each of n_rows rows of length d. */
void kr_rmsnorm_f32(int n_rows, int d, const float *x, int ldx, const float *w, float eps, float *y,
                    int ldy);
/* In-place half-split RoPE on n_rows rows, each n_heads × head_dim: for position
 * p = pos0 + row and i < head_dim/2, with θ = (float)p · inv_freq[i]:
 *   x[i] ← x[i]·cos θ − x[i+h/2]·sin θ;  x[i+h/2] ← x[i+h/2]·cos θ + x[i]·sin θ. */
void kr_rope_f32(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
                 const float *inv_freq);
/* out[i] = silu(a[i]) · b[i], silu(x) = x / (1 + exp(−x)). out may alias a or b. */
void kr_silu_mul_f32(int n, const float *a, const float *b, float *out);
/* y[i] += x[i]. */
void kr_add_f32(int n, const float *x, float *y);
/* y = softmax(x) over n (max-subtracted). y may alias x. */
void kr_softmax_f32(int n, const float *x, float *y);

/* Per-ISA variants of the row-wise ops, for tests. */
void kr_rmsnorm_f32_scalar(int, int, const float *, int, const float *, float, float *, int);
void kr_rmsnorm_f32_avx2(int, int, const float *, int, const float *, float, float *, int);
void kr_rmsnorm_f32_avx512(int, int, const float *, int, const float *, float, float *, int);
void kr_rope_f32_scalar(int, int, int, float *, int, int, const float *);
void kr_rope_f32_avx2(int, int, int, float *, int, int, const float *);
void kr_rope_f32_avx512(int, int, int, float *, int, int, const float *);
void kr_silu_mul_f32_scalar(int, const float *, const float *, float *);
void kr_silu_mul_f32_avx2(int, const float *, const float *, float *);
void kr_silu_mul_f32_avx512(int, const float *, const float *, float *);
void kr_add_f32_scalar(int, const float *, float *);
void kr_add_f32_avx2(int, const float *, float *);
void kr_add_f32_avx512(int, const float *, float *);
void kr_softmax_f32_scalar(int, const float *, float *);
void kr_softmax_f32_avx2(int, const float *, float *);
void kr_softmax_f32_avx512(int, const float *, float *);

#endif
