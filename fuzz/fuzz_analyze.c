/*
 * fuzz_analyze — libFuzzer target for the /v1/analyze and /v1/analyze/batch body parser
 * (server/analyst_request). The first byte picks the route (odd: batch), the rest is the body.
 * Any input ends in KR_OK or a clean 400/413 whose message starts with the field it names;
 * an accepted request respects every cap and names 1..max_symbols valid symbols.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/analyst_request.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int batch = data[0] & 1;
    kr_api_limits lim = kr_api_default_limits();
    lim.max_rows = 2048;
    lim.max_symbols = 8;
    kr_api_analyze_request r;
    kr_api_error err;
    if (kr_api_analyze_parse((const char *)data + 1, size - 1, batch, &lim, &r, &err) == KR_OK) {
        const kr_analyze_params *p = &r.params;
        CHECK(r.n >= 1 && r.n <= (batch ? lim.max_symbols : 1));
        CHECK(p->horizon >= 1 && p->horizon <= lim.max_horizon && p->horizon < p->max_context);
        CHECK(p->paths >= 1 && p->paths <= lim.max_analyze_paths);
        CHECK(p->lookback >= 0 && p->lookback <= lim.max_lookback);
        CHECK(p->calibrate >= 0 && p->calibrate <= lim.max_calibrate);
        CHECK(p->temperature > 0.0f && p->top_p > 0.0f && p->top_p <= 1.0f);
        for (int i = 0; i < r.n; i++) {
            kr_error e;
            CHECK(r.symbols[i][0] && kr_store_check_symbol(r.symbols[i], &e) == KR_OK);
        }
        if (r.candles) CHECK(!batch && r.candles->n >= 2 && r.candles->n <= lim.max_rows);
        kr_api_analyze_request_free(&r);
    } else {
        CHECK(r.candles == NULL);
        CHECK(err.status == 400 || err.status == 413);
        CHECK(memchr(err.message, '\0', sizeof err.message) && err.message[0]);
        CHECK(!err.field[0] || strncmp(err.message, err.field, strlen(err.field)) == 0);
    }
    return 0;
}
