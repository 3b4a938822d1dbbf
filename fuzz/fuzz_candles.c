/*
 * fuzz_candles — libFuzzer target for the POST /v1/candles body parser (server/analyst_request):
 * JSON rows or {"candles", "columns"}, or CSV text when the first byte is odd. Any input ends in
 * KR_OK with a table that obeys the CSV reader's rules, or a clean 400/413 naming its field.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/candles_json.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int csv = data[0] & 1;
    kr_api_limits lim = kr_api_default_limits();
    lim.max_rows = 2048;
    kr_candles *c = NULL;
    kr_api_error err;
    if (kr_api_candles_parse((const char *)data + 1, size - 1, csv, &lim, &c, &err) == KR_OK) {
        CHECK(c && c->n >= 1);
        for (int64_t i = 0; i < c->n; i++) {
            const double *v = c->values + i * KR_N_FEATURES;
            if (i > 0) CHECK(c->timestamps[i] > c->timestamps[i - 1]);
            for (int k = 0; k < KR_N_FEATURES; k++) CHECK(isfinite(v[k]));
            for (int k = KR_OPEN; k <= KR_CLOSE; k++) CHECK(v[k] > 0.0);
            CHECK(v[KR_HIGH] >= v[KR_LOW] && v[KR_VOLUME] >= 0.0 && v[KR_AMOUNT] >= 0.0);
        }
        kr_candles_free(c);
    } else {
        CHECK(c == NULL);
        CHECK(err.status == 400 || err.status == 413);
        CHECK(memchr(err.message, '\0', sizeof err.message) && err.message[0]);
        CHECK(!err.field[0] || strncmp(err.message, err.field, strlen(err.field)) == 0);
    }
    return 0;
}
