/*
 * The upstream Kronos regression tests (tests/fixtures/KRONOS_REGRESSION_README.md) against
 * the real checkpoints: KRONOS_TOKENIZER_DIR = NeoQuasar/Kronos-Tokenizer-base and
 * KRONOS_MODEL_DIR = NeoQuasar/Kronos-small (the revisions the README pins). Skipped, with a
 * message, when they are not set: the weights cannot be downloaded here.
 *
 * 1. Exact output: greedy, context 512 and 256, pred_len 8, rtol 1e-5 on all six columns.
 * 2. Sampled-window MSE: 4 windows drawn like pandas' DataFrame.sample(n=4, random_state=123)
 *    (numpy RandomState: MT19937 + the legacy Fisher-Yates shuffle), pred_len 30, mean MSE of
 *    OHLC within 1e-6 of 0.008979 (ctx 512) / 0.003741 (ctx 256).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kronos.h"
#include "series/candles.h"
#include "engine_helpers.h"
#include "test_support.h"

static kr_model *g_model;
static kr_context *g_ctx; /* forecasts and analyses in the test itself */
static kr_candles *g_input;

static int setup(void **state) {
    (void)state;
    const char *tok = getenv("KRONOS_TOKENIZER_DIR"), *mod = getenv("KRONOS_MODEL_DIR");
    if (!tok || !*tok || !mod || !*mod) return 0;
    kr_error err = { 0 };
    if (kr_model_load(mod, tok, NULL, &g_model, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    if (kr_context_create(g_model, &cp, &g_ctx, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    if (kr_candles_read_csv(kr_test_fixture("regression_input.csv"), &g_input, &err) != KR_OK)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_context_free(g_ctx);
    g_ctx = NULL;
    kr_model_free(g_model);
    kr_candles_free(g_input);
    return 0;
}

static void skip_without_weights(void) {
    if (g_model) return;
    print_message(
        "[  SKIPPED ] real-weight regression: set KRONOS_TOKENIZER_DIR (Kronos-Tokenizer-base) "
        "and KRONOS_MODEL_DIR (Kronos-small) to run it\n");
    skip();
}

static kr_forecast *greedy(int64_t start, int ctx, int pred_len) {
    kr_series s = kr_candles_slice(g_input, start, ctx);
    s.future_timestamps = g_input->timestamps + start + ctx;
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = pred_len;
    p.lookback = ctx;
    p.max_context = 512;
    p.top_k = 1;
    p.top_p = 1.0f;
    p.temperature = 1.0f;
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    if (kr_forecast_run(g_ctx, &s, &p, &f, &err) != KR_OK) fail_msg("%s", err.message);
    return f;
}

static void exact_output(int ctx) {
    skip_without_weights();
    char name[64];
    snprintf(name, sizeof name, "regression_output_%d.csv", ctx);
    kr_candles *want = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_read_csv(kr_test_fixture(name), &want, &err), KR_OK);
    kr_forecast *f = greedy(0, ctx, 8);
    assert_int_equal(want->n, 8);
    const double *got = kr_forecast_mean(f);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(kr_forecast_timestamps(f)[i], want->timestamps[i]);
        for (int c = 0; c < 6; c++) {
            double w = (float)want->values[i * 6 + c], g = (float)got[i * 6 + c];
            if (fabs(g - w) > 1e-5 * fabs(w))
                fail_msg("ctx %d row %d col %d: %.9g, want %.9g", ctx, i, c, g, w);
        }
    }
    kr_forecast_free(f);
    kr_candles_free(want);
}

static void test_exact_512(void **s) {
    (void)s;
    exact_output(512);
}
static void test_exact_256(void **s) {
    (void)s;
    exact_output(256);
}

/* numpy.random.RandomState(seed): MT19937 seeded with init_genrand. */
typedef struct mt19937 {
    uint32_t s[624];
    int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
    m->s[0] = seed;
    for (int i = 1; i < 624; i++)
        m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}

static uint32_t mt_next(mt19937 *m) {
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* RandomState.choice(n, size=k, replace=False) = permutation(n)[:k]; the legacy shuffle draws
 * j in [0, i] by masked rejection for i = n-1 down to 1. */
static void sample_positions(int n, int k, int *out) {
    mt19937 m;
    mt_seed(&m, 123);
    int *perm = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i >= 1; i--) {
        uint32_t mask = (uint32_t)i;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        uint32_t j;
        while ((j = mt_next(&m) & mask) > (uint32_t)i) {
        }
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < k; i++) out[i] = perm[i];
    free(perm);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void sampled_mse(int ctx, double expected) {
    skip_without_weights();
    int n_valid = (int)g_input->n - 30 - ctx, pos[4];
    sample_positions(n_valid, 4, pos);
    qsort(pos, 4, sizeof(int), cmp_int);
    double mse_sum = 0;
    for (int w = 0; w < 4; w++) {
        int i = ctx + pos[w];
        kr_forecast *f = greedy(i - ctx, ctx, 30);
        const double *got = kr_forecast_mean(f);
        double se = 0;
        for (int t = 0; t < 30; t++)
            for (int c = 0; c < 4; c++) {
                double d = (float)got[t * 6 + c] - (float)g_input->values[(size_t)(i + t) * 6 + c];
                se += d * d;
            }
        mse_sum += se / 120.0;
        kr_forecast_free(f);
    }
    double mse = mse_sum / 4;
    if (fabs(mse - expected) > 1e-6)
        fail_msg("ctx %d: mean MSE %.6f, want %.6f", ctx, mse, expected);
}

/* Known value: numpy.random.RandomState(123).random_sample() == 0.6964691855978616. */
static void test_mt19937_matches_numpy(void **state) {
    (void)state;
    mt19937 m;
    mt_seed(&m, 123);
    uint32_t a = mt_next(&m) >> 5, b = mt_next(&m) >> 6;
    double u = (a * 67108864.0 + b) / 9007199254740992.0;
    assert_true(fabs(u - 0.6964691855978616) < 1e-16);
}

static void test_mse_512(void **s) {
    (void)s;
    sampled_mse(512, 0.008979);
}
static void test_mse_256(void **s) {
    (void)s;
    sampled_mse(256, 0.003741);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mt19937_matches_numpy),
        cmocka_unit_test(test_exact_512),
        cmocka_unit_test(test_exact_256),
        cmocka_unit_test(test_mse_512),
        cmocka_unit_test(test_mse_256),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
