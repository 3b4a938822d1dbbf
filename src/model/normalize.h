/*
 * model/normalize — per-series input statistics, bit-identical to the reference's numpy
 * float32 computation (golden README §5.13): column mean and population std with numpy's
 * pairwise summation, x_norm = clip((x − mean) / (std + 1e-5), ±clip), and the inverse.
 * One ulp in a price mean can flip a token bit, which is why this is not done in double.
 */
#ifndef KR_MODEL_NORMALIZE_H
#define KR_MODEL_NORMALIZE_H

#include <stdint.h>

#include "kronos.h"

/* numpy's float32 pairwise sum of a[0], a[stride], ... (n elements). */
float kr_pairwise_sum_f32(const float *a, int64_t n, int64_t stride);

/* x[n][6] row-major float32 → mean[6], std[6]. n >= 1. */
kr_status kr_norm_stats(const float *x, int64_t n, float mean[6], float std[6], kr_error *err);
/* out[n][6] = clip((x − mean) / (std + 1e-5f), −clip, clip); out may alias x. */
void kr_normalize(const float *x, int64_t n, const float mean[6], const float std[6], float clip,
                  float *out);
/* out = x · (std + 1e-5f) + mean, in float32 like the reference. */
void kr_denormalize(const float *x, int64_t n, const float mean[6], const float std[6], float *out);

#endif
