/*
 * train/linalg — the products and row-wise passes of a training step, run on the trainer's
 * thread pool: GEMMs through the kernels' dispatch (NT for forward Linears, NN and TN for the
 * backward ones), column sums, and a static split of rows over the threads.
 *
 * Determinism: every helper gives each thread whole output elements (a GEMM's columns, a
 * column sum's columns, a row pass's rows) and computes each in an order fixed by the shapes
 * alone, so results are bit-identical for any thread count on one ISA.
 */
#ifndef KR_TRAIN_LINALG_H
#define KR_TRAIN_LINALG_H

#include <stddef.h>

#include "base/threadpool.h"

/* The parts of a training step, for its profile (kr_trainer_profile): every region a train
 * pass runs on the pool is timed under one of them when profiling is on. */
typedef enum tr_part {
    TR_PART_GEMM_FWD, /* forward Linears */
    TR_PART_GEMM_DX, /* input gradients of Linears */
    TR_PART_GEMM_DW, /* weight and bias gradients */
    TR_PART_ATTN_FWD,
    TR_PART_ATTN_BWD,
    TR_PART_NORM, /* RMSNorm forward, re-application, backward */
    TR_PART_ROPE,
    TR_PART_SWIGLU,
    TR_PART_LOSS, /* softmax, cross-entropy, s1 sampling, the quantiser */
    TR_PART_EMBED, /* embedding gathers and their gradients */
    TR_PART_ELEMENTWISE, /* residual adds, dropout */
    TR_PART_OPTIM, /* gradient norm, AdamW, the transposed weights */
    TR_PART_COUNT
} tr_part;

/* "gemm_forward", ...: the part's name in kr_trainer_profile. */
const char *tr_part_name(tr_part part);

/* C[M×N] = A[M×K]·Wᵀ + bias, W stored [N×K] (a Linear's weight); bias may be NULL. */
void tr_gemm_nt(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                const float *W, const float *bias, float *C, int ldc);
/* C[M×N] (+)= A[M×K]·B[K×N] (accumulate 1 adds). */
void tr_gemm_nn(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                const float *B, int ldb, float *C, int ldc, int accumulate);
/* C[M×N] = bias + A[M×K]·B[K×N] (bias [N] in every row). */
void tr_gemm_nn_bias(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                     const float *B, int ldb, const float *bias, float *C, int ldc);
/* C[M×N] (+)= Aᵀ·B with A stored [K×M], B [K×N]. */
void tr_gemm_tn(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                const float *B, int ldb, float *C, int ldc, int accumulate);
/* out[n] += Σ_m X[m][n] for n < N, m in order. */
void tr_colsum_add(kr_pool *pool, tr_part part, int M, int N, const float *X, int ldx, float *out);

/* fn(ctx, r0, r1) on disjoint row ranges covering [0, n_rows), one per thread. */
typedef void (*tr_rows_fn)(void *ctx, int r0, int r1);
void tr_for_rows(kr_pool *pool, tr_part part, int n_rows, tr_rows_fn fn, void *ctx);
/* fn(ctx, c0, c1) on disjoint column ranges covering [0, n_cols) (multiples of 16 wide). */
void tr_for_cols(kr_pool *pool, tr_part part, int n_cols, tr_rows_fn fn, void *ctx);

#endif
