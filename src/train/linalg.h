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

/* C[M×N] = A[M×K]·Wᵀ + bias, W stored [N×K] (a Linear's weight); bias may be NULL. */
void tr_gemm_nt(kr_pool *pool, int M, int N, int K, const float *A, int lda, const float *W,
                const float *bias, float *C, int ldc);
/* C[M×N] (+)= A[M×K]·B[K×N] (accumulate 1 adds). */
void tr_gemm_nn(kr_pool *pool, int M, int N, int K, const float *A, int lda, const float *B,
                int ldb, float *C, int ldc, int accumulate);
/* C[M×N] (+)= Aᵀ·B with A stored [K×M], B [K×N]. */
void tr_gemm_tn(kr_pool *pool, int M, int N, int K, const float *A, int lda, const float *B,
                int ldb, float *C, int ldc, int accumulate);
/* out[n] += Σ_m X[m][n] for n < N, m in order. */
void tr_colsum_add(kr_pool *pool, int M, int N, const float *X, int ldx, float *out);

/* fn(ctx, r0, r1) on disjoint row ranges covering [0, n_rows), one per thread. */
typedef void (*tr_rows_fn)(void *ctx, int r0, int r1);
void tr_for_rows(kr_pool *pool, int n_rows, tr_rows_fn fn, void *ctx);
/* fn(ctx, c0, c1) on disjoint column ranges covering [0, n_cols) (multiples of 16 wide). */
void tr_for_cols(kr_pool *pool, int n_cols, tr_rows_fn fn, void *ctx);

#endif
