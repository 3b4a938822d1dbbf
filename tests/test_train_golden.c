/*
 * The training step against the official one (tests/fixtures/train, README there): for the
 * tiny and odd model pairs, on every ISA this CPU runs,
 *   predictor_step / tokenizer_step   forward values, the three losses, every gradient and the
 *                                     gradient norm of one step (the recorded s1 draws injected);
 *   predictor_adamw / tokenizer_adamw three clipped AdamW + OneCycleLR steps: each step's rate,
 *                                     loss and norm, and every parameter after them;
 * within the README's tolerances (losses 1e-5 relative; each gradient 1e-4 of its largest
 * magnitude; updates 1e-3 relative in L2 and 99.9 % of the elements within
 * 1e-5 + 1e-4·|expected|). Frozen parameters (the fixed time embeddings) have zero gradients
 * and never move. The worst error of each case and ISA is printed.
 */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kronos/train.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "train/trainer_internal.h"

#define B 4
#define LEN 40

static const char *const k_configs[2] = { "tiny", "odd" };

static const char *dir_of(const char *config, const char *sub) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s", kr_test_fixture("train"));
    size_t n = strlen(buf);
    snprintf(buf + n, sizeof buf - n, "/%s/%s", config, sub);
    return buf;
}

static kr_safetensors *open_case(const char *config, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir_of(config, "cases"), name);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    if (kr_st_open(path, &st, &err) != KR_OK) fail_msg("%s", err.message);
    return st;
}

static float *f32(kr_safetensors *st, const char *name) {
    const kr_st_tensor *t = kr_st_find(st, name);
    if (!t) fail_msg("fixture lacks %s", name);
    float *out = malloc((size_t)t->numel * sizeof(float));
    kr_error err = { 0 };
    assert_int_equal(kr_st_to_f32(t, out, &err), KR_OK);
    return out;
}

static double scalar(kr_safetensors *st, const char *name) {
    float *v = f32(st, name);
    double d = v[0];
    free(v);
    return d;
}

static int32_t *i32(kr_safetensors *st, const char *name) {
    const kr_st_tensor *t = kr_st_find(st, name);
    if (!t) fail_msg("fixture lacks %s", name);
    int64_t *w = malloc((size_t)t->numel * sizeof(int64_t));
    int32_t *out = malloc((size_t)t->numel * sizeof(int32_t));
    kr_error err = { 0 };
    assert_int_equal(kr_st_to_i64(t, w, &err), KR_OK);
    for (int64_t i = 0; i < t->numel; i++) out[i] = (int32_t)w[i];
    free(w);
    return out;
}

/* Stamps are stored as floats; the reference casts them with .long() (truncation). */
static int32_t *stamps(kr_safetensors *st, const char *name) {
    const kr_st_tensor *t = kr_st_find(st, name);
    float *f = f32(st, name);
    int32_t *out = malloc((size_t)t->numel * sizeof(int32_t));
    for (int64_t i = 0; i < t->numel; i++) out[i] = (int32_t)f[i];
    free(f);
    return out;
}

/* The worst of each measure over a case. */
typedef struct worst {
    double loss_rel, grad_rel, norm_rel, lr_rel, update_rel, elem_frac_bad, fwd_abs;
    size_t n_bad, n_elems; /* elements off over the whole model */
} worst;

static void expect_rel(const char *what, double got, double want, double tol, double *w) {
    double r = fabs(got - want) / (fabs(want) > 0 ? fabs(want) : 1.0);
    if (r > *w) *w = r;
    if (!(r <= tol))
        fail_msg("%s: %.9g, expected %.9g (relative %.3g > %.1g)", what, got, want, r, tol);
}

static kr_train_params params_for(kr_train_target target) {
    kr_train_params p = kr_train_default_params(target);
    p.batch_size = B;
    p.seq_len = LEN;
    p.use_dropout = 0;
    p.n_threads = 2;
    return p;
}

static kr_trainer *make(const char *config, kr_train_params *p) {
    kr_trainer *tr = NULL;
    kr_error err = { 0 };
    const char *dir = dir_of(config, p->target == KR_TRAIN_PREDICTOR ? "predictor" : "tokenizer");
    if (kr_trainer_create(dir, p, &tr, &err) != KR_OK) fail_msg("create: %s", err.message);
    return tr;
}

/* Every gradient against grad.<name>: within 1e-4 of the reference's largest magnitude. */
static void check_grads(kr_trainer *tr, kr_safetensors *st, worst *w) {
    kr_error err = { 0 };
    for (int i = 0; i < kr_trainer_n_tensors(tr); i++) {
        kr_train_tensor t;
        assert_int_equal(kr_trainer_tensor(tr, i, &t, &err), KR_OK);
        char name[160];
        snprintf(name, sizeof name, "grad.%s", t.name);
        const kr_st_tensor *ref_t = kr_st_find(st, name);
        if (!ref_t) fail_msg("fixture lacks %s", name);
        assert_int_equal((size_t)ref_t->numel, t.n_elems);
        float *ref = f32(st, name);
        double mx = 0.0, d = 0.0;
        for (size_t k = 0; k < t.n_elems; k++) {
            mx = fmax(mx, fabs(ref[k]));
            d = fmax(d, fabs((double)t.grad[k] - ref[k]));
        }
        if (!t.trainable) {
            if (mx != 0.0 || d != 0.0) fail_msg("%s: a frozen parameter has a gradient", t.name);
        } else {
            double rel = mx > 0 ? d / mx : d;
            if (rel > w->grad_rel) w->grad_rel = rel;
            if (!(rel <= 1e-4))
                fail_msg("%s: max |diff| %.3g = %.3g of max |grad| %.3g", name, d, rel, mx);
        }
        free(ref);
    }
}

/* The parameters after the steps against after.<name>, starting from start[i]. */
static void check_after(kr_trainer *tr, kr_safetensors *st, float **start, worst *w) {
    kr_error err = { 0 };
    for (int i = 0; i < kr_trainer_n_tensors(tr); i++) {
        kr_train_tensor t;
        assert_int_equal(kr_trainer_tensor(tr, i, &t, &err), KR_OK);
        char name[160];
        snprintf(name, sizeof name, "after.%s", t.name);
        float *ref = f32(st, name);
        double dd = 0.0, nn = 0.0;
        size_t bad = 0;
        for (size_t k = 0; k < t.n_elems; k++) {
            double du = ((double)t.param[k] - start[i][k]) - ((double)ref[k] - start[i][k]);
            double u = (double)ref[k] - start[i][k];
            dd += du * du;
            nn += u * u;
            if (!(fabs((double)t.param[k] - ref[k]) <= 1e-5 + 1e-4 * fabs(ref[k]))) {
                bad++;
                if (getenv("KR_TEST_VERBOSE"))
                    fprintf(stderr, "  %s[%zu]: start %.9g got %.9g want %.9g\n", t.name, k,
                            start[i][k], t.param[k], ref[k]);
            }
        }
        if (!t.trainable) {
            if (memcmp(t.param, start[i], t.n_elems * sizeof(float)) != 0 || nn != 0.0)
                fail_msg("%s: a frozen parameter moved", t.name);
        } else {
            double rel = nn > 0 ? sqrt(dd / nn) : sqrt(dd);
            double frac = (double)bad / (double)t.n_elems;
            if (rel > w->update_rel) w->update_rel = rel;
            (void)frac;
            if (!(rel <= 1e-3)) fail_msg("%s: update off by %.3g relative (L2)", t.name, rel);
            /* 99.9 %, but a tensor under 1000 elements may have one element off: an element
             * whose gradient is rounding noise (a k_proj bias element of the odd model has
             * -2e-9 against its tensor's 1.5e-3 at step 0) takes a step of ±lr whose sign is
             * that noise's, in the reference as here */
            size_t allowed = t.n_elems / 1000 > 1 ? t.n_elems / 1000 : 1;
            if (bad > allowed)
                fail_msg("%s: %zu of %zu elements off (%.3g %%)", t.name, bad, t.n_elems,
                         100 * frac);
            w->n_bad += bad;
            w->n_elems += t.n_elems;
        }
        free(ref);
    }
}

/* Over the whole model: at least 99.9 % of the elements within the bound. */
static void check_model_elements(worst *w) {
    double frac = w->n_elems ? (double)w->n_bad / (double)w->n_elems : 0.0;
    w->elem_frac_bad = frac;
    if (!(frac <= 1e-3))
        fail_msg("%zu of %zu elements off (%.3g %%)", w->n_bad, w->n_elems, 100 * frac);
}

static float **snapshot(kr_trainer *tr) {
    int n = kr_trainer_n_tensors(tr);
    float **s = calloc((size_t)n, sizeof *s);
    kr_error err = { 0 };
    for (int i = 0; i < n; i++) {
        kr_train_tensor t;
        assert_int_equal(kr_trainer_tensor(tr, i, &t, &err), KR_OK);
        s[i] = malloc(t.n_elems * sizeof(float));
        memcpy(s[i], t.param, t.n_elems * sizeof(float));
    }
    return s;
}

static void free_snapshot(kr_trainer *tr, float **s) {
    for (int i = 0; i < kr_trainer_n_tensors(tr); i++) free(s[i]);
    free(s);
}

/* max |softmax(ref logits) − probs| over M rows of V */
static double probs_diff(const float *logits, const float *probs, int M, int V) {
    double worst_d = 0.0;
    double *e = malloc((size_t)V * sizeof(double));
    for (int m = 0; m < M; m++) {
        const float *x = logits + (size_t)m * V;
        double mx = x[0], s = 0.0;
        for (int c = 1; c < V; c++) mx = fmax(mx, x[c]);
        for (int c = 0; c < V; c++) s += (e[c] = exp(x[c] - mx));
        for (int c = 0; c < V; c++)
            worst_d = fmax(worst_d, fabs(e[c] / s - probs[(size_t)m * V + c]));
    }
    free(e);
    return worst_d;
}

static void report(const char *config, const char *cs, const worst *w) {
    printf("[ GOLDEN   ] %-4s %-16s %-6s loss %.2e grad %.2e norm %.2e lr %.2e update %.2e "
           "elements-off %zu/%zu forward %.2e\n",
           config, cs, kr_isa_name(kr_isa_active()), w->loss_rel, w->grad_rel, w->norm_rel,
           w->lr_rel, w->update_rel, w->n_bad, w->n_elems, w->fwd_abs);
}

/* ---------------------------------------------------------------- predictor */

static void predictor_step(const char *config) {
    kr_safetensors *st = open_case(config, "predictor_step");
    int32_t *s1 = i32(st, "s1_ids"), *s2 = i32(st, "s2_ids"), *sam = i32(st, "sampled_s1_ids");
    int32_t *stamp = stamps(st, "stamp");
    kr_train_params p = params_for(KR_TRAIN_PREDICTOR);
    kr_trainer *tr = make(config, &p);
    kr_train_batch b = {
        .n = B, .len = LEN, .s1 = s1, .s2 = s2, .stamp = stamp, .sampled_s1 = sam
    };
    kr_train_losses l;
    kr_error err = { 0 };
    worst w = { 0 };
    /* the forward: both heads' probabilities against the reference logits */
    assert_int_equal(kr_trainer_evaluate(tr, &b, 0, &l, &err), KR_OK);
    float *lg1 = f32(st, "s1_logits"), *lg2 = f32(st, "s2_logits");
    w.fwd_abs = fmax(probs_diff(lg1, tr_debug_probs(tr, 0), B * (LEN - 1), 1024),
                     probs_diff(lg2, tr_debug_probs(tr, 1), B * (LEN - 1), 1024));
    if (!(w.fwd_abs <= 1e-5)) fail_msg("%s: probabilities off by %.3g", config, w.fwd_abs);
    expect_rel("eval loss", l.loss, scalar(st, "loss"), 1e-5, &w.loss_rel);
    /* the step */
    assert_int_equal(kr_trainer_accumulate(tr, &b, &l, &err), KR_OK);
    assert_int_equal(l.tokens, B * (LEN - 1));
    expect_rel("ce_s1", l.ce_s1, scalar(st, "ce_s1"), 1e-5, &w.loss_rel);
    expect_rel("ce_s2", l.ce_s2, scalar(st, "ce_s2"), 1e-5, &w.loss_rel);
    expect_rel("loss", l.loss, scalar(st, "loss"), 1e-5, &w.loss_rel);
    check_grads(tr, st, &w);
    kr_train_step_info info;
    assert_int_equal(kr_trainer_step(tr, &info, &err), KR_OK);
    expect_rel("grad_norm", info.grad_norm, scalar(st, "grad_norm"), 1e-4, &w.norm_rel);
    report(config, "predictor_step", &w);
    kr_trainer_free(tr);
    free(s1);
    free(s2);
    free(sam);
    free(stamp);
    free(lg1);
    free(lg2);
    kr_st_close(st);
}

/* The reference's ids: tokenizer.encode(x, half=True) of each window, by the inference code. */
static void encode(const char *config, const float *x, int32_t *s1, int32_t *s2) {
    kr_tokenizer_weights *tw = NULL;
    kr_exec *ex = NULL;
    kr_error err = { 0 };
    if (kr_tokenizer_weights_load(dir_of(config, "tokenizer"), NULL, &tw, &err) != KR_OK)
        fail_msg("%s", err.message);
    assert_int_equal(kr_exec_create(1, 0, &ex, &err), KR_OK);
    for (int b = 0; b < B; b++)
        assert_int_equal(kr_tokenizer_encode(tw, ex, x + (size_t)b * LEN * 6, LEN,
                                             s1 + (size_t)b * LEN, s2 + (size_t)b * LEN, NULL,
                                             &err),
                         KR_OK);
    kr_exec_free(ex);
    kr_tokenizer_weights_free(tw);
}

static void predictor_adamw(const char *config) {
    kr_safetensors *st = open_case(config, "predictor_adamw");
    kr_train_params p = params_for(KR_TRAIN_PREDICTOR);
    p.lr = 1e-3;
    p.total_steps = 20;
    kr_trainer *tr = make(config, &p);
    float **start = snapshot(tr);
    worst w = { 0 };
    kr_error err = { 0 };
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "step%d.x", k);
        float *x = f32(st, name);
        snprintf(name, sizeof name, "step%d.stamp", k);
        int32_t *stamp = stamps(st, name);
        snprintf(name, sizeof name, "step%d.sampled_s1_ids", k);
        int32_t *sam = i32(st, name);
        int32_t s1[B * LEN], s2[B * LEN];
        encode(config, x, s1, s2);
        kr_train_batch b = {
            .n = B, .len = LEN, .s1 = s1, .s2 = s2, .stamp = stamp, .sampled_s1 = sam
        };
        kr_train_losses l;
        kr_train_step_info info;
        assert_int_equal(kr_trainer_accumulate(tr, &b, &l, &err), KR_OK);
        assert_int_equal(kr_trainer_step(tr, &info, &err), KR_OK);
        assert_int_equal(info.step, k + 1);
        snprintf(name, sizeof name, "step%d.loss", k);
        expect_rel(name, l.loss, scalar(st, name), 1e-5, &w.loss_rel);
        snprintf(name, sizeof name, "step%d.grad_norm", k);
        expect_rel(name, info.grad_norm, scalar(st, name), 1e-4, &w.norm_rel);
        snprintf(name, sizeof name, "step%d.lr", k);
        expect_rel(name, info.lr, scalar(st, name), 1e-6, &w.lr_rel);
        free(x);
        free(stamp);
        free(sam);
    }
    check_after(tr, st, start, &w);
    check_model_elements(&w);
    report(config, "predictor_adamw", &w);
    free_snapshot(tr, start);
    kr_trainer_free(tr);
    kr_st_close(st);
}

/* ---------------------------------------------------------------- tokenizer */

static void tokenizer_step(const char *config) {
    kr_safetensors *st = open_case(config, "tokenizer_step");
    float *x = f32(st, "x");
    kr_train_params p = params_for(KR_TRAIN_TOKENIZER);
    kr_trainer *tr = make(config, &p);
    kr_train_batch b = { .n = B, .len = LEN, .x = x };
    kr_train_losses l;
    kr_error err = { 0 };
    worst w = { 0 };
    assert_int_equal(kr_trainer_evaluate(tr, &b, 0, &l, &err), KR_OK);
    static const char *const outs[3] = { "quantized", "z_pre", "z" };
    static const size_t widths[3] = { 20, 6, 6 };
    for (int k = 0; k < 3; k++) {
        float *ref = f32(st, outs[k]);
        double d = kr_test_max_abs_diff(tr_debug_tokenizer(tr, k), ref, B * LEN * widths[k]);
        w.fwd_abs = fmax(w.fwd_abs, d);
        if (!(d <= 1e-5)) fail_msg("%s %s: max |diff| %.3g", config, outs[k], d);
        free(ref);
    }
    assert_int_equal(kr_trainer_accumulate(tr, &b, &l, &err), KR_OK);
    assert_int_equal(l.tokens, B * LEN);
    expect_rel("recon_pre", l.recon_pre, scalar(st, "recon_pre"), 1e-5, &w.loss_rel);
    expect_rel("recon", l.recon, scalar(st, "recon_all"), 1e-5, &w.loss_rel);
    expect_rel("bsq_loss", l.bsq, scalar(st, "bsq_loss"), 1e-5, &w.loss_rel);
    expect_rel("loss", l.loss, scalar(st, "loss"), 1e-5, &w.loss_rel);
    check_grads(tr, st, &w);
    kr_train_step_info info;
    assert_int_equal(kr_trainer_step(tr, &info, &err), KR_OK);
    expect_rel("grad_norm", info.grad_norm, scalar(st, "grad_norm"), 1e-4, &w.norm_rel);
    report(config, "tokenizer_step", &w);
    kr_trainer_free(tr);
    free(x);
    kr_st_close(st);
}

static void tokenizer_adamw(const char *config) {
    kr_safetensors *st = open_case(config, "tokenizer_adamw");
    kr_train_params p = params_for(KR_TRAIN_TOKENIZER);
    p.lr = 2e-3;
    p.total_steps = 20;
    kr_trainer *tr = make(config, &p);
    float **start = snapshot(tr);
    worst w = { 0 };
    kr_error err = { 0 };
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "step%d.x", k);
        float *x = f32(st, name);
        kr_train_batch b = { .n = B, .len = LEN, .x = x };
        kr_train_losses l;
        kr_train_step_info info;
        assert_int_equal(kr_trainer_accumulate(tr, &b, &l, &err), KR_OK);
        assert_int_equal(kr_trainer_step(tr, &info, &err), KR_OK);
        snprintf(name, sizeof name, "step%d.loss", k);
        expect_rel(name, l.loss, scalar(st, name), 1e-5, &w.loss_rel);
        snprintf(name, sizeof name, "step%d.grad_norm", k);
        expect_rel(name, info.grad_norm, scalar(st, name), 1e-4, &w.norm_rel);
        snprintf(name, sizeof name, "step%d.lr", k);
        expect_rel(name, info.lr, scalar(st, name), 1e-6, &w.lr_rel);
        free(x);
    }
    check_after(tr, st, start, &w);
    check_model_elements(&w);
    report(config, "tokenizer_adamw", &w);
    free_snapshot(tr, start);
    kr_trainer_free(tr);
    kr_st_close(st);
}

/* ---------------------------------------------------------------- per ISA */

typedef void (*case_fn)(const char *config);

static void each_isa(case_fn fn) {
    kr_isa best = kr_isa_best();
    for (int isa = 0; isa <= (int)best; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        kr_isa_set((kr_isa)isa);
        for (int c = 0; c < 2; c++) fn(k_configs[c]);
    }
    kr_isa_set(best);
}

static void test_predictor_step(void **state) {
    (void)state;
    each_isa(predictor_step);
}

static void test_predictor_adamw(void **state) {
    (void)state;
    each_isa(predictor_adamw);
}

static void test_tokenizer_step(void **state) {
    (void)state;
    each_isa(tokenizer_step);
}

static void test_tokenizer_adamw(void **state) {
    (void)state;
    each_isa(tokenizer_adamw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predictor_step),
        cmocka_unit_test(test_tokenizer_step),
        cmocka_unit_test(test_predictor_adamw),
        cmocka_unit_test(test_tokenizer_adamw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
