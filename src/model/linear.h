/*
 * model/linear — a Linear layer (y = x·wᵀ + b, f32 or quantised weights) on the context's thread
 * pool: how the GEMM is planned over the threads (which thread computes which output columns)
 * and handed to the kernels. The transformer blocks, the embeddings and the heads all run their
 * matrix products through it; it is the last step of the model layer before kernels/.
 */
#ifndef KR_MODEL_LINEAR_H
#define KR_MODEL_LINEAR_H

#include "base/workspace.h"
#include "kronos.h"
#include "model/weights.h"

/* y[m][n_out] = x[m][n_in]·wᵀ + b on the pool, with the f32 or the quantised weight (the
 * latter needs scratch: fails only when that cannot be allocated). Records x into l->stats
 * when calibrating. */
kr_status kr_linear_run(const kr_exec *ex, const kr_linear *l, const float *x, int m, int ldx,
                        float *y, int ldy, kr_error *err);

/* kr_linear_run for n (<= 4) Linears of the same input x (same n_in): y[i] = x·l[i]ᵀ + b, in
 * one parallel region, each output equal to its own kr_linear_run. */
kr_status kr_linear_run_multi(const kr_exec *ex, int n, const kr_linear *const *l, const float *x,
                              int m, int ldx, float *const *y, const int *ldy, kr_error *err);

#endif
