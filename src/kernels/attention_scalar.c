/*
 * kernels/attention_scalar — reference single-query attention over KV spans, any CPU.
 *
 * Three passes in key order (scores, exp + sum, weighted sum of values), so the result
 * depends only on the keys' sequence, never on how they are cut into spans.
 */
#include "kernels/kernels.h"

#include <math.h>

void kr_attend_f32_scalar(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                          int n_spans, float *scratch, float *out) {
    int n = 0;
    float mx = -INFINITY;
    for (int s = 0; s < n_spans; s++) {
        for (int j = 0; j < spans[s].n; j++) {
            const float *k = spans[s].k + (size_t)j * (size_t)spans[s].stride;
            float d = 0.0f;
            for (int i = 0; i < head_dim; i++) d += q[i] * k[i];
            d *= scale;
            scratch[n++] = d;
            if (d > mx) mx = d;
        }
    }
    if (n == 0) { /* outside the contract; zeros beat 0/0 NaNs spreading downstream */
        for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        scratch[j] = expf(scratch[j] - mx);
        sum += scratch[j];
    }
    for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
    n = 0;
    for (int s = 0; s < n_spans; s++) {
        for (int j = 0; j < spans[s].n; j++) {
            const float *v = spans[s].v + (size_t)j * (size_t)spans[s].stride;
            float p = scratch[n++];
            for (int i = 0; i < head_dim; i++) out[i] += p * v[i];
        }
    }
    for (int i = 0; i < head_dim; i++) out[i] /= sum;
}
