/* Tests for the quantised weight formats (quant.h): the scalar conversions exhaustively and
 * against a nearest-value reference, quantisation error bounds and argument checks, every
 * dequantiser variant bit for bit against the scalar one, the weight-only GEMM bit for bit
 * against the f32 GEMM on the dequantised weight, and the AVX512_BF16 path against its scalar
 * reference and double precision. */
#include "test_support.h"

#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static kr_isa g_variants[KR_ISA_COUNT];
static int g_n_variants;
static const kr_dequant_rows_fn k_dequant[KR_ISA_COUNT] = { kr_dequant_rows_scalar,
                                                            kr_dequant_rows_avx2,
                                                            kr_dequant_rows_avx512 };

static uint64_t g_rng = 0x853C49E6748FEA9Bull;
static uint32_t urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { /* uniform in [-1, 1) */
    return (float)((double)(urand() >> 8) / (double)(1u << 23) - 1.0);
}
static float *rand_buf(size_t n, float scale) {
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}
static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const int k_Ks[] = { 6, 20, 52, 100, 520, 1000, 1024 };
static const kr_wfmt k_fmts[] = { KR_WFMT_BF16, KR_WFMT_INT8, KR_WFMT_FP8, KR_WFMT_Q4 };

/* ---- names */

static void test_format_names(void **state) {
    (void)state;
    static const char *names[] = { "f32", "bf16", "int8", "fp8", "q4" };
    for (int f = 0; f < KR_WFMT_COUNT; f++) {
        assert_string_equal(kr_wfmt_name((kr_wfmt)f), names[f]);
        kr_wfmt got = KR_WFMT_COUNT;
        assert_int_equal(kr_wfmt_parse(names[f], &got), 0);
        assert_int_equal(got, f);
    }
    kr_wfmt got = KR_WFMT_F32;
    assert_int_equal(kr_wfmt_parse("Q4", &got), 0);
    assert_int_equal(got, KR_WFMT_Q4);
    assert_int_equal(kr_wfmt_parse("BF16", &got), 0);
    assert_int_equal(got, KR_WFMT_BF16);
    assert_int_equal(kr_wfmt_parse("q8", &got), -1);
    assert_int_equal(kr_wfmt_parse("", &got), -1);
    assert_int_equal(kr_wfmt_parse("int", &got), -1);
    assert_int_equal(kr_wfmt_parse("int88", &got), -1);
    assert_int_equal(kr_wfmt_parse(NULL, &got), -1);
    assert_string_equal(kr_wfmt_name(KR_WFMT_COUNT), "unknown");
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_F32, 0), 1);
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_BF16, 0), 32);
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_INT8, 0), 64);
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_FP8, 0), 64);
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_Q4, 0), 32);
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_Q4, 32), 32);
    assert_int_equal(kr_wfmt_row_align(KR_WFMT_Q4, 64), 64);
}

/* ---- conversions */

/* Value of a small-float pattern with `mbits` mantissa bits and exponent bias `bias`
 * (sign-magnitude, IEEE-style subnormals), in double. */
static double small_value(uint32_t mag, int mbits, int bias) {
    uint32_t e = mag >> mbits, m = mag & ((1u << mbits) - 1u);
    if (e == 0) return ldexp((double)m, 1 - bias - mbits);
    return ldexp(1.0 + ldexp((double)m, -mbits), (int)e - bias);
}

/* The nearest of the magnitudes 0 .. top (values increasing with the pattern), ties to the
 * even pattern; |x| beyond top → top. Reference for the f32 → small-float conversions. */
static uint32_t nearest(double ax, uint32_t top, int mbits, int bias, double top_value) {
    uint32_t lo = 0, hi = top;
    while (lo < hi) { /* largest pattern with value <= ax */
        uint32_t mid = (lo + hi + 1) / 2;
        double v = mid == top ? top_value : small_value(mid, mbits, bias);
        if (v <= ax)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == top) return top;
    double a = small_value(lo, mbits, bias);
    double b = lo + 1 == top ? top_value : small_value(lo + 1, mbits, bias);
    if (ax - a < b - ax) return lo;
    if (ax - a > b - ax) return lo + 1;
    return (lo & 1) ? lo + 1 : lo;
}

/* Random f32 with exponent in [emin, emax] (unbiased; below -126 gives f32 subnormals),
 * random sign and mantissa; every 4th has its mantissa within one unit of a tie for a format
 * that keeps the mantissa bits above tie_bit. */
static float rand_f32(int emin, int emax, int tie_bit) {
    int e = emin + (int)(urand() % (uint32_t)(emax - emin + 1)) + 127;
    if (e < 0) e = 0;
    if (e > 254) e = 254;
    uint32_t m = urand() & 0x7FFFFFu;
    if (urand() % 4 == 0) {
        uint32_t low = (2u << tie_bit) - 1u;
        m = (m & ~low) | (1u << tie_bit);
        uint32_t d = urand() % 3;
        if (d == 0) m -= 1;
        if (d == 2) m += 1;
        m &= 0x7FFFFFu;
    }
    return bits_f32((urand() & 0x80000000u) | ((uint32_t)e << 23) | m);
}

static void test_f16_exhaustive(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kr_f16_to_f32((uint16_t)h);
        uint32_t mag = h & 0x7FFFu;
        if (mag > 0x7C00u) { /* NaN: stays NaN, quietened, payload kept */
            assert_true(isnan(f));
            assert_int_equal(kr_f32_to_f16(f), h | 0x200u);
            continue;
        }
        double want = mag == 0x7C00u ? INFINITY : small_value(mag, 10, 15);
        if (h & 0x8000u) want = -want;
        if ((double)f != want) fail_msg("f16 %04x -> %.9g, want %.9g", h, (double)f, want);
        if ((h & 0x8000u) && !signbit(f)) fail_msg("f16 %04x lost its sign", h);
        assert_int_equal(kr_f32_to_f16(f), h);
        if (mag < 0x7BFFu) { /* the midpoint to the next magnitude and its neighbours */
            float a = kr_f16_to_f32((uint16_t)mag), b = kr_f16_to_f32((uint16_t)(mag + 1));
            float mid = (float)(((double)a + (double)b) / 2); /* exact: 12 significant bits */
            uint16_t s = (uint16_t)(h & 0x8000u);
            float sg = s ? -1.0f : 1.0f;
            assert_int_equal(kr_f32_to_f16(sg * mid), s | ((mag & 1u) ? mag + 1 : mag));
            assert_int_equal(kr_f32_to_f16(sg * nextafterf(mid, 0)), s | mag);
            assert_int_equal(kr_f32_to_f16(sg * nextafterf(mid, INFINITY)), s | (mag + 1));
        }
    }
    /* overflow boundary: 65504 + 16 is the tie between 65504 and 65536 */
    assert_int_equal(kr_f32_to_f16(65519.996f), 0x7BFF);
    assert_int_equal(kr_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(kr_f32_to_f16(-1e30f), 0xFC00);
    assert_int_equal(kr_f32_to_f16(INFINITY), 0x7C00);
    assert_int_equal(kr_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(kr_f32_to_f16(ldexpf(1.0f, -25)), 0x0000); /* tie → 0 */
    assert_int_equal(kr_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1)), 0x0001); /* above */
    assert_int_equal(kr_f32_to_f16(ldexpf(3.0f, -25)), 0x0002); /* tie → 2 */
    assert_int_equal(kr_f32_to_f16(bits_f32(1)), 0x0000);
    /* random values over the whole f16 range and beyond, against the nearest-value search */
    for (int i = 0; i < 200000; i++) {
        float x = rand_f32(-30, 17, 12);
        uint32_t want = nearest(fabs((double)x), 0x7C00u, 10, 15, 65536.0);
        uint16_t got = kr_f32_to_f16(x);
        if (got != (want | (signbit(x) ? 0x8000u : 0)))
            fail_msg("f32 %08x -> f16 %04x, want %04x", f32_bits(x), got, want);
    }
}

static void test_bf16_exhaustive(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kr_bf16_to_f32((uint16_t)h);
        assert_int_equal(f32_bits(f), h << 16);
        uint32_t mag = h & 0x7FFFu;
        if (mag > 0x7F80u) {
            assert_int_equal(kr_f32_to_bf16(f), h | 0x40u);
            continue;
        }
        assert_int_equal(kr_f32_to_bf16(f), h);
        if (mag < 0x7F7Fu) {
            uint32_t s = (h & 0x8000u) << 16, base = mag << 16;
            uint16_t even = (uint16_t)((h & 0x8000u) | ((mag & 1u) ? mag + 1 : mag));
            assert_int_equal(kr_f32_to_bf16(bits_f32(s | (base + 0x8000u))), even);
            assert_int_equal(kr_f32_to_bf16(bits_f32(s | (base + 0x7FFFu))), h);
            assert_int_equal(kr_f32_to_bf16(bits_f32(s | (base + 0x8001u))), h + 1);
        }
    }
    assert_int_equal(kr_f32_to_bf16(bits_f32(0x7F7FFFFFu)), 0x7F80); /* FLT_MAX rounds to inf */
    assert_int_equal(kr_f32_to_bf16(bits_f32(0x7F7F7FFFu)), 0x7F7F);
    assert_int_equal(kr_f32_to_bf16(bits_f32(0x7F800001u)), 0x7FC0); /* sNaN quietened */
    assert_int_equal(kr_f32_to_bf16(bits_f32(0xFFC12345u)), 0xFFC1);
    for (int i = 0; i < 200000; i++) {
        float x = rand_f32(-140, 127, 15);
        if (isinf(x) || isnan(x)) continue;
        uint32_t want = nearest(fabs((double)x), 0x7F80u, 7, 127, ldexp(1.0, 128));
        uint16_t got = kr_f32_to_bf16(x);
        if (got != (want | (signbit(x) ? 0x8000u : 0)))
            fail_msg("f32 %08x -> bf16 %04x, want %04x", f32_bits(x), got, want);
    }
}

static void test_e4m3_exhaustive(void **state) {
    (void)state;
    for (uint32_t b = 0; b < 256; b++) {
        float f = kr_e4m3_to_f32((uint8_t)b);
        uint32_t mag = b & 0x7Fu;
        if (mag == 0x7F) {
            assert_true(isnan(f));
            assert_int_equal(f32_bits(f), (b & 0x80u) ? 0xFFC00000u : 0x7FC00000u);
            assert_int_equal(kr_f32_to_e4m3(f), 0x7F);
            continue;
        }
        double want = small_value(mag, 3, 7);
        if (b & 0x80u) want = -want;
        if ((double)f != want) fail_msg("e4m3 %02x -> %.9g, want %.9g", b, (double)f, want);
        if ((b & 0x80u) && !signbit(f)) fail_msg("e4m3 %02x lost its sign", b);
        assert_int_equal(kr_f32_to_e4m3(f), b);
        if (mag < 0x7E) {
            float a = kr_e4m3_to_f32((uint8_t)mag), c = kr_e4m3_to_f32((uint8_t)(mag + 1));
            float mid = (a + c) / 2, sg = (b & 0x80u) ? -1.0f : 1.0f;
            uint32_t s = b & 0x80u;
            assert_int_equal(kr_f32_to_e4m3(sg * mid), s | ((mag & 1u) ? mag + 1 : mag));
            assert_int_equal(kr_f32_to_e4m3(sg * nextafterf(mid, 0)), s | mag);
            assert_int_equal(kr_f32_to_e4m3(sg * nextafterf(mid, INFINITY)), s | (mag + 1));
        }
    }
    assert_float_equal(kr_e4m3_to_f32(0x7E), 448.0f, 0.0f);
    assert_float_equal(kr_e4m3_to_f32(0x01), ldexpf(1.0f, -9), 0.0f);
    assert_float_equal(kr_e4m3_to_f32(0x08), ldexpf(1.0f, -6), 0.0f);
    assert_int_equal(kr_f32_to_e4m3(464.0f), 0x7E); /* saturates, never NaN */
    assert_int_equal(kr_f32_to_e4m3(1e30f), 0x7E);
    assert_int_equal(kr_f32_to_e4m3(-INFINITY), 0xFE);
    assert_int_equal(kr_f32_to_e4m3(INFINITY), 0x7E);
    assert_int_equal(kr_f32_to_e4m3(-NAN), 0x7F);
    assert_int_equal(kr_f32_to_e4m3(-0.0f), 0x80);
    assert_int_equal(kr_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00); /* tie → 0 */
    assert_int_equal(kr_f32_to_e4m3(nextafterf(ldexpf(1.0f, -10), 1)), 0x01);
    for (int i = 0; i < 200000; i++) {
        float x = rand_f32(-14, 10, 19);
        uint32_t want = nearest(fabs((double)x), 0x7Eu, 3, 7, 448.0);
        uint8_t got = kr_f32_to_e4m3(x);
        if (got != (want | (signbit(x) ? 0x80u : 0)))
            fail_msg("f32 %08x (%g) -> e4m3 %02x, want %02x", f32_bits(x), (double)x, got, want);
    }
}

/* ---- quantising */

/* Weights with features that trip quantisers: an all-zero row, a row with one nonzero, a row
 * of one sign, a Q4 group of zeros, and rows on very different scales. */
static float *make_weights(int n, int k) {
    float *w = rand_buf((size_t)n * (size_t)k, 1.0f);
    for (int r = 0; r < n; r++) {
        float *row = w + (size_t)r * (size_t)k;
        float scale = ldexpf(1.0f, (r % 7) * 3 - 10);
        for (int j = 0; j < k; j++) row[j] *= scale;
        switch (r % 6) {
        case 0: memset(row, 0, (size_t)k * sizeof *row); break;
        case 1:
            memset(row, 0, (size_t)k * sizeof *row);
            row[k / 2] = -0.75f * scale;
            break;
        case 2:
            for (int j = 0; j < k; j++) row[j] = fabsf(row[j]);
            break;
        case 3:
            for (int j = 0; j < k && j < 32; j++) row[j] = 0.0f;
            break;
        default: break;
        }
    }
    return w;
}

static float *dequant_all(const kr_qmat *m, kr_dequant_rows_fn fn) {
    float *d = malloc((size_t)m->n * (size_t)m->k * sizeof *d);
    assert_non_null(d);
    fn(m, 0, m->n, d, m->k);
    return d;
}

/* Checks the error bound of every weight of one quantised matrix (col_scale applied). */
static void check_bounds(const kr_qmat *m, const float *w, const float *col_scale) {
    int n = m->n, k = m->k;
    float *d = dequant_all(m, kr_dequant_rows_scalar);
    for (int r = 0; r < n; r++) {
        float amax = 0.0f;
        for (int j = 0; j < k; j++) {
            float x = w[(size_t)r * k + j] * (col_scale ? col_scale[j] : 1.0f);
            if (fabsf(x) > amax) amax = fabsf(x);
        }
        for (int j = 0; j < k; j++) {
            float x = w[(size_t)r * k + j] * (col_scale ? col_scale[j] : 1.0f);
            float y = d[(size_t)r * k + j];
            double err = fabs((double)x - (double)y), tol = 0.0;
            assert_false(isnan(y));
            switch (m->fmt) {
            case KR_WFMT_BF16: /* exactly the rounded weight */
                err = fabs((double)kr_bf16_to_f32(kr_f32_to_bf16(x)) - (double)y);
                break;
            case KR_WFMT_INT8: {
                float s = m->scale[r];
                assert_true(s == amax / 127.0f);
                tol = s / 2 * (1 + 1e-6) + 1e-30;
                /* The code is exactly nearbyintf(x / s) clamped to ±127 (the quantiser rounds
                 * without the libm call; it must not change a code). */
                float v = s > 0.0f ? nearbyintf(x / s) : 0.0f;
                int want = v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
                assert_int_equal(((const int8_t *)m->data)[(size_t)r * m->kp + (size_t)j], want);
                break;
            }
            case KR_WFMT_FP8: {
                float s = m->scale[r];
                assert_true(s == amax / 448.0f);
                /* normal e4m3 range: 3 mantissa bits; subnormals: half a 2^-9 step */
                double rel = fabs((double)x) / s >= ldexp(1.0, -6) ? ldexp(1.0, -4) * fabs(x)
                                                                   : ldexp(1.0, -10) * s;
                tol = rel * (1 + 1e-6) + 1e-30;
                break;
            }
            case KR_WFMT_Q4: {
                int g = j / m->group, G = m->kp / m->group;
                float s = kr_f16_to_f32(m->gscale[(size_t)r * G + g]);
                float glo = 0.0f, ghi = 0.0f;
                for (int jj = g * m->group; jj < (g + 1) * m->group && jj < k; jj++) {
                    float v = w[(size_t)r * k + jj] * (col_scale ? col_scale[jj] : 1.0f);
                    if (v < glo) glo = v;
                    if (v > ghi) ghi = v;
                }
                assert_true(s >= (ghi - glo) / 15.0f); /* the scale covers the range */
                if (ghi == glo) assert_true(s == 0.0f);
                tol = s / 2 * (1 + 1e-5) + fabs(x) * 1e-6 + 1e-30;
                break;
            }
            default: break;
            }
            if (!(err <= tol))
                fail_msg("%s k=%d row %d col %d: w %.9g deq %.9g (err %.3g > %.3g)",
                         kr_wfmt_name(m->fmt), k, r, j, (double)x, (double)d[(size_t)r * k + j],
                         err, tol);
        }
    }
    free(d);
}

static void check_layout(const kr_qmat_owned *q, kr_wfmt fmt, int n, int k, int group) {
    const kr_qmat *m = &q->m;
    int align = kr_wfmt_row_align(fmt, group);
    assert_int_equal(m->fmt, fmt);
    assert_int_equal(m->n, n);
    assert_int_equal(m->k, k);
    assert_int_equal(m->kp, (k + align - 1) / align * align);
    assert_int_equal(m->group, fmt == KR_WFMT_Q4 ? group : 0);
    assert_int_equal(q->bytes, kr_qmat_bytes(m));
    assert_true((uintptr_t)m->data % 64 == 0);
    assert_true(q->mem == m->data);
    size_t kp = (size_t)m->kp, want = 0;
    switch (fmt) {
    case KR_WFMT_BF16: want = n * kp * 2; break;
    case KR_WFMT_INT8: want = n * kp + 8 * (size_t)n; break;
    case KR_WFMT_FP8: want = n * kp + 4 * (size_t)n; break;
    case KR_WFMT_Q4: want = n * kp / 2 + 3 * (size_t)n * (kp / (size_t)group); break;
    default: break;
    }
    if (m->in_scale) want += 4 * (size_t)k;
    assert_int_equal(q->bytes, want);
    const void *arrays[] = { m->scale, m->row_sum, m->gscale, m->gzero, m->in_scale };
    for (int i = 0; i < COUNT(arrays); i++)
        if (arrays[i]) assert_true((uintptr_t)arrays[i] % 64 == 0);
    assert_int_equal(m->scale != NULL, fmt == KR_WFMT_INT8 || fmt == KR_WFMT_FP8);
    assert_int_equal(m->row_sum != NULL, fmt == KR_WFMT_INT8);
    assert_int_equal(m->gscale != NULL && m->gzero != NULL, fmt == KR_WFMT_Q4);
    /* padding columns hold zeros (Q4: the zero point) */
    for (int r = 0; r < n; r++) {
        for (int j = k; j < m->kp; j++) {
            size_t at = (size_t)r * kp + (size_t)j;
            switch (fmt) {
            case KR_WFMT_BF16: assert_int_equal(((const uint16_t *)m->data)[at], 0); break;
            case KR_WFMT_INT8:
            case KR_WFMT_FP8: assert_int_equal(((const uint8_t *)m->data)[at], 0); break;
            case KR_WFMT_Q4: {
                int i = j & 31;
                uint8_t b = ((const uint8_t *)m->data)[(at - (size_t)i) / 2 + (size_t)(i & 15)];
                int qv = i < 16 ? (b & 15) : (b >> 4);
                assert_int_equal(qv,
                                 m->gzero[(size_t)r * (kp / (size_t)group) + (size_t)(j / group)]);
                break;
            }
            default: break;
            }
        }
        if (fmt == KR_WFMT_INT8) {
            int32_t sum = 0;
            for (int j = 0; j < m->kp; j++) {
                int8_t qv = ((const int8_t *)m->data)[(size_t)r * kp + (size_t)j];
                assert_true(qv >= -127);
                sum += qv;
            }
            assert_int_equal(sum, m->row_sum[r]);
        }
        if (fmt == KR_WFMT_Q4)
            for (size_t g = 0; g < kp / (size_t)group; g++)
                assert_true(m->gzero[(size_t)r * (kp / (size_t)group) + g] <= 15);
    }
}

static void test_quantize_bounds(void **state) {
    (void)state;
    const int n = 37;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int fi = 0; fi < COUNT(k_fmts); fi++)
            for (int gi = 0; gi < (k_fmts[fi] == KR_WFMT_Q4 ? 2 : 1); gi++) {
                int k = k_Ks[ki], group = gi ? 64 : 32;
                kr_wfmt fmt = k_fmts[fi];
                float *w = make_weights(n, k);
                kr_qmat_owned q;
                kr_error err = { 0 };
                assert_int_equal(kr_qmat_quantize(fmt, n, k, w, NULL, gi ? 64 : 0, &q, &err),
                                 KR_OK);
                check_layout(&q, fmt, n, k, group);
                assert_null(q.m.in_scale);
                check_bounds(&q.m, w, NULL);
                /* all-zero row 0: scale 0, weights 0 */
                float *d = dequant_all(&q.m, kr_dequant_rows_scalar);
                for (int j = 0; j < k; j++) assert_true(d[j] == 0.0f);
                if (fmt == KR_WFMT_INT8 || fmt == KR_WFMT_FP8) assert_true(q.m.scale[0] == 0.0f);
                if (fmt == KR_WFMT_Q4) assert_int_equal(q.m.gscale[0], 0);
                free(d);
                kr_qmat_owned_free(&q);
                assert_null(q.mem);
                free(w);
            }
}

/* col_scale multiplies weight columns before quantising; in_scale undoes it. */
static void test_quantize_col_scale(void **state) {
    (void)state;
    const int n = 11, k = 100;
    float *w = make_weights(n, k), cs[100];
    for (int j = 0; j < k; j++) cs[j] = ldexpf(1.0f + 0.37f * (float)(j % 5), (j % 3) - 1);
    for (int fi = 0; fi < COUNT(k_fmts); fi++) {
        kr_qmat_owned q;
        assert_int_equal(kr_qmat_quantize(k_fmts[fi], n, k, w, cs, 0, &q, NULL), KR_OK);
        check_layout(&q, k_fmts[fi], n, k, 32);
        assert_non_null(q.m.in_scale);
        for (int j = 0; j < k; j++) assert_true(q.m.in_scale[j] == 1.0f / cs[j]);
        check_bounds(&q.m, w, cs);
        /* A · Wᵀ with in_scale applied to A ≈ the unscaled product */
        float *d = dequant_all(&q.m, kr_dequant_rows_scalar);
        float *a = rand_buf((size_t)k, 1.0f);
        for (int r = 0; r < n; r++) {
            double want = 0.0, got = 0.0, mag = 0.0;
            for (int j = 0; j < k; j++) {
                want += (double)a[j] * w[(size_t)r * k + j];
                got += (double)(a[j] * q.m.in_scale[j]) * d[(size_t)r * k + j];
                mag += fabs((double)a[j] * w[(size_t)r * k + j]);
            }
            assert_true(fabs(got - want) <= 0.15 * mag + 1e-30);
        }
        free(a);
        free(d);
        kr_qmat_owned_free(&q);
    }
    free(w);
}

static void expect_error(kr_wfmt fmt, int n, int k, const float *w, const float *cs, int group,
                         const char *needle) {
    kr_qmat_owned q;
    memset(&q, 0xAB, sizeof q);
    kr_error err = { 0 };
    kr_status st = kr_qmat_quantize(fmt, n, k, w, cs, group, &q, &err);
    if (st == KR_OK) fail_msg("expected an error containing '%s'", needle);
    assert_int_equal(err.status, st);
    if (!strstr(err.message, needle)) fail_msg("message '%s' lacks '%s'", err.message, needle);
    assert_null(q.mem);
    assert_null(q.m.data);
    kr_qmat_owned_free(&q); /* harmless on a failed result */
}

static void test_quantize_bad_input(void **state) {
    (void)state;
    float w[5 * 40];
    for (int i = 0; i < 5 * 40; i++) w[i] = 0.01f * (float)(i % 13) - 0.05f;
    expect_error(KR_WFMT_INT8, 0, 40, w, NULL, 0, "n=0");
    expect_error(KR_WFMT_INT8, 5, 0, w, NULL, 0, "k=0");
    expect_error(KR_WFMT_Q4, 5, 40, w, NULL, 48, "group 48");
    expect_error(KR_WFMT_F32, 5, 40, w, NULL, 0, "f32");
    expect_error((kr_wfmt)77, 5, 40, w, NULL, 0, "format 77");
    expect_error(KR_WFMT_INT8, 5, 40, NULL, NULL, 0, "w is NULL");
    float cs[40];
    for (int j = 0; j < 40; j++) cs[j] = 1.0f;
    cs[7] = -1.0f;
    expect_error(KR_WFMT_FP8, 5, 40, w, cs, 0, "col_scale[7]");
    cs[7] = 0.0f;
    expect_error(KR_WFMT_FP8, 5, 40, w, cs, 0, "col_scale[7]");
    cs[7] = 1e38f;
    for (int fi = 0; fi < COUNT(k_fmts); fi++) {
        w[2 * 40 + 5] = NAN;
        expect_error(k_fmts[fi], 5, 40, w, NULL, 0, "row 2 column 5");
        w[2 * 40 + 5] = -INFINITY;
        expect_error(k_fmts[fi], 5, 40, w, NULL, 0, "row 2 column 5");
        w[2 * 40 + 5] = 0.0f;
        w[3 * 40 + 7] = 1e10f; /* finite, but × col_scale overflows */
        expect_error(k_fmts[fi], 5, 40, w, cs, 0, "row 3 column 7");
        w[3 * 40 + 7] = 0.0f;
    }
    /* Q4 scale beyond f16: a group spanning more than 15 · 65504 */
    w[1 * 40 + 3] = 1e6f;
    expect_error(KR_WFMT_Q4, 5, 40, w, NULL, 0, "row 1 group 0");
    w[1 * 40 + 3] = 0.0f;
    kr_error err;
    assert_int_equal(kr_qmat_quantize(KR_WFMT_INT8, 5, 40, w, NULL, 0, NULL, &err),
                     KR_ERR_INVALID_ARG);
    kr_qmat_owned_free(NULL);
}

/* ---- dequantisers: every variant, bit for bit */

/* Overwrites a quantised matrix's bytes and scales with arbitrary patterns: every e4m3 byte
 * (NaNs included), every f16 gscale pattern over the test, scales that are NaN, inf,
 * subnormal or so large that 256 · scale overflows. */
static void scramble(kr_qmat_owned *q) {
    kr_qmat *m = &q->m;
    size_t bytes = m->fmt == KR_WFMT_Q4     ? (size_t)m->n * m->kp / 2
                   : m->fmt == KR_WFMT_BF16 ? (size_t)m->n * m->kp * 2
                                            : (size_t)m->n * m->kp;
    uint8_t *d = (uint8_t *)q->mem;
    for (size_t i = 0; i < bytes; i++) d[i] = (uint8_t)urand();
    if (m->scale) {
        static const uint32_t specials[] = { 0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x00000003u,
                                             0x7F000000u, 0xFEFFFFFFu, 0x00800000u, 0x80000000u };
        float *s = (float *)m->scale;
        for (int r = 0; r < m->n; r++)
            s[r] = r < COUNT(specials) ? bits_f32(specials[r]) : ldexpf(frand(), -(r % 20));
    }
    if (m->gscale) {
        size_t G = (size_t)m->n * (size_t)(m->kp / m->group);
        uint16_t *gs = (uint16_t *)m->gscale;
        uint8_t *gz = (uint8_t *)m->gzero;
        for (size_t g = 0; g < G; g++) {
            gs[g] = (uint16_t)urand();
            gz[g] = (uint8_t)(urand() % 16);
        }
    }
}

static void check_dequant_variants(const kr_qmat *m, const char *what) {
    int n = m->n, k = m->k, ldo = k + 3;
    const float sentinel = -1234.5f;
    size_t cnt = (size_t)n * (size_t)ldo;
    float *ref = malloc(cnt * sizeof *ref), *got = malloc(cnt * sizeof *got);
    assert_true(ref && got);
    for (size_t i = 0; i < cnt; i++) ref[i] = sentinel;
    kr_dequant_rows_scalar(m, 0, n, ref, ldo);
    for (int v = 0; v < g_n_variants; v++) {
        kr_isa isa = g_variants[v];
        for (size_t i = 0; i < cnt; i++) got[i] = sentinel;
        k_dequant[isa](m, 0, n, got, ldo);
        for (int r = 0; r < n; r++) {
            if (memcmp(got + (size_t)r * ldo, ref + (size_t)r * ldo, (size_t)k * sizeof *got))
                for (int j = 0; j < k; j++)
                    if (f32_bits(got[(size_t)r * ldo + j]) != f32_bits(ref[(size_t)r * ldo + j]))
                        fail_msg("%s %s k=%d g=%d: [%d][%d] %08x, scalar %08x", what,
                                 kr_isa_name(isa), k, m->group, r, j,
                                 f32_bits(got[(size_t)r * ldo + j]),
                                 f32_bits(ref[(size_t)r * ldo + j]));
            for (int j = k; j < ldo; j++) assert_true(got[(size_t)r * ldo + j] == sentinel);
        }
        /* a sub-range of rows lands at row 0 of out */
        if (n > 3) {
            for (size_t i = 0; i < cnt; i++) got[i] = sentinel;
            assert_int_equal(kr_isa_set(isa), isa);
            kr_dequant_rows(m, 2, n - 1, got, ldo);
            assert_memory_equal(got, ref + 2 * (size_t)ldo, ((size_t)(n - 3) * ldo) * sizeof *got);
            assert_true(got[(size_t)(n - 3) * ldo] == sentinel);
        }
    }
    assert_int_equal(kr_isa_set(kr_isa_best()), kr_isa_best());
    free(ref);
    free(got);
}

static void test_dequant_bit_identical(void **state) {
    (void)state;
    const int n = 13;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int fi = 0; fi < COUNT(k_fmts); fi++)
            for (int gi = 0; gi < (k_fmts[fi] == KR_WFMT_Q4 ? 2 : 1); gi++) {
                int k = k_Ks[ki];
                float *w = make_weights(n, k);
                kr_qmat_owned q;
                assert_int_equal(
                    kr_qmat_quantize(k_fmts[fi], n, k, w, NULL, gi ? 64 : 32, &q, NULL), KR_OK);
                check_dequant_variants(&q.m, "quantised");
                scramble(&q);
                check_dequant_variants(&q.m, "scrambled");
                kr_qmat_owned_free(&q);
                free(w);
            }
}

/* ---- weight-only GEMM */

static void test_wonly_matches_f32_gemm(void **state) {
    (void)state;
    static const int Ms[] = { 1, 3, 17 };
    static const int Ns[] = { 1, 37, 100 };
    static const int Ks[] = { 6, 52, 520 };
    const float sentinel = 777.0f;
    int shape = 0;
    for (int fi = 0; fi < COUNT(k_fmts); fi++)
        for (int mi = 0; mi < COUNT(Ms); mi++)
            for (int ni = 0; ni < COUNT(Ns); ni++)
                for (int ki = 0; ki < COUNT(Ks); ki++, shape++) {
                    int M = Ms[mi], N = Ns[ni], K = Ks[ki], lda = K + 1, ldc = N + 2;
                    float *w = make_weights(N, K);
                    kr_qmat_owned q;
                    assert_int_equal(
                        kr_qmat_quantize(k_fmts[fi], N, K, w, NULL, shape % 2 ? 64 : 32, &q, NULL),
                        KR_OK);
                    float *wd = dequant_all(&q.m, kr_dequant_rows_scalar);
                    float *A = rand_buf((size_t)M * lda, 1.0f);
                    float *bias = shape % 3 ? rand_buf((size_t)N, 1.0f) : NULL;
                    float *ref = malloc((size_t)M * ldc * sizeof *ref);
                    float *C = malloc((size_t)M * ldc * sizeof *C);
                    size_t big = (size_t)K * 300;
                    float *panel = malloc(big * sizeof *panel);
                    assert_true(ref && C && panel);
                    const size_t panels[] = { (size_t)K, (size_t)K * 5 + 3, (size_t)K * 16,
                                              (size_t)K * 40, big };
                    for (int v = 0; v < g_n_variants; v++) {
                        kr_isa isa = g_variants[v];
                        assert_int_equal(kr_isa_set(isa), isa);
                        for (size_t i = 0; i < (size_t)M * ldc; i++) ref[i] = sentinel;
                        kr_gemm_f32(M, N, K, A, lda, wd, bias, ref, ldc, 0, 1);
                        for (int pi = 0; pi < COUNT(panels); pi++)
                            for (int nth = 1; nth <= 3; nth++) {
                                for (size_t i = 0; i < (size_t)M * ldc; i++) C[i] = sentinel;
                                for (int ith = 0; ith < nth; ith++)
                                    kr_qgemm_wonly(M, &q.m, A, lda, bias, C, ldc, panel, panels[pi],
                                                   ith, nth);
                                if (memcmp(C, ref, (size_t)M * ldc * sizeof *C))
                                    fail_msg("%s %s M=%d N=%d K=%d panel=%zu nth=%d differs from "
                                             "kr_gemm_f32",
                                             kr_wfmt_name(k_fmts[fi]), kr_isa_name(isa), M, N, K,
                                             panels[pi], nth);
                            }
                    }
                    assert_int_equal(kr_isa_set(kr_isa_best()), kr_isa_best());
                    free(w);
                    free(wd);
                    free(A);
                    free(bias);
                    free(ref);
                    free(C);
                    free(panel);
                    kr_qmat_owned_free(&q);
                }
}

/* ---- BF16 × BF16 */

static int have_bf16(void) {
    if (kr_cpu_has_avx512_bf16()) return 1;
    print_message("SKIPPED: this CPU (or KRONOS_ISA) has no AVX512_BF16\n");
    return 0;
}

/* kr_quant_act_bf16_scalar is kr_f32_to_bf16 with denormals flushed to signed zero, and the
 * VCVTNE2PS2BF16 variant agrees on every input class: each of the 65536 high halves with low
 * halves at and around the rounding tie, NaN payloads, denormals, plus random ones. */
static void test_act_bf16(void **state) {
    (void)state;
    static const uint32_t lows[] = { 0x0000, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1234, 0x0001 };
    const int k = 1000, kp = 1024, per = COUNT(lows) + 1;
    const int rows = (65536 * per + k - 1) / k;
    size_t cnt = (size_t)rows * (size_t)k;
    float *A = malloc(cnt * sizeof *A);
    uint16_t *s = malloc((size_t)rows * kp * 2), *v = malloc((size_t)rows * kp * 2);
    assert_true(A && s && v);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t hi = (uint32_t)(i / (size_t)per) & 0xFFFFu, li = (uint32_t)(i % (size_t)per);
        A[i] = bits_f32((hi << 16) | (li < (uint32_t)COUNT(lows) ? lows[li] : (urand() & 0xFFFFu)));
    }
    float *in = rand_buf((size_t)k, 2.0f);
    int simd = kr_cpu_has_avx512_bf16();
    if (!simd) print_message("SKIPPED (AVX-512 half): no AVX512_BF16\n");
    for (int pass = 0; pass < 2; pass++) {
        const float *scales = pass ? in : NULL;
        kr_quant_act_bf16_scalar(0, rows, k, kp, A, k, scales, s);
        for (int m = 0; m < rows; m++)
            for (int j = 0; j < kp; j++) {
                uint16_t got = s[(size_t)m * kp + j];
                if (j >= k) {
                    assert_int_equal(got, 0);
                    continue;
                }
                float a = A[(size_t)m * k + j], x = scales ? a * scales[j] : a;
                uint16_t want = fpclassify(x) == FP_SUBNORMAL ? (uint16_t)(signbit(x) ? 0x8000 : 0)
                                                              : kr_f32_to_bf16(x);
                if (got != want)
                    fail_msg("scalar act %08x -> %04x want %04x", f32_bits(x), got, want);
            }
        if (simd) {
            memset(v, 0xCD, (size_t)rows * kp * 2);
            kr_quant_act_bf16_avx512(0, rows, k, kp, A, k, scales, v);
            for (size_t i = 0; i < (size_t)rows * kp; i++)
                if (v[i] != s[i])
                    fail_msg("avx512 act row %zu col %zu (a=%08x) %04x, scalar %04x", i / kp,
                             i % kp, i % kp < (size_t)k ? f32_bits(A[i / kp * k + i % kp]) : 0,
                             v[i], s[i]);
        }
    }
    /* rows [m0, m1) only, tails of every length */
    for (int kk = 1; kk <= 70 && simd; kk++) {
        int kpp = (kk + 31) / 32 * 32;
        memset(s, 0xEE, (size_t)8 * kp * 2);
        memset(v, 0xEE, (size_t)8 * kp * 2);
        kr_quant_act_bf16_scalar(2, 5, kk, kpp, A, k, in, s);
        kr_quant_act_bf16_avx512(2, 5, kk, kpp, A, k, in, v);
        assert_memory_equal(s, v, (size_t)8 * kp * 2);
        assert_int_equal(s[2 * kpp - 1], 0xEEEE);
        assert_int_equal(s[5 * kpp], 0xEEEE);
    }
    free(A);
    free(s);
    free(v);
    free(in);
}

static void bf16_gemm(int avx, int M, const kr_qmat *w, const uint16_t *abf, const float *bias,
                      float *C, int ldc, int nth) {
    for (int ith = 0; ith < nth; ith++) {
        if (avx)
            kr_qgemm_bf16_avx512bf16(M, w, abf, bias, C, ldc, ith, nth);
        else
            kr_qgemm_bf16_scalar(M, w, abf, bias, C, ldc, ith, nth);
    }
}

static void test_qgemm_bf16(void **state) {
    (void)state;
    if (!have_bf16()) return;
    static const int Ms[] = { 1, 2, 3, 5, 17, 64 };
    static const int Ns[] = { 1, 7, 37, 100 };
    int shape = 0;
    for (int mi = 0; mi < COUNT(Ms); mi++)
        for (int ni = 0; ni < COUNT(Ns); ni++)
            for (int ki = 0; ki < COUNT(k_Ks); ki++, shape++) {
                int M = Ms[mi], N = Ns[ni], K = k_Ks[ki], ldc = N + 3;
                float *w = rand_buf((size_t)N * K, 1.0f), *A = rand_buf((size_t)M * K, 1.0f);
                float *bias = shape % 2 ? rand_buf((size_t)N, 1.0f) : NULL;
                kr_qmat_owned q;
                assert_int_equal(kr_qmat_quantize(KR_WFMT_BF16, N, K, w, NULL, 0, &q, NULL), KR_OK);
                int kp = q.m.kp;
                uint16_t *abf = malloc((size_t)M * kp * 2);
                float *Cs = malloc((size_t)M * ldc * sizeof *Cs),
                      *Cv = malloc((size_t)M * ldc * sizeof *Cv);
                assert_true(abf && Cs && Cv);
                kr_quant_act_bf16_scalar(0, M, K, kp, A, K, NULL, abf);
                for (size_t i = 0; i < (size_t)M * ldc; i++) Cs[i] = Cv[i] = 99.0f;
                bf16_gemm(0, M, &q.m, abf, bias, Cs, ldc, 1);
                bf16_gemm(1, M, &q.m, abf, bias, Cv, ldc, 1 + shape % 3);
                const uint16_t *wb = q.m.data;
                for (int m = 0; m < M; m++) {
                    for (int n = 0; n < N; n++) {
                        double ref = bias ? bias[n] : 0.0, mag = bias ? fabs(bias[n]) : 0.0;
                        for (int j = 0; j < kp; j++) {
                            double p = (double)kr_bf16_to_f32(abf[(size_t)m * kp + j]) *
                                       kr_bf16_to_f32(wb[(size_t)n * kp + j]);
                            ref += p;
                            mag += fabs(p);
                        }
                        double tol = 1e-5 * mag + 1e-30;
                        float cv = Cv[(size_t)m * ldc + n], cs = Cs[(size_t)m * ldc + n];
                        if (!(fabs(cv - cs) <= tol) || !(fabs(cv - ref) <= tol) ||
                            !(fabs(cs - ref) <= tol))
                            fail_msg("bf16 M=%d N=%d K=%d C[%d][%d]: avx512 %.9g scalar %.9g "
                                     "double %.9g",
                                     M, N, K, m, n, (double)cv, (double)cs, ref);
                    }
                    for (int n = N; n < ldc; n++) assert_true(Cv[(size_t)m * ldc + n] == 99.0f);
                }
                free(w);
                free(A);
                free(bias);
                free(abf);
                free(Cs);
                free(Cv);
                kr_qmat_owned_free(&q);
            }
}

/* A row alone == the row inside M = 64, any sub-batch, any thread split: bit for bit. */
static void test_qgemm_bf16_determinism(void **state) {
    (void)state;
    if (!have_bf16()) return;
    static const int Ns[] = { 20, 52, 1024 };
    static const int subMs[] = { 2, 3, 5, 17 };
    const int M = 64;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int ni = 0; ni < COUNT(Ns); ni++) {
            int K = k_Ks[ki], N = Ns[ni];
            float *w = rand_buf((size_t)N * K, 1.0f), *A = rand_buf((size_t)M * K, 1.0f);
            float *bias = rand_buf((size_t)N, 1.0f);
            kr_qmat_owned q;
            assert_int_equal(kr_qmat_quantize(KR_WFMT_BF16, N, K, w, NULL, 0, &q, NULL), KR_OK);
            int kp = q.m.kp;
            uint16_t *abf = malloc((size_t)M * kp * 2), *row = malloc((size_t)kp * 2 + 64);
            float *full = malloc((size_t)M * N * sizeof *full),
                  *other = malloc((size_t)M * N * sizeof *other);
            assert_true(abf && row && full && other);
            kr_quant_act_bf16_avx512(0, M, K, kp, A, K, NULL, abf);
            bf16_gemm(1, M, &q.m, abf, bias, full, N, 1);
            for (int r = 0; r < M; r++) {
                uint16_t *rw = row + 16; /* another alignment */
                memcpy(rw, abf + (size_t)r * kp, (size_t)kp * 2);
                bf16_gemm(1, 1, &q.m, rw, bias, other, N, 1 + r % 3);
                if (memcmp(other, full + (size_t)r * N, (size_t)N * sizeof *other))
                    fail_msg("bf16 K=%d N=%d: row %d alone differs from M=64", K, N, r);
            }
            for (int si = 0; si < COUNT(subMs); si++) {
                int sm = subMs[si], r0 = M - sm - 1;
                bf16_gemm(1, sm, &q.m, abf + (size_t)r0 * kp, bias, other, N, 2);
                if (memcmp(other, full + (size_t)r0 * N, (size_t)sm * N * sizeof *other))
                    fail_msg("bf16 K=%d N=%d: rows of M=%d differ from M=64", K, N, sm);
            }
            for (int nth = 2; nth <= 5; nth++) {
                bf16_gemm(1, M, &q.m, abf, bias, other, N, nth);
                if (memcmp(other, full, (size_t)M * N * sizeof *other))
                    fail_msg("bf16 K=%d N=%d: nth=%d differs from nth=1", K, N, nth);
            }
            free(w);
            free(A);
            free(bias);
            free(abf);
            free(row);
            free(full);
            free(other);
            kr_qmat_owned_free(&q);
        }
}

int main(void) {
    for (int i = 0; i < KR_ISA_COUNT; i++)
        if (kr_isa_supported((kr_isa)i)) g_variants[g_n_variants++] = (kr_isa)i;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_names),
        cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_bf16_exhaustive),
        cmocka_unit_test(test_e4m3_exhaustive),
        cmocka_unit_test(test_quantize_bounds),
        cmocka_unit_test(test_quantize_col_scale),
        cmocka_unit_test(test_quantize_bad_input),
        cmocka_unit_test(test_dequant_bit_identical),
        cmocka_unit_test(test_wonly_matches_f32_gemm),
        cmocka_unit_test(test_act_bf16),
        cmocka_unit_test(test_qgemm_bf16),
        cmocka_unit_test(test_qgemm_bf16_determinism),
    };
    print_message("kernel variants under test:");
    for (int i = 0; i < g_n_variants; i++) print_message(" %s", kr_isa_name(g_variants[i]));
    print_message("; AVX512_BF16: %s\n", kr_cpu_has_avx512_bf16() ? "yes" : "no");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
