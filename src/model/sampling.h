/*
 * model/sampling — the reference's sample_from_logits: logits / T, then top-k (k > 0; ties
 * at the k-th value survive, top-p is then ignored) or else top-p (sorted descending, softmax,
 * cumulative sum; position j is dropped when the sum up to j−1 exceeds top_p, so the first
 * token and the one crossing top_p are kept), then softmax over the survivors and one
 * multinomial draw (inverse CDF with a caller-supplied uniform, so draws are reproducible).
 */
#ifndef KR_MODEL_SAMPLING_H
#define KR_MODEL_SAMPLING_H

#include <stdint.h>

#include "base/workspace.h"
#include "kronos.h"

typedef struct kr_sampler_params {
    float temperature; /* > 0 */
    int top_k; /* 0: off */
    float top_p; /* >= 1: off */
} kr_sampler_params;

/* Working memory for one vocabulary size; reuse it across draws (no allocation per draw). */
typedef struct kr_sampler_scratch {
    int n;
    float *scaled; /* [n] logits / T */
    float *probs; /* [n] */
    unsigned char *keep; /* [n] filter mask */
    void *pairs; /* [n] (value, index) for sorting */
    void *pairs_tmp; /* [n] the sort's scratch */
} kr_sampler_scratch;

/* Takes the scratch for a vocabulary of n from the arena (released with it). */
KR_PRIVATE kr_status kr_sampler_scratch_init(kr_sampler_scratch *s, int n, kr_arena *arena,
                                             kr_error *err);

/* Applies T and the top-k/top-p filter; s->keep[i] = 1 for survivors. Returns their count. */
int kr_sampler_filter(const float *logits, const kr_sampler_params *p, kr_sampler_scratch *s);

/* Filters, takes the softmax of the survivors and draws the index with uniform u in [0, 1). */
KR_PRIVATE int kr_sampler_draw(const float *logits, const kr_sampler_params *p, double u,
                               kr_sampler_scratch *s);

#endif
