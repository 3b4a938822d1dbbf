/* train/linalg — see linalg.h. */
#include "train/linalg.h"

#include "kernels/kernels.h"
#include "kernels/train_kernels.h"

const char *tr_part_name(tr_part part) {
    static const char *const names[TR_PART_COUNT] = {
        [TR_PART_GEMM_FWD] = "gemm_forward",
        [TR_PART_GEMM_DX] = "gemm_input_grad",
        [TR_PART_GEMM_DW] = "gemm_weight_grad",
        [TR_PART_ATTN_FWD] = "attention_forward",
        [TR_PART_ATTN_BWD] = "attention_backward",
        [TR_PART_NORM] = "rmsnorm",
        [TR_PART_ROPE] = "rope",
        [TR_PART_SWIGLU] = "swiglu",
        [TR_PART_LOSS] = "loss",
        [TR_PART_EMBED] = "embedding",
        [TR_PART_ELEMENTWISE] = "elementwise",
        [TR_PART_OPTIM] = "optimizer",
    };
    return part >= 0 && part < TR_PART_COUNT ? names[part] : "unknown";
}

/* Which kernel a gemm_job runs: C = A W^T (+ bias), A B, A^T B, or A B + bias. */
typedef enum gemm_kind { GEMM_NT, GEMM_NN, GEMM_TN, GEMM_NN_BIAS } gemm_kind;

typedef struct gemm_job {
    gemm_kind kind;
    int M, N, K, lda, ldb, ldc, accumulate;
    const float *A, *B, *bias;
    float *C;
} gemm_job;

static void gemm_region(void *p, int ith, int nth) {
    const gemm_job *j = p;
    switch (j->kind) {
    case GEMM_NT:
        kr_gemm_f32(j->M, j->N, j->K, j->A, j->lda, j->B, j->bias, j->C, j->ldc, ith, nth);
        break;
    case GEMM_NN:
        kr_gemm_nn_f32(j->M, j->N, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc, j->accumulate,
                       ith, nth);
        break;
    case GEMM_TN:
        kr_gemm_tn_f32(j->M, j->N, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc, j->accumulate,
                       ith, nth);
        break;
    case GEMM_NN_BIAS:
        kr_gemm_nn_bias_f32(j->M, j->N, j->K, j->A, j->lda, j->B, j->ldb, j->bias, j->C, j->ldc,
                            ith, nth);
        break;
    }
}

/* Runs one product over the pool's threads as phase `part` (ldb, bias and accumulate as the
 * kind uses them); an empty C is nothing to do. */
static void run_gemm(kr_pool *pool, tr_part part, gemm_kind kind, int M, int N, int K,
                     const float *A, int lda, const float *B, int ldb, const float *bias, float *C,
                     int ldc, int accumulate) {
    if (M <= 0 || N <= 0) return;
    gemm_job j = { kind, M, N, K, lda, ldb, ldc, accumulate, A, B, bias, C };
    kr_pool_run_part(pool, (int)part, gemm_region, &j);
}

void tr_gemm_nt(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                const float *W, const float *bias, float *C, int ldc) {
    run_gemm(pool, part, GEMM_NT, M, N, K, A, lda, W, 0, bias, C, ldc, 0);
}

void tr_gemm_nn(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                const float *B, int ldb, float *C, int ldc, int accumulate) {
    run_gemm(pool, part, GEMM_NN, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate);
}

void tr_gemm_nn_bias(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                     const float *B, int ldb, const float *bias, float *C, int ldc) {
    run_gemm(pool, part, GEMM_NN_BIAS, M, N, K, A, lda, B, ldb, bias, C, ldc, 0);
}

void tr_gemm_tn(kr_pool *pool, tr_part part, int M, int N, int K, const float *A, int lda,
                const float *B, int ldb, float *C, int ldc, int accumulate) {
    run_gemm(pool, part, GEMM_TN, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate);
}

/* Column ranges in units of 16 (a cache line of floats), so threads never share a line. */
static void col_range(int n_cols, int ith, int nth, int *c0, int *c1) {
    int units = (n_cols + 15) / 16;
    int u0 = (int)((long long)units * ith / nth), u1 = (int)((long long)units * (ith + 1) / nth);
    *c0 = u0 * 16 < n_cols ? u0 * 16 : n_cols;
    *c1 = u1 * 16 < n_cols ? u1 * 16 : n_cols;
}

typedef struct colsum_job {
    int M, N, ldx;
    const float *X;
    float *out;
} colsum_job;

static void colsum_region(void *p, int ith, int nth) {
    const colsum_job *j = p;
    int c0, c1;
    col_range(j->N, ith, nth, &c0, &c1);
    if (c0 < c1) kr_colsum_add_cols(j->M, j->ldx, c0, c1, j->X, j->out);
}

void tr_colsum_add(kr_pool *pool, tr_part part, int M, int N, const float *X, int ldx, float *out) {
    colsum_job j = { M, N, ldx, X, out };
    kr_pool_run_part(pool, (int)part, colsum_region, &j);
}

typedef struct range_job {
    int n;
    int cols;
    tr_rows_fn fn;
    void *ctx;
} range_job;

static void range_region(void *p, int ith, int nth) {
    const range_job *j = p;
    int a, b;
    if (j->cols) {
        col_range(j->n, ith, nth, &a, &b);
    } else {
        a = (int)((long long)j->n * ith / nth);
        b = (int)((long long)j->n * (ith + 1) / nth);
    }
    if (a < b) j->fn(j->ctx, a, b);
}

void tr_for_rows(kr_pool *pool, tr_part part, int n_rows, tr_rows_fn fn, void *ctx) {
    if (n_rows <= 0) return;
    range_job j = { n_rows, 0, fn, ctx };
    kr_pool_run_part(pool, (int)part, range_region, &j);
}

void tr_for_cols(kr_pool *pool, tr_part part, int n_cols, tr_rows_fn fn, void *ctx) {
    if (n_cols <= 0) return;
    range_job j = { n_cols, 1, fn, ctx };
    kr_pool_run_part(pool, (int)part, range_region, &j);
}
