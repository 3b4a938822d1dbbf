/*
 * GPTQ (model/gptq.h) on random layers: with correlated calibration inputs its output error
 * ‖X·Wᵀ − X·Ŵᵀ‖ is lower than round-to-nearest's, for q4 and int8, on the calibration rows
 * and on held-out rows of the same distribution; with uncorrelated inputs (diagonal H) it is
 * round-to-nearest bit for bit (same format, same arrays); a singular H (fewer rows than
 * inputs, a dead input, a duplicated input) is damped into a factorisable one; bad
 * calibration input is refused with a message naming it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "model/gptq.h"
#include "test_support.h"

static uint64_t g_rng;

static double uniform(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void) {
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

/* m rows of k inputs driven by `latent` shared factors (correlated columns), channel scales
 * spread over 0.2..5, and a little independent noise. */
static float *correlated_inputs(int m, int k, int latent, const float *mix) {
    float *x = malloc((size_t)m * (size_t)k * sizeof *x);
    double *z = malloc((size_t)latent * sizeof *z);
    for (int r = 0; r < m; r++) {
        for (int l = 0; l < latent; l++) z[l] = gauss();
        for (int j = 0; j < k; j++) {
            double v = 0.05 * gauss();
            for (int l = 0; l < latent; l++) v += z[l] * mix[(size_t)l * (size_t)k + (size_t)j];
            x[(size_t)r * (size_t)k + (size_t)j] = (float)v;
        }
    }
    free(z);
    return x;
}

static float *mixing(int latent, int k) {
    float *mix = malloc((size_t)latent * (size_t)k * sizeof *mix);
    for (int j = 0; j < k; j++) {
        double scale = 0.2 * pow(25.0, uniform());
        for (int l = 0; l < latent; l++)
            mix[(size_t)l * (size_t)k + (size_t)j] = (float)(scale * gauss() / sqrt(latent));
    }
    return mix;
}

static float *random_weight(int n, int k) {
    float *w = malloc((size_t)n * (size_t)k * sizeof *w);
    for (size_t i = 0; i < (size_t)n * (size_t)k; i++) w[i] = (float)(0.05 * gauss());
    return w;
}

/* ‖X·Wᵀ − X·Ŵᵀ‖_F with Ŵ the dequantised q. */
static double output_error(const float *x, int m, int k, const float *w, const kr_qmat *q) {
    int n = q->n;
    float *wq = malloc((size_t)n * (size_t)k * sizeof *wq);
    kr_dequant_rows_scalar(q, 0, n, wq, k);
    double e = 0.0;
    for (int r = 0; r < m; r++)
        for (int o = 0; o < n; o++) {
            double d = 0.0;
            for (int j = 0; j < k; j++)
                d += (double)x[(size_t)r * (size_t)k + (size_t)j] *
                     ((double)w[(size_t)o * (size_t)k + (size_t)j] -
                      (double)wq[(size_t)o * (size_t)k + (size_t)j]);
            e += d * d;
        }
    free(wq);
    return sqrt(e);
}

static kr_gptq_hessian hessian_of(const float *x, int m, int k, int chunk) {
    kr_gptq_hessian h;
    kr_error err = { 0 };
    if (kr_gptq_hessian_init(&h, k, &err) != KR_OK) fail_msg("%s", err.message);
    for (int r = 0; r < m; r += chunk)
        kr_gptq_hessian_add(&h, x + (size_t)r * (size_t)k, m - r < chunk ? m - r : chunk, k);
    return h;
}

static void quantize_both(kr_wfmt fmt, int group, int n, int k, const float *w,
                          const kr_gptq_hessian *h, const kr_gptq_params *p, kr_qmat_owned *rtn,
                          kr_qmat_owned *gq, kr_gptq_stats *gs) {
    kr_error err = { 0 };
    if (kr_qmat_quantize(fmt, n, k, w, NULL, group, rtn, &err) != KR_OK)
        fail_msg("rtn: %s", err.message);
    if (kr_gptq_quantize(fmt, n, k, w, h, group, p, NULL, gq, gs, &err) != KR_OK)
        fail_msg("gptq: %s", err.message);
}

/* GPTQ beats round-to-nearest on correlated inputs. The ratios printed are what the bounds
 * were set from (q4 0.22-0.24, int8 0.31 on this seed); the bound asks for a clear win with
 * margin, held out as well as on the calibration rows. */
static void test_lower_output_error_than_rtn(void **state) {
    (void)state;
    const int n = 48, k = 200, latent = 24, m = 600;
    static const struct {
        kr_wfmt fmt;
        int group;
        double max_ratio;
    } cases[] = { { KR_WFMT_Q4, 32, 0.5 }, { KR_WFMT_Q4, 64, 0.5 }, { KR_WFMT_INT8, 0, 0.6 } };
    g_rng = 12345;
    float *mix = mixing(latent, k), *w = random_weight(n, k);
    float *x = correlated_inputs(m, k, latent, mix), *xt = correlated_inputs(m, k, latent, mix);
    /* Chunks of 5 and 100 rows: both accumulation paths (rank-1 and GEMM). */
    kr_gptq_hessian h = hessian_of(x, m, k, 100), h5 = hessian_of(x, m, k, 5);
    for (size_t i = 0; i < (size_t)k * (size_t)k; i++)
        if (fabs(h.xtx[i] - h5.xtx[i]) > 1e-4 * (1.0 + fabs(h.xtx[i])))
            fail_msg("Hessian paths differ at %zu: %g vs %g", i, h.xtx[i], h5.xtx[i]);
    kr_gptq_params p = kr_gptq_default_params();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kr_qmat_owned rtn, gq;
        kr_gptq_stats gs;
        quantize_both(cases[c].fmt, cases[c].group, n, k, w, &h, &p, &rtn, &gq, &gs);
        assert_int_equal(gq.m.fmt, rtn.m.fmt);
        assert_int_equal(gq.m.kp, rtn.m.kp);
        assert_int_equal((long)gq.bytes, (long)rtn.bytes);
        double er = output_error(x, m, k, w, &rtn.m), eg = output_error(x, m, k, w, &gq.m);
        double hr = output_error(xt, m, k, w, &rtn.m), hg = output_error(xt, m, k, w, &gq.m);
        printf("  %s group %d: calibration %.4f / %.4f = %.3f, held out %.4f / %.4f = %.3f\n",
               kr_wfmt_name(cases[c].fmt), cases[c].group, eg, er, eg / er, hg, hr, hg / hr);
        assert_true(eg / er < cases[c].max_ratio);
        assert_true(hg / hr < cases[c].max_ratio);
        kr_qmat_owned_free(&rtn);
        kr_qmat_owned_free(&gq);
    }
    kr_gptq_hessian_release(&h);
    kr_gptq_hessian_release(&h5);
    free(mix);
    free(w);
    free(x);
    free(xt);
}

/* Uncorrelated inputs give a diagonal H: no error is passed on, so GPTQ must produce exactly
 * round-to-nearest's arrays — which shows it uses the format's own scales, zero points and
 * nibble layout. */
static void test_diagonal_hessian_is_rtn(void **state) {
    (void)state;
    const int n = 10, k = 96;
    g_rng = 7;
    float *w = random_weight(n, k);
    kr_gptq_hessian h;
    kr_error err = { 0 };
    assert_int_equal(kr_gptq_hessian_init(&h, k, &err), KR_OK);
    float *row = calloc((size_t)k, sizeof *row);
    for (int j = 0; j < k; j++) { /* one row per input: e_j · (j + 1) */
        memset(row, 0, (size_t)k * sizeof *row);
        row[j] = (float)(j + 1);
        kr_gptq_hessian_add(&h, row, 1, k);
    }
    kr_gptq_params p = kr_gptq_default_params();
    for (int f = 0; f < 2; f++) {
        kr_wfmt fmt = f ? KR_WFMT_INT8 : KR_WFMT_Q4;
        kr_qmat_owned rtn, gq;
        kr_gptq_stats gs;
        quantize_both(fmt, 32, n, k, w, &h, &p, &rtn, &gq, &gs);
        assert_int_equal((long)gq.bytes, (long)rtn.bytes);
        assert_memory_equal(gq.mem, rtn.mem, rtn.bytes);
        kr_qmat_owned_free(&rtn);
        kr_qmat_owned_free(&gq);
    }
    kr_gptq_hessian_release(&h);
    free(row);
    free(w);
}

/* Fewer rows than inputs, an input that is always 0 and an input that copies another make H
 * singular. Undamped, the factorisation fails and is retried with more damping; the result
 * still beats round-to-nearest on those rows. */
static void test_singular_hessian(void **state) {
    (void)state;
    const int n = 16, k = 128, m = 40;
    g_rng = 99;
    float *mix = mixing(8, k), *w = random_weight(n, k);
    float *x = correlated_inputs(m, k, 8, mix);
    for (int r = 0; r < m; r++) {
        x[(size_t)r * (size_t)k + 5] = 0.0f;
        x[(size_t)r * (size_t)k + 9] = x[(size_t)r * (size_t)k + 8];
    }
    kr_gptq_hessian h = hessian_of(x, m, k, 40);
    for (int undamped = 0; undamped < 2; undamped++) {
        kr_gptq_params p = kr_gptq_default_params();
        if (undamped) p.damp = 0.0;
        kr_qmat_owned rtn, gq;
        kr_gptq_stats gs;
        quantize_both(KR_WFMT_Q4, 32, n, k, w, &h, &p, &rtn, &gq, &gs);
        assert_int_equal(gs.dead_inputs, 1);
        assert_true(gs.damp_used > 0.0);
        if (!undamped) assert_true(gs.damp_used == 0.01);
        double er = output_error(x, m, k, w, &rtn.m), eg = output_error(x, m, k, w, &gq.m);
        printf("  singular H, damp %g used %g: %.4f / %.4f = %.3f\n", p.damp, gs.damp_used, eg, er,
               eg / er);
        assert_true(eg < er);
        kr_qmat_owned_free(&rtn);
        kr_qmat_owned_free(&gq);
    }
    /* No rows at all: every input is dead; still factorisable (the identity), and RTN. */
    kr_gptq_hessian z;
    kr_error err = { 0 };
    assert_int_equal(kr_gptq_hessian_init(&z, k, &err), KR_OK);
    float *zero = calloc((size_t)k, sizeof *zero);
    kr_gptq_hessian_add(&z, zero, 1, k);
    kr_qmat_owned rtn, gq;
    kr_gptq_stats gs;
    kr_gptq_params p = kr_gptq_default_params();
    quantize_both(KR_WFMT_Q4, 64, n, k, w, &z, &p, &rtn, &gq, &gs);
    assert_int_equal(gs.dead_inputs, k);
    assert_memory_equal(gq.mem, rtn.mem, rtn.bytes);
    kr_qmat_owned_free(&rtn);
    kr_qmat_owned_free(&gq);
    kr_gptq_hessian_release(&z);
    kr_gptq_hessian_release(&h);
    free(zero);
    free(mix);
    free(w);
    free(x);
}

static void expect_error(kr_wfmt fmt, int k_w, const kr_gptq_hessian *h, const float *w,
                         const kr_gptq_params *p, int group, const char *needle) {
    kr_error err = { 0 };
    kr_qmat_owned out;
    assert_int_not_equal(kr_gptq_quantize(fmt, 4, k_w, w, h, group, p, NULL, &out, NULL, &err),
                         KR_OK);
    if (!strstr(err.message, needle)) fail_msg("'%s' does not say '%s'", err.message, needle);
    assert_null(out.mem);
}

static void test_bad_calibration_input(void **state) {
    (void)state;
    const int k = 64;
    g_rng = 3;
    float *w = random_weight(4, k), *x = random_weight(8, k);
    kr_gptq_params p = kr_gptq_default_params();
    kr_gptq_hessian empty;
    kr_error err = { 0 };
    assert_int_equal(kr_gptq_hessian_init(&empty, k, &err), KR_OK);
    expect_error(KR_WFMT_Q4, k, &empty, w, &p, 32, "no calibration rows");

    kr_gptq_hessian bad;
    x[3 * k + 5] = NAN; /* row 3 column 5, in a GEMM-sized and a rank-1-sized add */
    for (int chunk = 8; chunk >= 4; chunk -= 4) {
        bad = hessian_of(x, 8, k, chunk);
        expect_error(KR_WFMT_Q4, k, &bad, w, &p, 32,
                     "calibration input row 3 column 5 is not finite");
        kr_gptq_hessian_release(&bad);
    }
    x[3 * k + 5] = 1.0f;
    kr_gptq_hessian good = hessian_of(x, 8, k, 8);
    expect_error(KR_WFMT_Q4, 32, &good, w, &p, 32, "Hessian is for 64 inputs, the weight has 32");
    expect_error(KR_WFMT_FP8, k, &good, w, &p, 32, "int8 or q4, not fp8");
    expect_error(KR_WFMT_Q4, k, &good, w, &p, 48, "q4 group 48");
    kr_gptq_params neg = p;
    neg.damp = -0.5;
    expect_error(KR_WFMT_Q4, k, &good, w, &neg, 32, "damp -0.5");
    neg.damp = NAN;
    expect_error(KR_WFMT_Q4, k, &good, w, &neg, 32, "damp nan");
    w[2 * k + 7] = INFINITY;
    expect_error(KR_WFMT_INT8, k, &good, w, &p, 0, "weight row 2 column 7 is not finite");
    kr_gptq_hessian_release(&good);
    kr_gptq_hessian_release(&empty);
    free(w);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lower_output_error_than_rtn),
        cmocka_unit_test(test_diagonal_hessian_is_rtn),
        cmocka_unit_test(test_singular_hessian),
        cmocka_unit_test(test_bad_calibration_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
