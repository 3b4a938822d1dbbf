/*
 * fuzz_csv — libFuzzer target for the candle CSV reader and the timestamp parser.
 *
 * Everything here is reachable from an HTTP request body or a user's file, so any input must
 * end in KR_OK or a clean error: no crash, no leak, no undefined behaviour, no hang. On
 * success the parsed table's invariants are checked too, so a "successful" parse of garbage
 * that breaks them is reported as a crash.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "series/calendar.h"
#include "series/candles.h"

/* A violated invariant must stop the fuzzer with a reproducer; abort() is fine in a harness. */
#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

static void check_candles(const kr_candles *c) {
    CHECK(c->n > 0);
    for (int64_t i = 0; i < c->n; i++) {
        const double *v = c->values + i * KR_N_FEATURES;
        if (i > 0) CHECK(c->timestamps[i] > c->timestamps[i - 1]);
        CHECK(kr_timestamp_in_range(c->timestamps[i]));
        for (int k = 0; k < KR_N_FEATURES; k++) CHECK(isfinite(v[k]));
        for (int k = KR_OPEN; k <= KR_CLOSE; k++) CHECK(v[k] > 0.0);
        CHECK(v[KR_HIGH] >= v[KR_LOW]);
        CHECK(v[KR_VOLUME] >= 0.0);
        if (!c->has_volume) CHECK(v[KR_VOLUME] == 0.0 && v[KR_AMOUNT] == 0.0);
    }
    kr_series s = kr_candles_series(c);
    CHECK(s.n == c->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;

    kr_candles *c = NULL;
    kr_error err;
    kr_status st = kr_candles_parse_csv(text, size, "fuzz", &c, &err);
    if (st == KR_OK) {
        check_candles(c);
        /* Feed the parsed stamps to the calendar: long gaps and odd intervals are its
         * worst cases (bounded search). */
        if (c->n >= 2) {
            int64_t out[4];
            kr_calendar_info info;
            if (kr_calendar_future(c->timestamps, c->n, 4, out, &info, &err) == KR_OK)
                CHECK(kr_calendar_interval(c->timestamps, c->n) == info.interval_seconds);
        }
        kr_candles_free(c);
    } else {
        CHECK(c == NULL);
        CHECK(err.status == st);
        CHECK(memchr(err.message, '\0', sizeof err.message) != NULL);
    }

    /* Each comma- or line-separated piece as a decimal: the fast path must give strtod's
     * double for the whole piece, or leave it to strtod. */
    size_t from = 0;
    for (size_t i = 0; i <= size && size < 4096; i++) {
        if (i < size && data[i] != ',' && data[i] != '\n') continue;
        double fast;
        if (kr_parse_decimal(text + from, i - from, &fast)) {
            char piece[4096];
            memcpy(piece, text + from, i - from);
            piece[i - from] = '\0';
            char *end = NULL;
            const double slow = strtod(piece, &end);
            CHECK(end == piece + (i - from) && memcmp(&fast, &slow, sizeof fast) == 0);
        }
        from = i + 1;
    }

    /* The whole input, and each line of it, as a single timestamp. */
    int64_t t;
    int has_time;
    (void)kr_parse_timestamp(text, size, &t, &has_time);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n') {
            if (kr_parse_timestamp(text + start, i - start, &t, &has_time) == 0)
                CHECK(has_time == 0 || has_time == 1);
            start = i + 1;
        }
    }
    return 0;
}
