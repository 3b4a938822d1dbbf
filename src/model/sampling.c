/* model/sampling — see sampling.h. */
#include "model/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef struct sort_item {
    float v;
    int i;
} sort_item;

kr_status kr_sampler_scratch_init(kr_sampler_scratch *s, int n, kr_error *err) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->scaled = malloc((size_t)n * sizeof(float));
    s->probs = malloc((size_t)n * sizeof(float));
    s->keep = malloc((size_t)n);
    s->pairs = malloc((size_t)n * sizeof(sort_item));
    if (!s->scaled || !s->probs || !s->keep || !s->pairs) {
        kr_sampler_scratch_release(s);
        return kr_error_set(err, KR_ERR_NOMEM, "sampler: out of memory");
    }
    return KR_OK;
}

void kr_sampler_scratch_release(kr_sampler_scratch *s) {
    free(s->scaled);
    free(s->probs);
    free(s->keep);
    free(s->pairs);
    memset(s, 0, sizeof *s);
}

/* Descending by value; equal values by index, so the order is deterministic. */
static int cmp_desc(const void *a, const void *b) {
    const sort_item *x = a, *y = b;
    if (x->v > y->v) return -1;
    if (x->v < y->v) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

static sort_item *sort_scaled(kr_sampler_scratch *s) {
    sort_item *it = s->pairs;
    for (int i = 0; i < s->n; i++) {
        it[i].v = s->scaled[i];
        it[i].i = i;
    }
    qsort(it, (size_t)s->n, sizeof *it, cmp_desc);
    return it;
}

int kr_sampler_filter(const float *logits, const kr_sampler_params *p, kr_sampler_scratch *s) {
    int n = s->n;
    for (int i = 0; i < n; i++) {
        s->scaled[i] = logits[i] / p->temperature;
        s->keep[i] = 1;
    }
    if (p->top_k > 0) {
        int k = p->top_k < n ? p->top_k : n;
        float kth = sort_scaled(s)[k - 1].v;
        int kept = 0;
        for (int i = 0; i < n; i++) {
            s->keep[i] = !(s->scaled[i] < kth);
            kept += s->keep[i];
        }
        return kept;
    }
    if (p->top_p < 1.0f) {
        sort_item *it = sort_scaled(s);
        /* softmax of the sorted logits in float, then a running float cumsum, as torch. */
        float mx = it[0].v, sum = 0.0f;
        for (int j = 0; j < n; j++) {
            s->probs[j] = expf(it[j].v - mx);
            sum += s->probs[j];
        }
        float cum = 0.0f;
        int kept = 0;
        for (int j = 0; j < n; j++) {
            int remove = j > 0 && cum > p->top_p;
            s->keep[it[j].i] = (unsigned char)!remove;
            kept += !remove;
            cum += s->probs[j] / sum;
        }
        return kept;
    }
    return n;
}

int kr_sampler_draw(const float *logits, const kr_sampler_params *p, double u,
                    kr_sampler_scratch *s) {
    int n = s->n;
    kr_sampler_filter(logits, p, s);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (s->keep[i] && s->scaled[i] > mx) mx = s->scaled[i];
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        float e = s->keep[i] ? expf(s->scaled[i] - mx) : 0.0f;
        s->probs[i] = e;
        total += e;
    }
    double target = u * total, cum = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (!s->keep[i]) continue;
        last = i;
        cum += s->probs[i];
        if (cum > target) return i;
    }
    return last;
}
