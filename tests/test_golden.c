/*
 * Golden fixtures from the official PyTorch Kronos (tests/fixtures/GOLDEN_README.md): every
 * case of the tiny and odd configurations (and mini when KRONOS_GOLDEN_MINI_DIR names
 * ../shared/golden/mini) reproduced within the README's §6 tolerances — ids and masks exact,
 * statistics bit-exact, logits 1e-4, tokenizer outputs 1e-5, prices 1e-5 relative.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/forecast_internal.h"
#include "model/model.h"
#include "model/predictor.h"
#include "model/safetensors.h"
#include "model/sampling.h"
#include "model/tokenizer.h"
#include "engine_helpers.h"
#include "test_support.h"

typedef struct config_dir {
    char root[1024];
    int present;
} config_dir;

static config_dir g_cfg[3];
static const char *k_cfg_names[3] = { "tiny", "odd", "mini" };

static void resolve_configs(void) {
    for (int i = 0; i < 2; i++) {
        snprintf(g_cfg[i].root, sizeof g_cfg[i].root, "%s/%s", KR_FIXTURES_DIR, k_cfg_names[i]);
        g_cfg[i].present = 1;
    }
    const char *mini = getenv("KRONOS_GOLDEN_MINI_DIR");
    if (mini && *mini) {
        snprintf(g_cfg[2].root, sizeof g_cfg[2].root, "%s", mini);
        g_cfg[2].present = 1;
    }
}

/* The forward passes run on an exec of their own (threads + workspace), as a context's do. */
static kr_exec *exec_for_tests(void) {
    static kr_exec *ex;
    kr_error err = { 0 };
    if (!ex && kr_exec_create(0, 0, &ex, &err) != KR_OK) fail_msg("exec: %s", err.message);
    return ex;
}

static kr_model *load_model(const config_dir *c) {
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s/predictor", c->root);
    snprintf(tok, sizeof tok, "%s/tokenizer", c->root);
    kr_model *m = NULL;
    kr_error err = { 0 };
    kr_model_params mp = kr_model_default_params();
    if (kr_model_load(pred, tok, &mp, &m, &err) != KR_OK)
        fail_msg("load %s: %s", c->root, err.message);
    return m;
}

static kr_safetensors *open_case(const config_dir *c, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", c->root, name);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    if (kr_st_open(path, &st, &err) != KR_OK) fail_msg("%s", err.message);
    return st;
}

static cJSON *read_case_json(const config_dir *c, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/cases/%s.json", c->root, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    assert_non_null(j);
    return j;
}

static int json_int(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    assert_true(cJSON_IsNumber(v));
    return v->valueint;
}

/* Tensor as a fresh float / int64 array; *n receives the element count. */
static float *tensor_f32(kr_safetensors *st, const char *name, int64_t *n) {
    const kr_st_tensor *t = kr_st_find(st, name);
    if (!t) fail_msg("fixture lacks %s", name);
    float *out = malloc((size_t)t->numel * sizeof(float));
    kr_error err = { 0 };
    assert_int_equal(kr_st_to_f32(t, out, &err), KR_OK);
    if (n) *n = t->numel;
    return out;
}

static int64_t *tensor_i64(kr_safetensors *st, const char *name, int64_t *n) {
    const kr_st_tensor *t = kr_st_find(st, name);
    if (!t) fail_msg("fixture lacks %s", name);
    int64_t *out = malloc((size_t)t->numel * sizeof(int64_t));
    kr_error err = { 0 };
    assert_int_equal(kr_st_to_i64(t, out, &err), KR_OK);
    if (n) *n = t->numel;
    return out;
}

static void expect_close(const char *what, const float *got, const float *want, size_t n,
                         double tol) {
    double d = kr_test_max_abs_diff(got, want, n);
    if (!(d <= tol)) fail_msg("%s: max |diff| %.3g > %.1g", what, d, tol);
}

/* ---------------------------------------------------------------- tokenizer */

static void tokenizer_roundtrip(const config_dir *c) {
    kr_model *m = load_model(c);
    kr_safetensors *st = open_case(c, "tokenizer_roundtrip");
    const kr_st_tensor *tx = kr_st_find(st, "in.x");
    int B = (int)tx->shape[0], T = (int)tx->shape[1], cb = 20;
    float *x = tensor_f32(st, "in.x", NULL), *z_ref = tensor_f32(st, "out.z", NULL);
    float *dec_ref = tensor_f32(st, "out.decoded", NULL);
    int64_t *s1_ref = tensor_i64(st, "out.s1", NULL), *s2_ref = tensor_i64(st, "out.s2", NULL);
    int32_t *s1 = malloc((size_t)T * sizeof(int32_t)), *s2 = malloc((size_t)T * sizeof(int32_t));
    float *z = malloc((size_t)T * cb * sizeof(float)), *dec = malloc((size_t)T * 6 * sizeof(float));
    kr_error err = { 0 };
    for (int b = 0; b < B; b++) {
        assert_int_equal(kr_tokenizer_encode(m->tok, exec_for_tests(), x + (size_t)b * T * 6, T, s1,
                                             s2, z, &err),
                         KR_OK);
        expect_close("tokenizer z", z, z_ref + (size_t)b * T * cb, (size_t)T * cb, 1e-5);
        for (int t = 0; t < T; t++) {
            assert_int_equal(s1[t], s1_ref[b * T + t]);
            assert_int_equal(s2[t], s2_ref[b * T + t]);
        }
        kr_kv_store store;
        assert_int_equal(kr_kv_store_init(&store, kr_tokenizer_store_layers(m->tok),
                                          m->tok->cfg.d_model, T, &err),
                         KR_OK);
        kr_chunk ch = { .n = T, .pos0 = 0, .out = &store, .out_start = 0 };
        assert_int_equal(kr_tokenizer_decode(m->tok, exec_for_tests(), &ch, 1, s1, s2, dec, &err),
                         KR_OK);
        expect_close("tokenizer decoded", dec, dec_ref + (size_t)b * T * 6, (size_t)T * 6, 1e-5);
        kr_kv_store_release(&store);
    }
    free(s1);
    free(s2);
    free(z);
    free(dec);
    free(x);
    free(z_ref);
    free(dec_ref);
    free(s1_ref);
    free(s2_ref);
    kr_st_close(st);
    kr_model_free(m);
}

/* ---------------------------------------------------------------- predictor */

static void predictor_forward(const config_dir *c) {
    kr_model *m = load_model(c);
    kr_safetensors *st = open_case(c, "predictor_forward");
    const kr_st_tensor *ts1 = kr_st_find(st, "in.s1");
    int B = (int)ts1->shape[0], T = (int)ts1->shape[1], d = m->pred->cfg.d_model, V = 1024;
    int64_t *s1l = tensor_i64(st, "in.s1", NULL), *s2l = tensor_i64(st, "in.s2", NULL);
    int64_t *sib = tensor_i64(st, "in.sibling_s1", NULL);
    float *stamp = tensor_f32(st, "in.stamp", NULL);
    float *lg_ref = tensor_f32(st, "out.s1_logits", NULL),
          *ctx_ref = tensor_f32(st, "out.context", NULL);
    float *s2_ref = tensor_f32(st, "out.s2_logits_last", NULL);
    float *tok_ref = tensor_f32(st, "dbg.token_emb", NULL),
          *time_ref = tensor_f32(st, "dbg.time_emb", NULL);
    int32_t *s1 = malloc((size_t)B * T * sizeof(int32_t)),
            *s2 = malloc((size_t)B * T * sizeof(int32_t));
    for (int i = 0; i < B * T; i++) {
        s1[i] = (int32_t)s1l[i];
        s2[i] = (int32_t)s2l[i];
    }
    float *ctx = malloc((size_t)B * T * d * sizeof(float)),
          *lg = malloc((size_t)B * T * V * sizeof(float));
    float *tok = malloc((size_t)B * T * d * sizeof(float)),
          *tim = malloc((size_t)B * T * d * sizeof(float));
    float *x = malloc((size_t)B * T * d * sizeof(float));
    kr_error err = { 0 };
    assert_int_equal(
        kr_predictor_embed(m->pred, exec_for_tests(), B * T, s1, s2, stamp, x, tok, tim, &err),
        KR_OK);
    expect_close("token_emb", tok, tok_ref, (size_t)B * T * d, 1e-4);
    expect_close("time_emb", tim, time_ref, (size_t)B * T * d, 1e-4);

    /* Both batch rows in one call: one chunk each, one store. */
    kr_kv_store store;
    assert_int_equal(kr_kv_store_init(&store, kr_predictor_store_layers(m->pred), d, B * T, &err),
                     KR_OK);
    kr_chunk ch[2];
    for (int b = 0; b < B; b++) {
        memset(&ch[b], 0, sizeof ch[b]);
        ch[b].n = T;
        ch[b].out = &store;
        ch[b].out_start = b * T;
    }
    assert_int_equal(
        kr_predictor_forward(m->pred, exec_for_tests(), ch, B, s1, s2, stamp, NULL, ctx, &err),
        KR_OK);
    assert_int_equal(kr_predictor_s1_logits(m->pred, exec_for_tests(), ctx, B * T, d, lg, &err),
                     KR_OK);
    expect_close("context", ctx, ctx_ref, (size_t)B * T * d, 1e-4);
    expect_close("s1_logits", lg, lg_ref, (size_t)B * T * V, 1e-4);

    int32_t sib32[2];
    float lastctx[2 * 1024];
    kr_kv_view views[2];
    for (int b = 0; b < B; b++) {
        sib32[b] = (int32_t)sib[b];
        memcpy(lastctx + (size_t)b * d, ctx + ((size_t)b * T + T - 1) * d, d * sizeof(float));
        views[b].n = 1;
        views[b].ref[0].store = &store;
        views[b].ref[0].start = b * T;
        views[b].ref[0].n = T;
    }
    float *s2lg = malloc((size_t)B * V * sizeof(float));
    assert_int_equal(
        kr_predictor_s2_logits(m->pred, exec_for_tests(), B, sib32, lastctx, d, views, s2lg, &err),
        KR_OK);
    expect_close("s2_logits_last", s2lg, s2_ref, (size_t)B * V, 1e-4);
    kr_kv_store_release(&store);
    free(s1l);
    free(s2l);
    free(sib);
    free(stamp);
    free(lg_ref);
    free(ctx_ref);
    free(s2_ref);
    free(tok_ref);
    free(time_ref);
    free(s1);
    free(s2);
    free(ctx);
    free(lg);
    free(tok);
    free(tim);
    free(x);
    free(s2lg);
    kr_st_close(st);
    kr_model_free(m);
}

/* ---------------------------------------------------------------- end to end */

typedef struct step_rec {
    int B, P, V;
    float *s1, *s2; /* [P][B][V] as in the fixture */
    int64_t *ws, *wl; /* [P] window start / length of group 0 */
} step_rec;

static void on_step(void *user, int group, int path, int step, const float *l1, const float *l2,
                    int a, int b, int ws, int wl) {
    step_rec *r = user;
    (void)path;
    (void)a;
    (void)b;
    memcpy(r->s1 + ((size_t)step * r->B + group) * r->V, l1, r->V * sizeof(float));
    memcpy(r->s2 + ((size_t)step * r->B + group) * r->V, l2, r->V * sizeof(float));
    if (group == 0) {
        r->ws[step] = ws;
        r->wl[step] = wl;
    }
}

static void e2e_case(const config_dir *c, const char *name, int naive) {
    kr_model *m = load_model(c);
    kr_safetensors *st = open_case(c, name);
    cJSON *j = read_case_json(c, name);
    int L = json_int(j, "lookback"), P = json_int(j, "pred_len"), C = json_int(j, "max_context");
    const kr_st_tensor *tx = kr_st_find(st, "in.x_raw");
    int B = (int)tx->shape[0], V = 1024;
    float *xraw = tensor_f32(st, "in.x_raw", NULL);
    int64_t *xt = tensor_i64(st, "in.x_time_unix", NULL),
            *yt = tensor_i64(st, "in.y_time_unix", NULL);
    float *mean_ref = tensor_f32(st, "dbg.x_mean", NULL),
          *std_ref = tensor_f32(st, "dbg.x_std", NULL);
    int64_t *hs1 = tensor_i64(st, "out.hist_s1", NULL), *hs2 = tensor_i64(st, "out.hist_s2", NULL);
    int64_t *gs1 = tensor_i64(st, "out.gen_s1", NULL), *gs2 = tensor_i64(st, "out.gen_s2", NULL);
    float *l1_ref = tensor_f32(st, "out.step_s1_logits", NULL),
          *l2_ref = tensor_f32(st, "out.step_s2_logits", NULL);
    float *pn_ref = tensor_f32(st, "out.pred_norm", NULL),
          *pred_ref = tensor_f32(st, "out.pred", NULL);
    int64_t *ws_ref = tensor_i64(st, "dbg.step_window_start", NULL),
            *wl_ref = tensor_i64(st, "dbg.step_window_len", NULL);

    double *vals = malloc((size_t)B * L * 6 * sizeof(double));
    for (size_t i = 0; i < (size_t)B * L * 6; i++) vals[i] = xraw[i];
    kr_series series[3];
    for (int b = 0; b < B; b++) {
        series[b].n = L;
        series[b].timestamps = xt + (size_t)b * L;
        series[b].values = vals + (size_t)b * L * 6;
        series[b].has_volume = series[b].has_amount = 1;
        series[b].future_timestamps = yt + (size_t)b * P;
    }
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = P;
    p.max_context = C;
    p.lookback = L;
    p.top_k = 1;
    p.top_p = 1.0f;
    p.temperature = 1.0f;
    step_rec rec = { B,
                     P,
                     V,
                     malloc((size_t)P * B * V * sizeof(float)),
                     malloc((size_t)P * B * V * sizeof(float)),
                     malloc((size_t)P * sizeof(int64_t)),
                     malloc((size_t)P * sizeof(int64_t)) };
    kr_seq_options opt = { .naive = naive, .observer = on_step, .observer_user = &rec };
    kr_forecast *res[3] = { 0 };
    kr_error err = { 0 };
    kr_context *ctx = kr_test_context(m, 0, NULL);
    kr_request_params rp = kr_request_default_params();
    rp.seq_options = &opt;
    if (kr_forecast_run_batch(ctx, series, B, &p, &rp, res, &err) != KR_OK)
        fail_msg("%s: %s", name, err.message);
    kr_context_free(ctx);
    for (int b = 0; b < B; b++) {
        const kr_forecast *f = res[b];
        for (int k = 0; k < 6; k++) {
            if (f->x_mean[k] != mean_ref[b * 6 + k] || f->x_std[k] != std_ref[b * 6 + k])
                fail_msg("%s series %d col %d: mean/std %.9g/%.9g, want %.9g/%.9g (bit-exact)",
                         name, b, k, f->x_mean[k], f->x_std[k], mean_ref[b * 6 + k],
                         std_ref[b * 6 + k]);
        }
        for (int t = 0; t < L; t++) {
            if (f->hist_s1[t] != hs1[(size_t)b * L + t] || f->hist_s2[t] != hs2[(size_t)b * L + t])
                fail_msg("%s series %d: history token %d is (%d,%d), want (%lld,%lld)", name, b, t,
                         f->hist_s1[t], f->hist_s2[t], (long long)hs1[(size_t)b * L + t],
                         (long long)hs2[(size_t)b * L + t]);
        }
        for (int i = 0; i < P; i++)
            if (f->gen_s1[i] != gs1[(size_t)b * P + i] || f->gen_s2[i] != gs2[(size_t)b * P + i])
                fail_msg("%s series %d: step %d token (%d,%d), want (%lld,%lld)", name, b, i,
                         f->gen_s1[i], f->gen_s2[i], (long long)gs1[(size_t)b * P + i],
                         (long long)gs2[(size_t)b * P + i]);
        expect_close("pred_norm", f->pred_norm, pn_ref + (size_t)b * P * 6, (size_t)P * 6, 1e-5);
        for (int i = 0; i < P * 6; i++) {
            double want = pred_ref[(size_t)b * P * 6 + i], got = f->mean[i];
            double tol = 1e-5 * fabs(want) + 1e-5 * (std_ref[b * 6 + i % 6] + 1e-5);
            if (fabs(got - want) > tol)
                fail_msg("%s series %d: pred[%d][%d] = %.9g, want %.9g", name, b, i / 6, i % 6, got,
                         want);
        }
    }
    expect_close("step_s1_logits", rec.s1, l1_ref, (size_t)P * B * V, 1e-4);
    expect_close("step_s2_logits", rec.s2, l2_ref, (size_t)P * B * V, 1e-4);
    for (int i = 0; i < P; i++) {
        assert_int_equal(rec.ws[i], ws_ref[i]);
        assert_int_equal(rec.wl[i], wl_ref[i]);
    }
    for (int b = 0; b < B; b++) kr_forecast_free(res[b]);
    free(rec.s1);
    free(rec.s2);
    free(rec.ws);
    free(rec.wl);
    free(vals);
    free(xraw);
    free(xt);
    free(yt);
    free(mean_ref);
    free(std_ref);
    free(hs1);
    free(hs2);
    free(gs1);
    free(gs2);
    free(l1_ref);
    free(l2_ref);
    free(pn_ref);
    free(pred_ref);
    free(ws_ref);
    free(wl_ref);
    cJSON_Delete(j);
    kr_st_close(st);
    kr_model_free(m);
}

static const char *k_e2e[] = { "e2e_lb64_pl8", "e2e_lb256_pl16", "e2e_overflow_lb120_pl24_ctx128",
                               "e2e_overflow_lb160_pl8_ctx128", "e2e_batch3_lb64_pl8" };

static void run_config(void **state, int which) {
    (void)state;
    if (!g_cfg[which].present) {
        print_message(
            "[  SKIPPED ] golden %s: set KRONOS_GOLDEN_MINI_DIR to ../shared/golden/mini\n",
            k_cfg_names[which]);
        skip();
    }
    tokenizer_roundtrip(&g_cfg[which]);
    predictor_forward(&g_cfg[which]);
    for (size_t i = 0; i < sizeof k_e2e / sizeof k_e2e[0]; i++) {
        e2e_case(&g_cfg[which], k_e2e[i], 0);
        e2e_case(&g_cfg[which], k_e2e[i], 1); /* the naive reference-style path too */
    }
}

static void test_golden_tiny(void **s) { run_config(s, 0); }
static void test_golden_odd(void **s) { run_config(s, 1); }
static void test_golden_mini(void **s) { run_config(s, 2); }

static void test_sampling_masks(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/sampling/top_k_top_p_filter.safetensors", KR_FIXTURES_DIR);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open(path, &st, &err), KR_OK);
    float *logits = tensor_f32(st, "in.logits", NULL);
    const kr_st_tensor *tm = kr_st_find(st, "out.masks");
    assert_non_null(tm);
    int64_t *masks = tensor_i64(st, "out.masks", NULL);
    const kr_sampler_params settings[4] = {
        { 1.0f, 0, 0.9f }, { 1.0f, 5, 1.0f }, { 1.0f, 0, 0.5f }, { 0.7f, 0, 0.9f }
    };
    kr_sampler_scratch sc;
    size_t mark = kr_arena_mark(exec_for_tests()->arena);
    assert_int_equal(kr_sampler_scratch_init(&sc, 1024, exec_for_tests()->arena, &err), KR_OK);
    for (int s = 0; s < 4; s++)
        for (int v = 0; v < 4; v++) {
            kr_sampler_filter(logits + v * 1024, &settings[s], &sc);
            for (int i = 0; i < 1024; i++)
                if (sc.keep[i] != masks[((size_t)s * 4 + v) * 1024 + i])
                    fail_msg("setting %d vector %d index %d: keep %d, want %lld", s, v, i,
                             sc.keep[i], (long long)masks[((size_t)s * 4 + v) * 1024 + i]);
        }
    /* Greedy: top_k 1 always draws the arg max, whatever the uniform. */
    kr_sampler_params greedy = { 1.0f, 1, 1.0f };
    int am = 0;
    for (int i = 1; i < 1024; i++)
        if (logits[i] > logits[am]) am = i;
    for (int k = 0; k < 10; k++)
        assert_int_equal(kr_sampler_draw(logits, &greedy, k / 10.0, &sc), am);
    kr_arena_release(exec_for_tests()->arena, mark);
    free(logits);
    free(masks);
    kr_st_close(st);
}

int main(void) {
    resolve_configs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling_masks),
        cmocka_unit_test(test_golden_tiny),
        cmocka_unit_test(test_golden_odd),
        cmocka_unit_test(test_golden_mini),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
