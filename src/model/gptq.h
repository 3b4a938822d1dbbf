/*
 * model/gptq — GPTQ (Frantar et al., 2022): quantising a Linear's weight with second-order
 * error compensation from calibration inputs, into the existing INT8 and Q4 formats
 * (kernels/quant.h), so the kernels run the result unchanged.
 *
 * The layer's loss on calibration inputs X is ‖X·Wᵀ − X·Ŵᵀ‖², whose Hessian with respect to a
 * weight row is H = 2·XᵀX (the same for every row; the 2 cancels everywhere, so only XᵀX is
 * kept). Quantising input column i of a row leaves an error e that the not-yet-quantised
 * columns j > i absorb, in the proportions of the upper Cholesky factor U of H⁻¹ (H⁻¹ = UᵀU):
 *     w_j −= (w_i − ŵ_i) / U_ii · U_ij.
 * Columns are taken in order 0..k−1. Q4 group parameters (scale, zero point) are chosen when
 * the group's first column is reached, from the group's weights as updated so far, by the
 * same rule as round-to-nearest; INT8 keeps round-to-nearest's per-row scale (the row's
 * max |w| / 127).
 *
 * Rows are independent given U: they are quantised in tiles of rows (U's row i is read once
 * per tile), which performs the same arithmetic as the column-block "lazy batch" updates of
 * the reference implementation in a different order.
 */
#ifndef KR_MODEL_GPTQ_H
#define KR_MODEL_GPTQ_H

#include <stdint.h>

#include "base/threadpool.h"
#include "kernels/quant.h"
#include "kronos.h"

/* Σ over calibration rows of xᵀx for one Linear's inputs (k = n_in). */
typedef struct kr_gptq_hessian {
    int k;
    int64_t rows; /* rows added */
    double *xtx; /* [k][k]; only the upper triangle (j >= i) is accumulated */
    int64_t bad_row; /* first row (counted from 0) holding a NaN / infinity, -1 if none */
    int bad_col;
    int oom; /* an add ran out of memory: the sum is incomplete */
} kr_gptq_hessian;

kr_status kr_gptq_hessian_init(kr_gptq_hessian *h, int k, kr_error *err);
void kr_gptq_hessian_release(kr_gptq_hessian *h);
/* Adds m rows of x (row stride ldx floats, k values each). Rows holding a non-finite value
 * are not added; the first is remembered (kr_gptq_quantize refuses the sum). Single caller
 * at a time. */
void kr_gptq_hessian_add(kr_gptq_hessian *h, const float *x, int m, int ldx);

typedef struct kr_gptq_params {
    /* Added to H's diagonal, as a fraction of the diagonal's mean (default 0.01). Needed
     * when H is singular (fewer distinct rows than inputs, an input that is always 0); when
     * the factorisation still fails, the damping is multiplied by 10 up to 1. */
    double damp;
    int tile_rows; /* rows quantised together (default 16) */
} kr_gptq_params;

kr_gptq_params kr_gptq_default_params(void);

/* What a call did (optional). */
typedef struct kr_gptq_stats {
    double damp_used; /* the damping fraction the factorisation succeeded with */
    int dead_inputs; /* inputs that were 0 in every calibration row */
} kr_gptq_stats;

/* Quantises w [n][k] (f32, row-major) to fmt (KR_WFMT_INT8 or KR_WFMT_Q4, group 32 / 64,
 * 0 = default) using h (h->k == k, h->rows > 0). The result is a kr_qmat like
 * kr_qmat_quantize's (no in_scale). pool (may be NULL) splits the rows over its threads.
 * Errors: no calibration rows, non-finite activations (naming the row and column), a weight
 * that is not finite, a Hessian that cannot be factorised at any damping. */
kr_status kr_gptq_quantize(kr_wfmt fmt, int n, int k, const float *w, const kr_gptq_hessian *h,
                           int group, const kr_gptq_params *params, kr_pool *pool,
                           kr_qmat_owned *out, kr_gptq_stats *stats, kr_error *err);

#endif
