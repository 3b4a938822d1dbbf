/* model/normalize — see normalize.h. Every operation below is float32 on purpose. */
#include "model/normalize.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"

/* numpy/core/src/umath/loops_utils.h pairwise_sum, restated: < 8 sequential from 0; ≤ 128
 * eight accumulators unrolled by 8 then combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)) plus
 * the leftovers in order; larger: split at n/2 rounded down to a multiple of 8. */
float kr_pairwise_sum_f32(const float *a, int64_t n, int64_t stride) {
    if (n < 8) {
        float res = 0.0f;
        for (int64_t i = 0; i < n; i++) res += a[i * stride];
        return res;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j * stride];
        int64_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[(i + j) * stride];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i * stride];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return kr_pairwise_sum_f32(a, n2, stride) +
           kr_pairwise_sum_f32(a + n2 * stride, n - n2, stride);
}

kr_status kr_norm_stats(const float *x, int64_t n, float mean[6], float std[6], kr_error *err) {
    if (n < 1) return kr_error_set(err, KR_ERR_INVALID_ARG, "normalize: empty series");
    float *col = malloc((size_t)n * sizeof(float));
    if (!col)
        return kr_error_set(err, KR_ERR_NOMEM, "normalize: out of memory for %lld rows",
                            (long long)n);
    float fn = (float)n;
    for (int c = 0; c < 6; c++) {
        float m = kr_pairwise_sum_f32(x + c, n, 6) / fn;
        mean[c] = m;
        /* (x − mean) and its square are rounded to float element-wise first, as numpy does. */
        for (int64_t i = 0; i < n; i++) {
            float dlt = x[i * 6 + c] - m;
            col[i] = dlt * dlt;
        }
        std[c] = sqrtf(kr_pairwise_sum_f32(col, n, 1) / fn);
    }
    free(col);
    return KR_OK;
}

void kr_normalize(const float *x, int64_t n, const float mean[6], const float std[6], float clip,
                  float *out) {
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < 6; c++) {
            float v = (x[i * 6 + c] - mean[c]) / (std[c] + 1e-5f);
            if (v < -clip) v = -clip;
            if (v > clip) v = clip;
            out[i * 6 + c] = v;
        }
}

void kr_denormalize(const float *x, int64_t n, const float mean[6], const float std[6],
                    float *out) {
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < 6; c++) out[i * 6 + c] = x[i * 6 + c] * (std[c] + 1e-5f) + mean[c];
}
