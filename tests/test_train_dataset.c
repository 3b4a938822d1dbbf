/*
 * Tests for train/dataset, order and window_encoder — the training windows of `kronos
 * finetune`: the windows of the official training fixtures (../shared/golden/train, copied
 * into tests/fixtures/finetune) bit for bit,
 * their token ids through the inference tokenizer, the split by time, the absence of future
 * data in a window's inputs, the official scramble and the per-epoch order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "model/safetensors.h"
#include "train/dataset.h"
#include "train/order.h"
#include "train/window_encoder.h"
#include "test_support.h"

/* ------------------------------------------------------------------ helpers */

typedef struct rows {
    int64_t n;
    int64_t *ts;
    double *v; /* [n][6] */
} rows;

/* tests/fixtures/regression_input.csv: "YYYY-MM-DD HH:MM:SS,o,h,l,c,volume,amount" rows. */
static rows read_regression_input(void) {
    FILE *f = fopen(kr_test_fixture("regression_input.csv"), "r");
    assert_non_null(f);
    rows r = { 0 };
    char line[512];
    assert_non_null(fgets(line, sizeof line, f)); /* header */
    size_t cap = 4096;
    r.ts = malloc(cap * sizeof *r.ts);
    r.v = malloc(cap * 6 * sizeof *r.v);
    while (fgets(line, sizeof line, f)) {
        int y, mo, d, h, mi, s;
        double *v = r.v + (size_t)r.n * 6;
        int got = sscanf(line, "%d-%d-%d %d:%d:%d,%lf,%lf,%lf,%lf,%lf,%lf", &y, &mo, &d, &h, &mi,
                         &s, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
        assert_int_equal(got, 12);
        r.ts[r.n++] = kr_unix_from_civil(y, mo, d, h, mi, s);
        assert_true((size_t)r.n < cap);
    }
    fclose(f);
    return r;
}

static kr_series view(const rows *r, int has_volume, int has_amount) {
    return (kr_series){ .n = r->n,
                        .timestamps = r->ts,
                        .values = r->v,
                        .has_volume = has_volume,
                        .has_amount = has_amount };
}

static kr_dataset *make(int lookback, int predict, double train, double val) {
    kr_dataset_params p = { .lookback = lookback,
                            .predict = predict,
                            .train_ratio = train,
                            .val_ratio = val,
                            .clip = 5.0f };
    kr_dataset *ds = NULL;
    kr_error err = { 0 };
    if (kr_dataset_create(&p, &ds, &err) != KR_OK) fail_msg("%s", err.message);
    return ds;
}

static void add(kr_dataset *ds, const char *name, const kr_series *s) {
    kr_error err = { 0 };
    if (kr_dataset_add(ds, name, s, &err) != KR_OK) fail_msg("%s", err.message);
}

/* A synthetic hourly series of n rows starting 2024-01-01. */
static rows synthetic(int64_t n) {
    rows r = { .n = n,
               .ts = malloc((size_t)n * sizeof(int64_t)),
               .v = malloc((size_t)n * 6 * sizeof(double)) };
    for (int64_t i = 0; i < n; i++) {
        r.ts[i] = kr_unix_from_civil(2024, 1, 1, 0, 0, 0) + i * 3600;
        double p = 100 + 10 * sin((double)i * 0.1) + (double)(i % 7);
        double *v = r.v + i * 6;
        v[0] = p;
        v[1] = p + 1;
        v[2] = p - 1;
        v[3] = p + 0.5;
        v[4] = 1000 + (double)(i % 13) * 10;
        v[5] = v[4] * p;
    }
    return r;
}

static void free_rows(rows *r) {
    free(r->ts);
    free(r->v);
}

/* Whether two orders name the same windows (field by field: the struct has padding). */
static int same_order(const kr_window_ref *a, const kr_window_ref *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i].series != b[i].series || a[i].start != b[i].start) return 0;
    return 1;
}

/* ------------------------------------------------------------------ the golden windows */

/* The normalised inputs and time features the official training code fed its first three
 * optimizer steps (windows of 40 rows, statistics of the first 30), bit for bit. */
static void test_golden_windows(void **state) {
    (void)state;
    rows r = read_regression_input();
    kr_series s = view(&r, 1, 1);
    kr_dataset *ds = make(30, 9, 1.0, 0.0);
    add(ds, "regression_input.csv", &s);
    assert_int_equal(kr_dataset_window_rows(ds), 40);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    if (kr_st_open(kr_test_fixture("finetune/golden_windows.safetensors"), &st, &err) != KR_OK)
        fail_msg("%s", err.message);
    int64_t starts[12];
    assert_int_equal(kr_st_to_i64(kr_st_find(st, "starts"), starts, &err), KR_OK);
    float want_x[4 * 40 * 6], want_stamp[4 * 40 * 5], x[40 * 6];
    int32_t stamp[40 * 5];
    for (int step = 0; step < 3; step++) {
        char name[32];
        snprintf(name, sizeof name, "x%d", step);
        assert_int_equal(kr_st_to_f32(kr_st_find(st, name), want_x, &err), KR_OK);
        snprintf(name, sizeof name, "stamp%d", step);
        assert_int_equal(kr_st_to_f32(kr_st_find(st, name), want_stamp, &err), KR_OK);
        for (int b = 0; b < 4; b++) {
            kr_window_ref w = { 0, starts[step * 4 + b] };
            assert_int_equal(kr_dataset_fill(ds, w, x, stamp, &err), KR_OK);
            assert_memory_equal(x, want_x + b * 40 * 6, sizeof x);
            for (int i = 0; i < 40 * 5; i++)
                assert_true((float)stamp[i] == want_stamp[b * 40 * 5 + i]);
        }
    }
    kr_st_close(st);
    kr_dataset_free(ds);
    free_rows(&r);
}

/* The ids of those windows through the inference tokenizer are the official
 * tokenizer.encode(x, half=True)'s. */
static void test_golden_window_tokens(void **state) {
    (void)state;
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    if (kr_st_open(kr_test_fixture("finetune/golden_windows.safetensors"), &st, &err) != KR_OK)
        fail_msg("%s", err.message);
    float x[4 * 40 * 6];
    int64_t want1[160], want2[160];
    assert_int_equal(kr_st_to_f32(kr_st_find(st, "x0"), x, &err), KR_OK);
    assert_int_equal(kr_st_to_i64(kr_st_find(st, "s1_ids0"), want1, &err), KR_OK);
    assert_int_equal(kr_st_to_i64(kr_st_find(st, "s2_ids0"), want2, &err), KR_OK);
    kr_window_encoder *enc = NULL;
    if (kr_window_encoder_create(kr_test_fixture("finetune/golden_tiny_tokenizer"), 2, &enc,
                                 &err) != KR_OK)
        fail_msg("%s", err.message);
    int32_t s1[160], s2[160];
    assert_int_equal(kr_window_encoder_run(enc, x, 4, 40, s1, s2, &err), KR_OK);
    for (int i = 0; i < 160; i++) {
        assert_int_equal(s1[i], want1[i]);
        assert_int_equal(s2[i], want2[i]);
    }
    kr_window_encoder_free(enc);
    kr_st_close(st);
}

/* ------------------------------------------------------------------ no future data */

/* Changing every row after a window's lookback part leaves its inputs (the normalised lookback
 * rows, their time features and their token ids) unchanged bit for bit, while the rows changed
 * do change: the statistics come from the lookback alone. finetune_csv's whole-window
 * statistics fail this (upstream #84, #227, #228, #263, #307). */
static void test_no_future_leak(void **state) {
    (void)state;
    rows r = read_regression_input();
    const int lookback = 64, predict = 15, W = lookback + predict + 1;
    kr_series s = view(&r, 1, 1);
    kr_dataset *a = make(lookback, predict, 1.0, 0.0);
    add(a, "a", &s);
    /* The same rows, then the predict part and everything after it changed. */
    const int64_t start = 500;
    rows m = { .n = r.n,
               .ts = malloc((size_t)r.n * sizeof(int64_t)),
               .v = malloc((size_t)r.n * 6 * sizeof(double)) };
    memcpy(m.ts, r.ts, (size_t)r.n * sizeof(int64_t));
    memcpy(m.v, r.v, (size_t)r.n * 6 * sizeof(double));
    for (int64_t i = start + lookback; i < m.n; i++)
        for (int c = 0; c < 6; c++) m.v[i * 6 + c] *= c < 4 ? 1.5 : 7.0;
    kr_series ms = view(&m, 1, 1);
    kr_dataset *b = make(lookback, predict, 1.0, 0.0);
    add(b, "b", &ms);

    float xa[W * 6], xb[W * 6];
    int32_t sa[W * 5], sb[W * 5];
    kr_error err = { 0 };
    kr_window_ref w = { 0, start };
    assert_int_equal(kr_dataset_fill(a, w, xa, sa, &err), KR_OK);
    assert_int_equal(kr_dataset_fill(b, w, xb, sb, &err), KR_OK);
    assert_memory_equal(xa, xb, (size_t)lookback * 6 * sizeof(float));
    assert_memory_equal(sa, sb, sizeof sa);
    /* The change reached the window: its predict rows differ. */
    assert_true(memcmp(xa + lookback * 6, xb + lookback * 6, (size_t)(W - lookback) * 6 * 4) != 0);
    /* A window ending before the change is the same whole. */
    kr_window_ref before = { 0, start + lookback - W };
    assert_int_equal(kr_dataset_fill(a, before, xa, NULL, &err), KR_OK);
    assert_int_equal(kr_dataset_fill(b, before, xb, NULL, &err), KR_OK);
    assert_memory_equal(xa, xb, sizeof xa);

    /* The token ids of the lookback rows too: the tokenizer's encoder is causal. */
    kr_window_encoder *enc = NULL;
    if (kr_window_encoder_create(kr_test_fixture("tiny/tokenizer"), 1, &enc, &err) != KR_OK)
        fail_msg("%s", err.message);
    int32_t a1[W], a2[W], b1[W], b2[W];
    assert_int_equal(kr_dataset_fill(a, w, xa, NULL, &err), KR_OK);
    assert_int_equal(kr_dataset_fill(b, w, xb, NULL, &err), KR_OK);
    assert_int_equal(kr_window_encoder_run(enc, xa, 1, W, a1, a2, &err), KR_OK);
    assert_int_equal(kr_window_encoder_run(enc, xb, 1, W, b1, b2, &err), KR_OK);
    assert_memory_equal(a1, b1, lookback * sizeof(int32_t));
    assert_memory_equal(a2, b2, lookback * sizeof(int32_t));
    kr_window_encoder_free(enc);

    kr_dataset_free(a);
    kr_dataset_free(b);
    free_rows(&m);
    free_rows(&r);
}

/* ------------------------------------------------------------------ the split */

/* Split points as Python's int(n * ratio); windows per split; and no validation or test window
 * shares a row with a training window (or with each other). */
static void test_split_by_time(void **state) {
    (void)state;
    rows r1 = synthetic(1000), r2 = synthetic(100), r3 = synthetic(10);
    kr_series s1 = view(&r1, 1, 1), s2 = view(&r2, 1, 1), s3 = view(&r3, 1, 1);
    kr_dataset *ds = make(8, 3, 0.29, 0.41); /* window 12 */
    add(ds, "long", &s1);
    add(ds, "short", &s2);
    add(ds, "tiny", &s3); /* shorter than one window: none from it */
    /* int(1000 * 0.29) = 290, int(1000 * 0.7) = 700; int(100 * 0.29) = 28 (0.29 * 100 is
     * 28.999999999999996), int(100 * 0.7) = 70. */
    kr_split_range t = kr_dataset_split_range(ds, 0, KR_SPLIT_TRAIN);
    kr_split_range v = kr_dataset_split_range(ds, 0, KR_SPLIT_VAL);
    assert_int_equal(t.end, 290);
    assert_int_equal(v.begin, 290);
    assert_int_equal(v.end, 700);
    assert_int_equal(kr_dataset_split_range(ds, 1, KR_SPLIT_TRAIN).end, 28);
    assert_int_equal(kr_dataset_split_range(ds, 1, KR_SPLIT_VAL).end, 70);
    assert_int_equal(kr_dataset_n_windows(ds, KR_SPLIT_TRAIN), (290 - 11) + (28 - 11));
    assert_int_equal(kr_dataset_n_windows(ds, KR_SPLIT_VAL), (410 - 11) + (42 - 11));
    assert_int_equal(kr_dataset_n_windows(ds, KR_SPLIT_TEST), (300 - 11) + (30 - 11));
    for (int split = 0; split < KR_N_SPLITS; split++) {
        int64_t n = kr_dataset_n_windows(ds, (kr_split)split);
        for (int64_t i = 0; i < n; i++) {
            kr_window_ref w = kr_dataset_window(ds, (kr_split)split, i);
            assert_true(w.series == 0 || w.series == 1);
            kr_split_range own = kr_dataset_split_range(ds, w.series, (kr_split)split);
            /* Every row of the window inside its own split: none in another. */
            assert_true(w.start >= own.begin);
            assert_true(w.start + 12 <= own.end);
        }
    }
    kr_dataset_free(ds);
    free_rows(&r1);
    free_rows(&r2);
    free_rows(&r3);
}

/* The training order of an epoch: only training windows, each once when the scramble is a
 * bijection; the same for the same (seed, epoch); another for another epoch or seed. */
static void test_epoch_order(void **state) {
    (void)state;
    rows r1 = synthetic(500), r2 = synthetic(300);
    kr_series s1 = view(&r1, 1, 1), s2 = view(&r2, 1, 1);
    kr_dataset *ds = make(16, 4, 0.8, 0.2); /* window 21 */
    add(ds, "a", &s1);
    add(ds, "b", &s2);
    int64_t n = kr_dataset_n_windows(ds, KR_SPLIT_TRAIN);
    assert_int_equal(n, (400 - 20) + (240 - 20));
    kr_window_ref *o1 = malloc((size_t)n * sizeof *o1), *o2 = malloc((size_t)n * sizeof *o2);
    kr_error err = { 0 };
    assert_int_equal(kr_order_train(ds, 42, 0, o1, &err), KR_OK);
    assert_int_equal(kr_order_train(ds, 42, 0, o2, &err), KR_OK);
    assert_true(same_order(o1, o2, n));
    char *seen = calloc(1000, 1);
    for (int64_t i = 0; i < n; i++) {
        kr_split_range t = kr_dataset_split_range(ds, o1[i].series, KR_SPLIT_TRAIN);
        assert_true(o1[i].start >= 0 && o1[i].start + 21 <= t.end);
        int64_t key = o1[i].series * 500 + o1[i].start;
        assert_int_equal(seen[key], 0); /* 380 and 220 are prime to 9973: a permutation */
        seen[key] = 1;
    }
    assert_int_equal(kr_order_train(ds, 42, 1, o2, &err), KR_OK);
    assert_false(same_order(o1, o2, n));
    assert_int_equal(kr_order_train(ds, 43, 0, o2, &err), KR_OK);
    assert_false(same_order(o1, o2, n));

    /* Validation: every window in natural order, or an even subset. */
    kr_window_ref v[400];
    int64_t count = 0;
    kr_order_eval(ds, KR_SPLIT_VAL, 0, v, &count);
    assert_int_equal(count, (100 - 20) + (60 - 20));
    assert_int_equal(v[0].series, 0);
    assert_int_equal(v[0].start, 400);
    assert_int_equal(v[80].series, 1);
    assert_int_equal(v[80].start, 240);
    kr_order_eval(ds, KR_SPLIT_VAL, 12, v, &count);
    assert_int_equal(count, 12);
    assert_int_equal(v[0].start, 400);
    assert_int_equal(v[11].series, 1); /* floor(11 * 120 / 12) = 110: series b, window 30 */
    assert_int_equal(v[11].start, 240 + 30);
    free(seen);
    free(o1);
    free(o2);
    kr_dataset_free(ds);
    free_rows(&r1);
    free_rows(&r2);
}

/* The scramble against Python's exact integers (values printed by python3). */
static void test_scramble(void **state) {
    (void)state;
    assert_int_equal(kr_dataset_scramble(5, 20000, 1234), 1084);
    assert_int_equal(kr_dataset_scramble(0, 0, 1), 0);
    assert_int_equal(kr_dataset_scramble(0, 0, 2), 1);
    assert_int_equal(kr_dataset_scramble(999, 30000, 1000), 756);
    assert_int_equal(kr_dataset_scramble(123456789, 770000, 3000000001LL), 875990989);
    assert_int_equal(kr_dataset_scramble((int64_t)1 << 40, 10, ((int64_t)1 << 62) + 7),
                     10965429464962067LL);
}

/* ------------------------------------------------------------------ inputs */

/* Features as inference prepares them: amount = volume x mean price when absent; volume and
 * amount 0 without volume. Bad rows are refused by name. */
static void test_features_and_refusals(void **state) {
    (void)state;
    int64_t ts[3] = { 0, 60, 120 };
    double v[18] = { 10, 12, 8, 11, 100, 999, 11, 13, 9, 12, 50, 999, 12, 12, 12, 12, 0, 999 };
    kr_series s = { .n = 3, .timestamps = ts, .values = v, .has_volume = 1, .has_amount = 0 };
    float out[18];
    kr_error err = { 0 };
    assert_int_equal(kr_series_features_f32(&s, "x", out, &err), KR_OK);
    assert_true(out[5] == (float)(100 * (10.0 + 12 + 8 + 11) / 4));
    s.has_volume = 0;
    assert_int_equal(kr_series_features_f32(&s, "x", out, &err), KR_OK);
    assert_true(out[4] == 0 && out[5] == 0);

    kr_dataset *ds = make(2, 0, 1.0, 0.0);
    ts[2] = 60;
    assert_int_equal(kr_dataset_add(ds, "bad.csv", &s, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "bad.csv: row 2: timestamps not strictly increasing"));
    ts[2] = 120;
    v[7] = NAN;
    assert_int_equal(kr_dataset_add(ds, "bad.csv", &s, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "row 1, field 'high'"));
    kr_dataset_free(ds);

    kr_dataset_params p = {
        .lookback = 1, .predict = 1, .train_ratio = 0.9, .val_ratio = 0.1, .clip = 5
    };
    assert_int_equal(kr_dataset_create(&p, &ds, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "lookback_window"));
    p.lookback = 4;
    p.val_ratio = 0.2;
    assert_int_equal(kr_dataset_create(&p, &ds, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "exceeds 1"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_windows),        cmocka_unit_test(test_golden_window_tokens),
        cmocka_unit_test(test_no_future_leak),        cmocka_unit_test(test_split_by_time),
        cmocka_unit_test(test_epoch_order),           cmocka_unit_test(test_scramble),
        cmocka_unit_test(test_features_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
