/* engine/teacher — see teacher.h. */
#include "engine/teacher.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "engine/context.h"
#include "engine/forecast_internal.h"
#include "model/model.h"
#include "model/predictor.h"
#include "model/tokenizer.h"

static kr_status run(const kr_engine *eng, const kr_forecast_job *j, int L, const int32_t *s1,
                     const int32_t *s2, float *s1_logits, float *s2_logits, kr_error *err) {
    const kr_predictor_weights *pw = eng->model->pred;
    const kr_exec *ex = &eng->ex;
    int d = pw->cfg.d_model;
    kr_status st = KR_OK;
    kr_kv_store store = { 0 };
    float *context = malloc((size_t)L * (size_t)d * sizeof(float));
    kr_kv_view *views = malloc((size_t)L * sizeof *views);
    if (!context || !views)
        st = kr_error_set(err, KR_ERR_NOMEM, "teacher: out of memory for %d rows", L);
    if (st == KR_OK) st = kr_kv_store_init(&store, kr_predictor_store_layers(pw), d, L, err);
    if (st == KR_OK) {
        kr_chunk ch = { .n = L, .pos0 = 0, .n_past = 0, .out = &store, .out_start = 0 };
        st = kr_predictor_forward(pw, ex, &ch, 1, s1, s2, j->pr.stamps, NULL, context, err);
    }
    if (st == KR_OK) st = kr_predictor_s1_logits(pw, ex, context, L - 1, d, s1_logits, err);
    if (st == KR_OK) {
        /* Row t's s2 query sees the window up to t, as a forecast ending at t would. */
        for (int t = 0; t < L - 1; t++) {
            views[t].n = 1;
            views[t].ref[0] = (kr_kv_ref){ &store, 0, t + 1 };
        }
        st = kr_predictor_s2_logits(pw, ex, L - 1, s1 + 1, context, d, views, s2_logits, err);
    }
    kr_kv_store_release(&store);
    free(context);
    free(views);
    return st;
}

typedef struct teacher_task {
    const kr_forecast_job *job;
    int lookback;
    const int32_t *s1_in, *s2_in;
    int32_t *s1, *s2;
    float *s1_logits, *s2_logits;
} teacher_task;

static kr_status run_task(void *user, const kr_engine *eng, kr_error *err) {
    teacher_task *t = user;
    kr_status st = kr_tokenizer_encode(eng->model->tok, &eng->ex, t->job->pr.x_norm, t->lookback,
                                       t->s1, t->s2, NULL, err);
    if (st == KR_OK)
        st = run(eng, t->job, t->lookback, t->s1_in && t->s2_in ? t->s1_in : t->s1,
                 t->s1_in && t->s2_in ? t->s2_in : t->s2, t->s1_logits, t->s2_logits, err);
    return st;
}

kr_status kr_teacher_logits(kr_context *ctx, const kr_series *s, int lookback, const int32_t *s1_in,
                            const int32_t *s2_in, int32_t *s1_out, int32_t *s2_out,
                            float *s1_logits, float *s2_logits, kr_error *err) {
    if (!ctx || !s || !s1_logits || !s2_logits)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_teacher_logits: NULL argument");
    if (lookback < 2 || lookback > 512 || lookback > s->n)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "teacher: lookback %d must be in 2..min(512, %lld rows)", lookback,
                            (long long)s->n);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 1;
    p.lookback = lookback;
    kr_forecast_job j;
    kr_status st = kr_forecast_job_init(&j, s, 0, 1, &p, err);
    int32_t *s1 = malloc((size_t)lookback * sizeof *s1),
            *s2 = malloc((size_t)lookback * sizeof *s2);
    if (st == KR_OK && (!s1 || !s2)) st = kr_error_set(err, KR_ERR_NOMEM, "teacher: out of memory");
    if (st == KR_OK) {
        teacher_task t = { &j, lookback, s1_in, s2_in, s1, s2, s1_logits, s2_logits };
        st = kr_context_run_task(ctx, run_task, &t, err);
    }
    if (st == KR_OK && s1_out) memcpy(s1_out, s1, (size_t)lookback * sizeof *s1);
    if (st == KR_OK && s2_out) memcpy(s2_out, s2, (size_t)lookback * sizeof *s2);
    free(s1);
    free(s2);
    kr_forecast_job_release(&j);
    return st;
}
