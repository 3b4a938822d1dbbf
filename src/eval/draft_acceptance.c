/* eval/draft_acceptance — see draft_acceptance.h. */
#include "eval/draft_acceptance.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/workspace.h"

const int kr_draft_k[KR_DRAFT_KS] = { 1, 2, 4, 8 };

kr_status kr_draft_acceptance_add(kr_draft_acc *acc, const float *p1, const float *q1,
                                  const float *p2, const float *q2, int n, int v1, int v2,
                                  const kr_sampler_params *sp, uint64_t seed, uint64_t stream,
                                  kr_error *err) {
    if (n <= 0) return KR_OK;
    /* Each scratch holds ~25 bytes per token of its vocabulary (sampling.c). */
    size_t bytes = (size_t)64 * ((size_t)v1 + (size_t)v2) + 4096;
    kr_arena *arena = NULL;
    unsigned char *accept = malloc((size_t)n);
    kr_status st = accept ? kr_arena_create(bytes, &arena, err)
                          : kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    kr_sampler_scratch s1, s2;
    if (st == KR_OK) st = kr_sampler_scratch_init(&s1, v1, arena, err);
    if (st == KR_OK) st = kr_sampler_scratch_init(&s2, v2, arena, err);
    for (int t = 0; st == KR_OK && t < n; t++) {
        double u1 = kr_rng_uniform(seed, stream, 2ull * (uint64_t)t);
        double u2 = kr_rng_uniform(seed, stream, 2ull * (uint64_t)t + 1);
        size_t o1 = (size_t)t * (size_t)v1, o2 = (size_t)t * (size_t)v2;
        int a1 = kr_sampler_draw(p1 + o1, sp, u1, &s1) == kr_sampler_draw(q1 + o1, sp, u1, &s1);
        int a2 = kr_sampler_draw(p2 + o2, sp, u2, &s2) == kr_sampler_draw(q2 + o2, sp, u2, &s2);
        acc->s1_agree += a1;
        acc->s2_agree += a2;
        acc->both_agree += a1 && a2;
        accept[t] = (unsigned char)(a1 && a2);
        acc->positions++;
    }
    /* A pass verifying K proposals from position t yields the accepted run (at most K) and
     * one f32 draw after it: the correction, or the token after K accepted ones. Passes are
     * counted from every t that has K positions after it in the window. */
    for (int k = 0; st == KR_OK && k < KR_DRAFT_KS; k++) {
        int K = kr_draft_k[k];
        for (int t = 0; t + K <= n; t++) {
            int run = 0;
            while (run < K && accept[t + run]) run++;
            acc->rounds[k]++;
            acc->tokens[k] += run + 1;
        }
    }
    kr_arena_free(arena);
    free(accept);
    return st;
}

double kr_draft_tokens_per_pass(const kr_draft_acc *acc, int k_index) {
    if (k_index < 0 || k_index >= KR_DRAFT_KS || acc->rounds[k_index] == 0) return NAN;
    return (double)acc->tokens[k_index] / (double)acc->rounds[k_index];
}

double kr_draft_bytes_per_token(const kr_draft_acc *acc, int k_index, double draft_ratio) {
    double e = kr_draft_tokens_per_pass(acc, k_index);
    return isfinite(e) ? (1.0 + kr_draft_k[k_index] * draft_ratio) / e : NAN;
}
