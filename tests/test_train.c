/*
 * The training API (kronos/train.h) beyond the golden step: inverted dropout's keep rate and
 * scaling (statistically), determinism (same seed → the same parameters bit for bit, on 1 or 3
 * threads), resuming from a state file bit for bit, gradient accumulation, the saved Hugging
 * Face directory (kr_model_load loads it, its tensors are the input's), and the errors: bad
 * parameters, bad batches, a non-finite loss, a schedule run out, a corrupt state file.
 */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kronos.h"
#include "kronos/train.h"
#include "model/safetensors.h"
#include "train/ops.h"
#include "train/trainer_internal.h"

#define B 4
#define LEN 24

static const char *fixture_dir(const char *sub) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/tiny/%s", kr_test_fixture("train"), sub);
    return buf;
}

/* A copy of the tiny predictor (or tokenizer) whose config has every dropout at p. */
static const char *dropout_copy(const char *sub, double p) {
    const char *dir = kr_test_fresh_dir();
    char src[1200], dst[1200], cfg[4096];
    snprintf(src, sizeof src, "%s/model.safetensors", fixture_dir(sub));
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    assert_int_equal(symlink(src, dst), 0);
    int n;
    if (!strcmp(sub, "predictor"))
        n = snprintf(
            cfg, sizeof cfg,
            "{\"attn_dropout_p\": %g, \"d_model\": 32, \"ff_dim\": 64, \"ffn_dropout_p\": %g, "
            "\"learn_te\": false, \"n_heads\": 2, \"n_layers\": 2, \"resid_dropout_p\": %g, "
            "\"s1_bits\": 10, \"s2_bits\": 10, \"token_dropout_p\": %g}\n",
            p, p, p, p);
    else
        n = snprintf(cfg, sizeof cfg,
                     "{\"attn_dropout_p\": %g, \"beta\": 0.05, \"d_in\": 6, \"d_model\": 32, "
                     "\"ff_dim\": 64, \"ffn_dropout_p\": %g, \"gamma\": 1.1, \"gamma0\": 1.0, "
                     "\"group_size\": 4, \"n_dec_layers\": 2, \"n_enc_layers\": 2, \"n_heads\": 2, "
                     "\"resid_dropout_p\": %g, \"s1_bits\": 10, \"s2_bits\": 10, \"zeta\": 0.05}\n",
                     p, p, p);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    assert_int_equal(kr_test_write_file(dst, cfg, (size_t)n), 0);
    return dir;
}

/* A deterministic batch of B windows of LEN rows (ids, stamps, candles). */
typedef struct batch_data {
    int32_t s1[B * LEN], s2[B * LEN], stamp[B * LEN * 5];
    float x[B * LEN * 6];
} batch_data;

static void fill(batch_data *d, unsigned seed) {
    uint64_t r = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (int i = 0; i < B * LEN; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        d->s1[i] = (int32_t)(r % 1024);
        d->s2[i] = (int32_t)((r >> 16) % 1024);
        int32_t st[5] = { (int)(r % 60), (int)((r >> 8) % 24), (int)((r >> 12) % 7),
                          1 + (int)((r >> 20) % 31), 1 + (int)((r >> 28) % 12) };
        memcpy(d->stamp + i * 5, st, sizeof st);
        for (int k = 0; k < 6; k++)
            d->x[i * 6 + k] = (float)((double)((r >> (6 * k)) % 2001) / 1000.0 - 1.0);
    }
}

static kr_train_batch batch_of(const batch_data *d, int n) {
    kr_train_batch b = {
        .n = n, .len = LEN, .s1 = d->s1, .s2 = d->s2, .stamp = d->stamp, .x = d->x
    };
    return b;
}

static kr_train_params params(kr_train_target t, int threads) {
    kr_train_params p = kr_train_default_params(t);
    p.batch_size = B;
    p.seq_len = LEN;
    p.n_threads = threads;
    p.total_steps = 50;
    p.lr = 1e-3;
    p.seed = 7;
    return p;
}

static kr_trainer *make(const char *dir, const kr_train_params *p) {
    kr_trainer *tr = NULL;
    kr_error err = { 0 };
    if (kr_trainer_create(dir, p, &tr, &err) != KR_OK) fail_msg("create %s: %s", dir, err.message);
    return tr;
}

/* n optimizer steps of `micro` micro-batches each, batches from seeds base, base + 1, ... */
static void train(kr_trainer *tr, int n, int micro, unsigned base, double *last_loss) {
    kr_error err = { 0 };
    batch_data d;
    for (int s = 0; s < n; s++) {
        for (int m = 0; m < micro; m++) {
            fill(&d, base + (unsigned)(s * micro + m));
            kr_train_batch b = batch_of(&d, B);
            kr_train_losses l;
            if (kr_trainer_accumulate(tr, &b, &l, &err) != KR_OK) fail_msg("%s", err.message);
            if (last_loss) *last_loss = l.loss;
        }
        if (kr_trainer_step(tr, NULL, &err) != KR_OK) fail_msg("%s", err.message);
    }
}

/* 1 if every parameter of a and b is bit-identical. */
static int same_params(kr_trainer *a, kr_trainer *b) {
    kr_error err = { 0 };
    if (kr_trainer_n_tensors(a) != kr_trainer_n_tensors(b)) return 0;
    for (int i = 0; i < kr_trainer_n_tensors(a); i++) {
        kr_train_tensor ta, tb;
        assert_int_equal(kr_trainer_tensor(a, i, &ta, &err), KR_OK);
        assert_int_equal(kr_trainer_tensor(b, i, &tb, &err), KR_OK);
        if (strcmp(ta.name, tb.name) || ta.n_elems != tb.n_elems ||
            memcmp(ta.param, tb.param, ta.n_elems * sizeof(float)))
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- profile */

/* The profile: off by default (no part counted); on, a step counts regions in the parts a
 * predictor step runs (each Linear's three GEMMs, attention both ways, the optimizer) with
 * non-negative times; it changes no result; off again, it stops counting. */
static void test_profile(void **state) {
    (void)state;
    kr_train_params p = params(KR_TRAIN_PREDICTOR, 2);
    kr_trainer *a = make(fixture_dir("predictor"), &p), *b = make(fixture_dir("predictor"), &p);
    kr_train_part_time parts[64];
    int n = kr_trainer_profile(a, NULL, 0);
    assert_true(n > 0 && n <= 64);
    assert_int_equal(kr_trainer_profile(a, parts, 64), n);
    for (int i = 0; i < n; i++) assert_int_equal(parts[i].calls, 0);
    train(a, 1, 1, 3, NULL);
    kr_trainer_profile(a, parts, 64);
    for (int i = 0; i < n; i++) assert_int_equal(parts[i].calls, 0);
    kr_trainer_profile_enable(a, 1);
    train(a, 1, 1, 4, NULL);
    train(b, 2, 1, 3, NULL);
    assert_true(same_params(a, b));
    kr_trainer_profile(a, parts, 64);
    const char *must[] = { "gemm_forward",      "gemm_input_grad",    "gemm_weight_grad",
                           "attention_forward", "attention_backward", "optimizer" };
    for (size_t k = 0; k < sizeof must / sizeof *must; k++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(parts[i].name, must[k])) {
                found = 1;
                assert_true(parts[i].calls > 0);
            }
        if (!found) fail_msg("no part named %s", must[k]);
    }
    long calls = 0;
    for (int i = 0; i < n; i++) {
        assert_true(parts[i].wall_seconds >= 0.0 && parts[i].cpu_seconds >= 0.0);
        calls += parts[i].calls;
    }
    kr_trainer_profile_enable(a, 0);
    train(a, 1, 1, 5, NULL);
    kr_trainer_profile(a, parts, 64);
    long after = 0;
    for (int i = 0; i < n; i++) after += parts[i].calls;
    assert_int_equal(after, 0); /* switching zeroes, and off counts nothing */
    assert_true(calls > 0);
    kr_trainer_free(a);
    kr_trainer_free(b);
}

/* ---------------------------------------------------------------- dropout */

/* Keep rate and scaling over 2^20 elements: the kept fraction is Binomial(n, 1 − p), so it
 * lies within 6 standard deviations with probability 1 − 2e-9; every kept value is exactly
 * x/(1 − p) in float, every dropped one 0; masks of different streams, rows and columns are
 * independent (agreement p² + (1 − p)², same bound). */
static void test_dropout_statistics(void **state) {
    (void)state;
    const int M = 1024, N = 1024;
    const double ps[3] = { 0.1, 0.5, 0.9 };
    float *x = malloc((size_t)M * N * sizeof *x), *y = malloc((size_t)M * N * sizeof *y);
    for (int t = 0; t < 3; t++) {
        double p = ps[t], n = (double)M * N;
        tr_dropout a = { (float)p, 42, 1 }, b = { (float)p, 42, 2 };
        for (size_t i = 0; i < (size_t)M * N; i++) x[i] = y[i] = 1.0f + (float)(i % 7);
        tr_dropout_apply(NULL, &a, M, N, x, N, 0);
        tr_dropout_apply(NULL, &b, M, N, y, N, 0);
        const float scale = 1.0f / (1.0f - (float)p);
        double kept = 0, agree = 0, next_row_agree = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) {
            float orig = 1.0f + (float)(i % 7);
            int ka = x[i] != 0.0f, kb = y[i] != 0.0f;
            if (ka) assert_true(x[i] == orig * scale);
            kept += ka;
            agree += ka == kb;
            if (i + (size_t)N < (size_t)M * N) next_row_agree += ka == (x[i + N] != 0.0f);
        }
        double sd = sqrt(n * p * (1 - p)), q = p * p + (1 - p) * (1 - p);
        double sd_agree = sqrt(n * q * (1 - q));
        if (!(fabs(kept - n * (1 - p)) <= 6 * sd))
            fail_msg("p %.1f: kept %.0f of %.0f, expected %.0f ± %.0f", p, kept, n, n * (1 - p),
                     6 * sd);
        if (!(fabs(agree - n * q) <= 6 * sd_agree))
            fail_msg("p %.1f: two streams agree on %.0f, expected %.0f", p, agree, n * q);
        double nr = n - N;
        if (!(fabs(next_row_agree - nr * q) <= 6 * sqrt(nr * q * (1 - q))))
            fail_msg("p %.1f: consecutive rows agree on %.0f, expected %.0f", p, next_row_agree,
                     nr * q);
        /* the expectation is kept: E[y] = x */
        double sum = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) sum += x[i] / (1.0 + (double)(i % 7));
        double mean_sd = sqrt(p / (1 - p) / n);
        if (!(fabs(sum / n - 1.0) <= 6 * mean_sd)) fail_msg("p %.1f: mean %.5f", p, sum / n);
    }
    free(x);
    free(y);
}

/* The trainer applies the config's rates only with use_dropout: with it, two runs of one seed
 * agree bit for bit and differ from a run without; evaluate never drops. */
static void test_dropout_in_trainer(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        kr_train_target target = t ? KR_TRAIN_TOKENIZER : KR_TRAIN_PREDICTOR;
        const char *dir = dropout_copy(t ? "tokenizer" : "predictor", 0.2);
        kr_train_params p = params(target, 2);
        kr_trainer *a = make(dir, &p), *b = make(dir, &p);
        p.use_dropout = 0;
        kr_trainer *c = make(dir, &p);
        batch_data d;
        fill(&d, 3);
        kr_train_batch bt = batch_of(&d, B);
        int32_t sampled[B * (LEN - 1)];
        for (int i = 0; i < B * (LEN - 1); i++) sampled[i] = (i * 37) % 1024;
        bt.sampled_s1 = sampled; /* evaluate and accumulate draw from different streams */
        kr_train_losses la, lb, lc, ea, ec;
        kr_error err = { 0 };
        assert_int_equal(kr_trainer_evaluate(a, &bt, 0, &ea, &err), KR_OK);
        assert_int_equal(kr_trainer_evaluate(c, &bt, 0, &ec, &err), KR_OK);
        assert_true(ea.loss == ec.loss); /* evaluate: no dropout either way */
        assert_int_equal(kr_trainer_accumulate(a, &bt, &la, &err), KR_OK);
        assert_int_equal(kr_trainer_accumulate(b, &bt, &lb, &err), KR_OK);
        assert_int_equal(kr_trainer_accumulate(c, &bt, &lc, &err), KR_OK);
        assert_true(la.loss == lb.loss);
        assert_true(la.loss != lc.loss);
        if (!t) assert_true(lc.loss == ec.loss); /* no dropout: the step's loss is evaluate's */
        kr_trainer_free(a);
        kr_trainer_free(b);
        kr_trainer_free(c);
    }
}

/* ---------------------------------------------------------------- determinism */

/* Sampled s1 ids (not injected) and dropout on: same seed → same parameters after 3 steps of 2
 * micro-batches, on 1 or 3 threads alike; another seed → others. */
static void test_determinism(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        kr_train_target target = t ? KR_TRAIN_TOKENIZER : KR_TRAIN_PREDICTOR;
        const char *dir = dropout_copy(t ? "tokenizer" : "predictor", 0.1);
        kr_train_params p1 = params(target, 1), p3 = params(target, 3);
        p1.accumulation_steps = p3.accumulation_steps = 2;
        kr_trainer *a = make(dir, &p1), *b = make(dir, &p3), *c = make(dir, &p3);
        train(a, 3, 2, 10, NULL);
        train(b, 3, 2, 10, NULL);
        assert_true(same_params(a, b));
        p3.seed = 8;
        kr_trainer *e = make(dir, &p3);
        train(e, 3, 2, 10, NULL);
        assert_false(same_params(a, e));
        train(c, 3, 2, 10, NULL);
        assert_true(same_params(b, c));
        assert_int_equal(kr_trainer_steps_done(c), 3);
        kr_trainer_free(a);
        kr_trainer_free(b);
        kr_trainer_free(c);
        kr_trainer_free(e);
    }
}

/* With accumulation_steps 2, two micro-batches accumulate the mean of their gradients: each
 * computed alone (accumulation_steps 1), averaged, to float rounding. For the predictor, whose
 * loss is a mean over rows, that is also one batch of both (not for the tokenizer: its codebook
 * entropy averages probabilities over the micro-batch, as the reference's does). */
static void test_accumulation(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        kr_train_target target = t ? KR_TRAIN_TOKENIZER : KR_TRAIN_PREDICTOR;
        const char *dir = fixture_dir(t ? "tokenizer" : "predictor");
        kr_train_params p = params(target, 2);
        p.use_dropout = 0;
        kr_trainer *one = make(dir, &p), *h0 = make(dir, &p), *h1 = make(dir, &p);
        p.accumulation_steps = 2;
        kr_trainer *two = make(dir, &p);
        batch_data d;
        fill(&d, 5);
        int32_t sampled[B * (LEN - 1)];
        for (int i = 0; i < B * (LEN - 1); i++) sampled[i] = (i * 37) % 1024;
        kr_train_batch all = batch_of(&d, B);
        all.sampled_s1 = sampled;
        kr_error err = { 0 };
        assert_int_equal(kr_trainer_accumulate(one, &all, NULL, &err), KR_OK);
        for (int h = 0; h < 2; h++) {
            kr_train_batch half = { .n = 2,
                                    .len = LEN,
                                    .s1 = d.s1 + h * 2 * LEN,
                                    .s2 = d.s2 + h * 2 * LEN,
                                    .stamp = d.stamp + h * 2 * LEN * 5,
                                    .x = d.x + h * 2 * LEN * 6,
                                    .sampled_s1 = sampled + h * 2 * (LEN - 1) };
            assert_int_equal(kr_trainer_accumulate(two, &half, NULL, &err), KR_OK);
            assert_int_equal(kr_trainer_accumulate(h ? h1 : h0, &half, NULL, &err), KR_OK);
        }
        for (int i = 0; i < kr_trainer_n_tensors(one); i++) {
            kr_train_tensor a, b, g0, g1;
            kr_trainer_tensor(one, i, &a, &err);
            kr_trainer_tensor(two, i, &b, &err);
            kr_trainer_tensor(h0, i, &g0, &err);
            kr_trainer_tensor(h1, i, &g1, &err);
            double mx = 0, d_halves = 0, d_one = 0;
            for (size_t k = 0; k < a.n_elems; k++) {
                mx = fmax(mx, fabs(b.grad[k]));
                d_halves = fmax(d_halves, fabs(b.grad[k] - 0.5 * (g0.grad[k] + g1.grad[k])));
                d_one = fmax(d_one, fabs(a.grad[k] - b.grad[k]));
            }
            if (!(d_halves <= 1e-5 * mx + 1e-12))
                fail_msg("%s: accumulated gradient off the halves' mean by %.3g of %.3g", a.name,
                         d_halves, mx);
            if (!t && !(d_one <= 1e-5 * mx + 1e-12))
                fail_msg("%s: accumulated gradient off the whole batch's by %.3g of %.3g", a.name,
                         d_one, mx);
        }
        kr_trainer_free(one);
        kr_trainer_free(two);
        kr_trainer_free(h0);
        kr_trainer_free(h1);
    }
}

/* ---------------------------------------------------------------- files */

/* Training 2 steps, saving the state, training 2 more == loading that state into a fresh
 * trainer and training the same 2: every parameter and the last loss bit for bit. */
static void test_resume(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char path[1200];
    snprintf(path, sizeof path, "%s/state.bin", tmp);
    for (int t = 0; t < 2; t++) {
        kr_train_target target = t ? KR_TRAIN_TOKENIZER : KR_TRAIN_PREDICTOR;
        const char *dir = dropout_copy(t ? "tokenizer" : "predictor", 0.1);
        kr_train_params p = params(target, 2);
        kr_trainer *a = make(dir, &p);
        kr_error err = { 0 };
        train(a, 2, 1, 30, NULL);
        /* an accumulated micro-batch pending at the save is part of the state */
        batch_data d;
        fill(&d, 99);
        kr_train_batch bt = batch_of(&d, B);
        assert_int_equal(kr_trainer_accumulate(a, &bt, NULL, &err), KR_OK);
        assert_int_equal(kr_trainer_save_state(a, path, &err), KR_OK);
        assert_int_equal(kr_trainer_step(a, NULL, &err), KR_OK);
        double la, lb;
        train(a, 2, 1, 40, &la);
        p.seed = 12345; /* the state's seed wins */
        kr_trainer *b = make(dir, &p);
        assert_false(same_params(a, b));
        assert_int_equal(kr_trainer_load_state(b, path, &err), KR_OK);
        assert_int_equal(kr_trainer_steps_done(b), 2);
        assert_int_equal(kr_trainer_step(b, NULL, &err), KR_OK);
        train(b, 2, 1, 40, &lb);
        assert_true(la == lb);
        assert_true(same_params(a, b));
        /* a state of the other model kind, a corrupt file, a missing one */
        if (t == 1) {
            kr_train_params pp = params(KR_TRAIN_PREDICTOR, 1);
            kr_trainer *other = make(fixture_dir("predictor"), &pp);
            assert_int_equal(kr_trainer_load_state(other, path, &err), KR_ERR_FORMAT);
            assert_non_null(strstr(err.message, "another model"));
            kr_trainer_free(other);
        }
        FILE *f = fopen(path, "r+b");
        fseek(f, -100, SEEK_END); /* a byte of the second moments */
        int ch = fgetc(f);
        fseek(f, -100, SEEK_END);
        fputc(ch ^ 0x40, f);
        fclose(f);
        kr_trainer *c = make(dir, &p);
        assert_int_equal(kr_trainer_load_state(c, path, &err), KR_ERR_FORMAT);
        assert_non_null(strstr(err.message, "checksum"));
        kr_trainer *fresh = make(dir, &p);
        assert_true(same_params(c, fresh)); /* nothing changed */
        assert_int_equal(kr_trainer_load_state(c, "/nonexistent/state.bin", &err), KR_ERR_IO);
        kr_trainer_free(a);
        kr_trainer_free(b);
        kr_trainer_free(c);
        kr_trainer_free(fresh);
    }
}

/* The tensors of two safetensors files: the same names, dtypes and shapes. */
static void same_tensors(const char *a_path, const char *b_path) {
    kr_safetensors *a = NULL, *b = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open(a_path, &a, &err), KR_OK);
    assert_int_equal(kr_st_open(b_path, &b, &err), KR_OK);
    assert_int_equal(kr_st_count(a), kr_st_count(b));
    for (int i = 0; i < kr_st_count(a); i++) {
        const kr_st_tensor *ta = kr_st_at(a, i), *tb = kr_st_find(b, ta->name);
        if (!tb) fail_msg("%s lacks %s", b_path, ta->name);
        assert_int_equal(ta->dtype, tb->dtype);
        assert_int_equal(ta->ndim, tb->ndim);
        for (int k = 0; k < ta->ndim; k++) assert_int_equal(ta->shape[k], tb->shape[k]);
        if (ta->dtype == KR_DT_I64 || strstr(ta->name, "inv_freq"))
            assert_memory_equal(ta->data, tb->data, ta->nbytes); /* buffers unchanged */
    }
    kr_st_close(a);
    kr_st_close(b);
}

/* kr_trainer_save writes directories kr_model_load loads, with the input's tensors, config.json
 * as it was, and the trained values (a trainer created from it starts where it stopped). */
static void test_save_loads(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char pdir[1200], tdir[1200], a[1300], b[1300];
    snprintf(pdir, sizeof pdir, "%s/out/predictor", tmp);
    snprintf(tdir, sizeof tdir, "%s/out/tokenizer", tmp);
    kr_error err = { 0 };
    kr_train_params pp = params(KR_TRAIN_PREDICTOR, 2), tp = params(KR_TRAIN_TOKENIZER, 2);
    kr_trainer *pr = make(fixture_dir("predictor"), &pp), *tk = make(fixture_dir("tokenizer"), &tp);
    train(pr, 2, 1, 50, NULL);
    train(tk, 2, 1, 60, NULL);
    assert_int_equal(kr_trainer_save(pr, pdir, &err), KR_OK);
    assert_int_equal(kr_trainer_save(tk, tdir, &err), KR_OK);
    const char *subs[2] = { "predictor", "tokenizer" }, *outs[2] = { pdir, tdir };
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "%s/model.safetensors", fixture_dir(subs[i]));
        snprintf(b, sizeof b, "%s/model.safetensors", outs[i]);
        same_tensors(a, b);
        same_tensors(b, a);
        char ca[8192], cb[8192];
        snprintf(a, sizeof a, "%s/config.json", fixture_dir(subs[i]));
        snprintf(b, sizeof b, "%s/config.json", outs[i]);
        kr_test_slurp(a, ca, sizeof ca);
        kr_test_slurp(b, cb, sizeof cb);
        assert_string_equal(ca, cb);
    }
    kr_model *m = NULL;
    kr_model_params mp = kr_model_default_params();
    if (kr_model_load(pdir, tdir, &mp, &m, &err) != KR_OK)
        fail_msg("kr_model_load: %s", err.message);
    kr_model_free(m);
    kr_trainer *again = make(pdir, &pp);
    assert_true(same_params(pr, again));
    kr_trainer_free(again);
    kr_trainer_free(pr);
    kr_trainer_free(tk);
}

/* ---------------------------------------------------------------- errors */

static void test_bad_params(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_trainer *tr = NULL;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", fixture_dir("predictor"));
    kr_train_params p = params(KR_TRAIN_PREDICTOR, 1);
    kr_train_params bad = p;
    bad.batch_size = 0;
    assert_int_equal(kr_trainer_create(dir, &bad, &tr, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "batch_size"));
    assert_null(tr);
    bad = p;
    bad.lr = NAN;
    assert_int_equal(kr_trainer_create(dir, &bad, &tr, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "lr"));
    bad = p;
    bad.beta2 = 1.0;
    assert_int_equal(kr_trainer_create(dir, &bad, &tr, &err), KR_ERR_INVALID_ARG);
    bad = p;
    bad.seq_len = 1; /* a predictor learns len − 1 positions */
    assert_int_equal(kr_trainer_create(dir, &bad, &tr, &err), KR_ERR_INVALID_ARG);
    bad = p;
    bad.accumulation_steps = 0;
    assert_int_equal(kr_trainer_create(dir, &bad, &tr, &err), KR_ERR_INVALID_ARG);
    /* the wrong kind of directory, a missing one */
    assert_int_not_equal(kr_trainer_create(fixture_dir("tokenizer"), &p, &tr, &err), KR_OK);
    assert_null(tr);
    assert_int_equal(kr_trainer_create("/nonexistent/model", &p, &tr, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/model"));
    size_t bytes = 0;
    assert_int_equal(kr_train_memory_estimate(dir, &p, &bytes, &err), KR_OK);
    assert_true(bytes > 5 * 164704 * sizeof(float)); /* at least the parameter arrays */
    p.batch_size = 2 * B;
    size_t bigger = 0;
    assert_int_equal(kr_train_memory_estimate(dir, &p, &bigger, &err), KR_OK);
    assert_true(bigger > bytes);
}

/* The estimate is what create allocates: parameter arrays and activation block, both kinds. */
static void test_memory_estimate(void **state) {
    (void)state;
    kr_error err = { 0 };
    for (int t = 0; t < 2; t++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", fixture_dir(t ? "tokenizer" : "predictor"));
        kr_train_params p = params(t ? KR_TRAIN_TOKENIZER : KR_TRAIN_PREDICTOR, 3);
        size_t est = 0;
        assert_int_equal(kr_train_memory_estimate(dir, &p, &est, &err), KR_OK);
        kr_trainer *tr = make(dir, &p);
        size_t got = 5 * tr->n_floats * sizeof(float) + tr->act_bytes + sizeof *tr;
        assert_int_equal(est, got);
        kr_trainer_free(tr);
    }
}

static void test_bad_batches(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_train_params p = params(KR_TRAIN_PREDICTOR, 2);
    kr_trainer *tr = make(fixture_dir("predictor"), &p);
    batch_data d;
    fill(&d, 1);
    kr_train_batch b = batch_of(&d, B);
    b.n = B + 1;
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_ERR_INVALID_ARG);
    b = batch_of(&d, B);
    b.len = LEN + 1;
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_ERR_INVALID_ARG);
    b = batch_of(&d, B);
    d.s2[LEN + 3] = 1024;
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "window 1 row 3"));
    fill(&d, 1);
    d.stamp[5 * 7 + 2] = 7; /* weekday 7 */
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "weekday"));
    fill(&d, 1);
    int32_t sampled[B * (LEN - 1)] = { 0 };
    sampled[5] = -1;
    b.sampled_s1 = sampled;
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_ERR_INVALID_ARG);
    b.s1 = NULL;
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_trainer_accumulate(tr, NULL, NULL, &err), KR_ERR_INVALID_ARG);
    kr_trainer_free(tr);
}

/* A batch whose loss is not finite fails with KR_ERR_NUMERIC naming the step; the step after it
 * refuses too and leaves the parameters as they were; zero_grad and a good batch go on. */
static void test_numeric(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_train_params p = params(KR_TRAIN_TOKENIZER, 2);
    kr_trainer *tr = make(fixture_dir("tokenizer"), &p), *ref = make(fixture_dir("tokenizer"), &p);
    batch_data d;
    fill(&d, 4);
    for (int k = 0; k < 6; k++)
        d.x[6 * 17 + k] = (k % 2 ? -3e38f : 3e38f); /* finite, overflowing */
    kr_train_batch b = batch_of(&d, B);
    b.x = d.x;
    kr_train_losses l;
    assert_int_equal(kr_trainer_accumulate(tr, &b, &l, &err), KR_ERR_NUMERIC);
    assert_non_null(strstr(err.message, "step 1"));
    assert_int_equal(kr_trainer_step(tr, NULL, &err), KR_ERR_NUMERIC);
    assert_non_null(strstr(err.message, "gradient norm"));
    assert_true(same_params(tr, ref));
    assert_int_equal(kr_trainer_steps_done(tr), 0);
    assert_string_equal(kr_strerror(KR_ERR_NUMERIC), "a computation produced NaN or infinity");
    fill(&d, 4);
    train(tr, 1, 1, 70, NULL);
    train(ref, 1, 1, 70, NULL);
    assert_true(same_params(tr, ref));
    /* a non-finite input is refused before anything runs */
    d.x[5] = NAN;
    assert_int_equal(kr_trainer_accumulate(tr, &b, &l, &err), KR_ERR_INVALID_ARG);
    kr_trainer_free(tr);
    kr_trainer_free(ref);
}

/* The schedule's total_steps bound the steps; the rate follows OneCycleLR. */
static void test_schedule_end(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_train_params p = params(KR_TRAIN_TOKENIZER, 1);
    p.total_steps = 3;
    p.pct_start = 0.3;
    kr_trainer *tr = make(fixture_dir("tokenizer"), &p);
    batch_data d;
    fill(&d, 2);
    kr_train_batch b = batch_of(&d, B);
    double lrs[3];
    for (int s = 0; s < 3; s++) {
        kr_train_step_info info;
        assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_OK);
        assert_int_equal(kr_trainer_step(tr, &info, &err), KR_OK);
        lrs[s] = info.lr;
    }
    /* torch: phase ends at 0.3·3 − 1 = −0.1 and 2; step 0 is 0.1/2.1 of the way down from max */
    double min_lr = p.lr / p.div_factor / p.final_div_factor;
    for (int s = 0; s < 3; s++) {
        double pct = (s + 0.1) / 2.1;
        double want = min_lr + (p.lr - min_lr) / 2 * (cos(M_PI * pct) + 1);
        assert_true(fabs(lrs[s] - want) < 1e-12);
    }
    assert_int_equal(kr_trainer_accumulate(tr, &b, NULL, &err), KR_OK);
    assert_int_equal(kr_trainer_step(tr, NULL, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "total_steps"));
    kr_trainer_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dropout_statistics),
        cmocka_unit_test(test_dropout_in_trainer),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_save_loads),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_memory_estimate),
        cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_numeric),
        cmocka_unit_test(test_schedule_end),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
