/*
 * The fast paths of a large ingest against the slow ones they replace, which stay the
 * reference: kr_parse_decimal against strtod (bit for bit, on millions of random decimals, the
 * edge cases and every rounding mode), the CSV reader's verdicts on odd numbers, the counted
 * mode and median of the calendar's gaps against sorting (kr_calendar_interval and
 * kr_calendar_future), and the store's upsert of many rows per statement against row counts,
 * statistics and values across its statement boundary.
 */
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "series/calendar.h"
#include "series/candles.h"
#include "store/store.h"
#include "test_support.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;

static uint64_t next_random(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int pick(int n) { return (int)(next_random() % (uint64_t)n); }

/* A decimal as people and programs write them, and as they should not: a sign or none,
 * leading zeros, up to 24 integer and fraction digits, a bare point, an exponent with or
 * without a sign or digits. */
static void random_decimal(char *out, size_t cap) {
    size_t o = 0;
    const int sign = pick(4);
    if (sign == 1) out[o++] = '-';
    if (sign == 2) out[o++] = '+';
    const int zeros = pick(6) == 0 ? pick(4) : 0;
    for (int k = 0; k < zeros; k++) out[o++] = '0';
    const int int_digits = pick(4) == 0 ? pick(25) : pick(8);
    for (int k = 0; k < int_digits; k++) out[o++] = (char)('0' + pick(10));
    if (pick(3) != 0) {
        out[o++] = '.';
        const int frac_digits = pick(4) == 0 ? pick(25) : pick(7);
        for (int k = 0; k < frac_digits; k++) out[o++] = (char)('0' + pick(10));
    }
    if (pick(4) == 0) {
        out[o++] = pick(2) ? 'e' : 'E';
        const int es = pick(3);
        if (es == 1) out[o++] = '-';
        if (es == 2) out[o++] = '+';
        const int exp_digits = pick(8) == 0 ? 0 : 1 + pick(3);
        for (int k = 0; k < exp_digits; k++) out[o++] = (char)('0' + pick(10));
    }
    if (o >= cap) o = cap - 1;
    out[o] = '\0';
}

/* kr_parse_decimal must either decline or give exactly strtod's double for the whole text. */
static int check_against_strtod(const char *s) {
    double fast = 12345.0;
    const int handled = kr_parse_decimal(s, strlen(s), &fast);
    if (!handled) {
        assert_true(fast == 12345.0); /* *out untouched */
        return 0;
    }
    char *end = NULL;
    const double slow = strtod(s, &end);
    if (*s == '\0' || *end != '\0') fail_msg("'%s': fast path took what strtod does not", s);
    if (memcmp(&fast, &slow, sizeof fast) != 0)
        fail_msg("'%s': fast %.17g (%a), strtod %.17g (%a)", s, fast, fast, slow, slow);
    return 1;
}

static void test_decimal_matches_strtod_random(void **state) {
    (void)state;
    char s[96];
    long handled = 0, total = 4000000;
    for (long i = 0; i < total; i++) {
        random_decimal(s, sizeof s);
        handled += check_against_strtod(s);
    }
    /* Most of them take the fast path, else the test would prove little. */
    assert_true(handled > total / 3);
    /* Prices as vendors print them: 1-6 integer digits, 0-4 decimals. */
    for (long i = 0; i < 2000000; i++) {
        snprintf(s, sizeof s, "%d.%0*d", pick(1000000), 1 + pick(4), pick(10000));
        assert_int_equal(check_against_strtod(s), 1);
    }
}

static void test_decimal_every_rounding_mode(void **state) {
    (void)state;
    const int modes[] = { FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO };
    char s[96];
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        assert_int_equal(fesetround(modes[m]), 0);
        for (long i = 0; i < 300000; i++) {
            random_decimal(s, sizeof s);
            check_against_strtod(s);
        }
        check_against_strtod("-0.1");
        check_against_strtod("0.1");
        check_against_strtod("-1e-22");
    }
    fesetround(FE_TONEAREST);
}

static void test_decimal_edges(void **state) {
    (void)state;
    /* Taken: both answers compared bit for bit. */
    static const char *const taken[] = {
        "0",
        "-0",
        "+0",
        "0.0",
        "-0.0",
        "0e22",
        "-0e-22",
        "1.",
        ".5",
        "-.5",
        "+7",
        "11.27",
        "379.0",
        "1e22",
        "1e-22",
        "1E+22",
        "000000000000000000000000000000001.5",
        "9007199254740992",
        "0.1",
        "0.000001",
        "123456.789",
        "4.35e-05",
        "123456789012345e-22",
        "-9007199254740992e22",
    };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        if (!check_against_strtod(taken[i])) fail_msg("'%s' should take the fast path", taken[i]);
    double v = 1.0;
    assert_int_equal(kr_parse_decimal("-0", 2, &v), 1);
    assert_true(v == 0.0 && signbit(v));
    assert_int_equal(kr_parse_decimal("-0e5", 4, &v), 1);
    assert_true(v == 0.0 && signbit(v));

    /* Declined: strtod decides (too many digits, outside the exact range, denormals, other
     * syntax, or not a number at all). */
    static const char *const declined[] = {
        "",
        ".",
        "+",
        "-",
        "e5",
        "1e",
        "1e+",
        "1e-",
        "1e23",
        "1e-23",
        "1e400",
        "4.9e-324",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "9007199254740993",
        "12345678901234567890",
        "1.00000000000000000000",
        "inf",
        "-Infinity",
        "nan",
        "NaN",
        "0x10",
        " 1",
        "1 ",
        "1,5",
        "1.5.",
        "--1",
        "+-1",
        "1e5e",
        "1d",
        "1f",
        "0.5x",
    };
    for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++) {
        v = 42.0;
        if (kr_parse_decimal(declined[i], strlen(declined[i]), &v))
            fail_msg("'%s' should be left to strtod", declined[i]);
        assert_true(v == 42.0);
    }
    /* Thousands of digits: declined at once, not overflowed. */
    char *big = malloc(5001);
    assert_non_null(big);
    memset(big, '7', 5000);
    big[5000] = '\0';
    assert_int_equal(kr_parse_decimal(big, 5000, &v), 0);
    big[0] = '0';
    big[1] = '.';
    assert_int_equal(kr_parse_decimal(big, 5000, &v), 0);
    /* The length bounds the parse: a shorter span of a longer text. */
    assert_int_equal(kr_parse_decimal("12.5junk", 4, &v), 1);
    assert_true(v == 12.5);
    free(big);
}

/* The CSV reader's verdict on each odd number in the volume column: accepted with strtod's
 * value, or refused with the message it always gave. */
static void test_csv_odd_numbers(void **state) {
    (void)state;
    static const struct {
        const char *text, *error; /* error NULL: accepted */
    } cases[] = {
        { "+5", NULL },
        { "  7  ", NULL },
        { "-0", NULL },
        { "-0.0", NULL },
        { "1.", NULL },
        { ".25", NULL },
        { "4.9e-324", NULL },
        { "2.2250738585072011e-308", NULL },
        { "12345678901234567890123", NULL },
        { "1.00000000000000000000001", NULL },
        { "3.4028234663852886e38", NULL },
        { "1e39", "is out of range" },
        { "1e400", "is out of range" },
        { "nan", "(NaN) is not allowed" },
        { "inf", "is not finite" },
        { "-Infinity", "is not finite" },
        { "0x10", "is not a number" },
        { "1e", "is not a number" },
        { ".", "is not a number" },
        { "-1", "must be non-negative" },
        { "-1e-30", "must be non-negative" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char csv[256];
        snprintf(csv, sizeof csv,
                 "timestamps,open,high,low,close,volume,amount\n2024-01-02,1,2,1,2,%s,1\n",
                 cases[i].text);
        kr_candles *c = NULL;
        kr_error err = { 0 };
        const kr_status st = kr_candles_parse_csv(csv, strlen(csv), "odd.csv", &c, &err);
        if (!cases[i].error) {
            if (st != KR_OK) fail_msg("'%s': %s", cases[i].text, err.message);
            char trimmed[64];
            const char *t = cases[i].text;
            while (*t == ' ') t++;
            snprintf(trimmed, sizeof trimmed, "%s", t);
            for (size_t k = strlen(trimmed); k > 0 && trimmed[k - 1] == ' ';) trimmed[--k] = '\0';
            const double want = strtod(trimmed, NULL);
            const double got = c->values[KR_VOLUME];
            if (memcmp(&got, &want, sizeof got) != 0)
                fail_msg("'%s': read %a, strtod %a", cases[i].text, got, want);
            kr_candles_free(c);
        } else {
            assert_int_equal(st, KR_ERR_FORMAT);
            if (!strstr(err.message, "odd.csv: line 2, column 'volume': ") ||
                !strstr(err.message, cases[i].error))
                fail_msg("'%s': message '%s', want '%s'", cases[i].text, err.message,
                         cases[i].error);
        }
    }
}

/* The mode and median of gaps, counted, against sorting them. */
static int64_t sorted_mode(const int64_t *ts, int64_t n) {
    int64_t *g = malloc((size_t)(n - 1) * sizeof *g);
    assert_non_null(g);
    for (int64_t i = 1; i < n; i++) g[i - 1] = ts[i] - ts[i - 1];
    for (int64_t i = 1; i < n - 1; i++) /* insertion sort: small n, obviously right */
        for (int64_t j = i; j > 0 && g[j - 1] > g[j]; j--) {
            const int64_t t = g[j];
            g[j] = g[j - 1];
            g[j - 1] = t;
        }
    int64_t best = g[0], best_count = 0;
    for (int64_t i = 0; i < n - 1;) {
        int64_t j = i;
        while (j < n - 1 && g[j] == g[i]) j++;
        if (j - i > best_count) {
            best = g[i];
            best_count = j - i;
        }
        i = j;
    }
    free(g);
    return best;
}

static void test_interval_counted(void **state) {
    (void)state;
    enum { N = 3000 };
    int64_t *ts = malloc(N * sizeof *ts);
    assert_non_null(ts);
    /* A few distinct gaps (the counting path), ties among them, and many distinct gaps (more
     * than n / 8: the sorting fallback). */
    for (int variant = 0; variant < 60; variant++) {
        const int distinct = variant < 20 ? 1 + variant % 5 : variant < 40 ? 2 : 2000;
        ts[0] = kr_unix_from_civil(2020, 1, 2, 9, 30, 0);
        for (int i = 1; i < N; i++) {
            int64_t gap = 60 * (1 + pick(distinct));
            /* 1000 gaps of 300 s, 1000 of 120 s, 999 of 60 s: the tie goes to 120. */
            if (variant >= 20 && variant < 40) gap = i % 3 == 1 ? 300 : i % 3 == 2 ? 120 : 60;
            ts[i] = ts[i - 1] + gap;
        }
        const int64_t want = sorted_mode(ts, N);
        assert_int_equal(kr_calendar_interval(ts, N), want);
        if (variant >= 20 && variant < 40) assert_int_equal(want, 120);
        int64_t fut[2];
        kr_calendar_info info;
        kr_error err = { 0 };
        if (kr_calendar_future(ts, N, 2, fut, &info, &err) == KR_OK)
            assert_int_equal(info.interval_seconds, want);
    }
    assert_int_equal(kr_calendar_interval(ts, 1), 0);
    assert_int_equal(kr_calendar_interval(NULL, 5), 0);
    free(ts);

    /* The bundled files: what kr_calendar_future says, kr_calendar_interval says. */
    static const char *const files[] = { "AAPL_1d.csv", "BTCUSDT_1h.csv", "MSFT_1d.csv",
                                         "XSHG_5min_600977.csv" };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/data/%s", KR_SOURCE_DIR, files[f]);
        kr_candles *c = NULL;
        kr_error err = { 0 };
        if (kr_candles_read_csv(path, &c, &err) != KR_OK) fail_msg("%s", err.message);
        int64_t fut[3];
        kr_calendar_info info;
        if (kr_calendar_future(c->timestamps, c->n, 3, fut, &info, &err) != KR_OK)
            fail_msg("%s", err.message);
        assert_int_equal(kr_calendar_interval(c->timestamps, c->n), info.interval_seconds);
        assert_int_equal(info.interval_seconds, sorted_mode(c->timestamps, c->n));
        kr_candles_free(c);
    }
}

/* n candles of 5-minute bars from bar `start`, values varying by `salt`. */
static kr_candles *bars(int64_t start, int64_t n, int salt) {
    kr_candles *c = calloc(1, sizeof *c);
    c->n = n;
    c->timestamps = malloc((size_t)n * sizeof *c->timestamps);
    c->values = malloc((size_t)n * KR_N_FEATURES * sizeof *c->values);
    c->has_volume = c->has_amount = 1;
    for (int64_t i = 0; i < n; i++) {
        c->timestamps[i] = kr_unix_from_civil(2024, 1, 2, 0, 0, 0) + (start + i) * 300;
        double *v = c->values + i * KR_N_FEATURES;
        const double p = 10.0 + 0.01 * (double)((start + i) % 97) + salt * 0.5;
        v[KR_OPEN] = p;
        v[KR_HIGH] = p + 0.1;
        v[KR_LOW] = p - 0.1;
        v[KR_CLOSE] = p + 0.05;
        v[KR_VOLUME] = 100.0 + (double)(i % 7);
        v[KR_AMOUNT] = v[KR_VOLUME] * p;
    }
    return c;
}

/* Batches of sizes around the store's statement size (32 rows): new, repeated, replaced and
 * mixed rows are counted and stored exactly as one statement per row did. */
static void test_upsert_across_statements(void **state) {
    (void)state;
    char path[] = "/tmp/kronos-upsert-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    kr_store *s = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_store_open(path, &s, &err), KR_OK);
    static const int64_t sizes[] = { 1, 31, 32, 33, 63, 64, 65, 100, 1000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char sym[16];
        snprintf(sym, sizeof sym, "S%zu", k);
        const int64_t n = sizes[k];
        kr_candles *a = bars(0, n, 0);
        kr_store_upsert_stats st;
        assert_int_equal(kr_store_upsert_ex(s, sym, "5m", a, &st, &err), KR_OK);
        assert_int_equal(st.added, n);
        assert_int_equal(st.replaced + st.unchanged, 0);
        assert_int_equal(kr_store_upsert_ex(s, sym, "5m", a, &st, &err), KR_OK);
        assert_int_equal(st.unchanged, n);
        assert_int_equal(st.added + st.replaced, 0);
        /* The second half again with other values, and as many new rows after it. */
        kr_candles *b = bars(n / 2, n, 1);
        assert_int_equal(kr_store_upsert_ex(s, sym, "5m", b, &st, &err), KR_OK);
        assert_int_equal(st.replaced, n - n / 2);
        assert_int_equal(st.added, n / 2);
        assert_int_equal(st.unchanged, 0);
        kr_candles *back = NULL;
        assert_int_equal(kr_store_read(s, sym, "5m", 0, &back, &err), KR_OK);
        assert_int_equal(back->n, n + n / 2);
        for (int64_t i = 0; i < back->n; i++) {
            const kr_candles *src = i < n / 2 ? a : b;
            const int64_t j = i < n / 2 ? i : i - n / 2;
            assert_int_equal(back->timestamps[i], src->timestamps[j]);
            assert_memory_equal(back->values + i * KR_N_FEATURES, src->values + j * KR_N_FEATURES,
                                KR_N_FEATURES * sizeof(double));
        }
        kr_candles_free(back);
        kr_candles_free(a);
        kr_candles_free(b);
    }
    kr_store_close(s);
    char side[sizeof path + 8];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decimal_matches_strtod_random),
        cmocka_unit_test(test_decimal_every_rounding_mode),
        cmocka_unit_test(test_decimal_edges),
        cmocka_unit_test(test_csv_odd_numbers),
        cmocka_unit_test(test_interval_counted),
        cmocka_unit_test(test_upsert_across_statements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
