/*
 * fuzz_request — libFuzzer target for the HTTP request parser and validator
 * (server/request: POST /v1/forecast bodies) and the server config parser (server/config),
 * both of which read untrusted JSON.
 *
 * Any input must end in KR_OK or a clean 400 whose message names its field: no crash, no
 * leak, no undefined behaviour, no hang. A request that parses must satisfy everything the
 * engine relies on (the CSV reader's candle rules, parameter ranges, future stamps after the
 * history), so a "successful" parse of garbage that breaks them is reported as a crash.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"
#include "server/request.h"

/* A violated invariant must stop the fuzzer with a reproducer; abort() is fine in a harness. */
#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

static void check_request(const kr_api_request *r, const kr_api_limits *lim) {
    const kr_candles *c = r->candles;
    CHECK(c && c->n >= 2 && c->n <= lim->max_rows);
    for (int64_t i = 0; i < c->n; i++) {
        const double *v = c->values + i * KR_N_FEATURES;
        if (i > 0) CHECK(c->timestamps[i] > c->timestamps[i - 1]);
        for (int k = 0; k < KR_N_FEATURES; k++) CHECK(isfinite(v[k]) && fabs(v[k]) <= 3.5e38);
        for (int k = KR_OPEN; k <= KR_CLOSE; k++) CHECK(v[k] > 0.0);
        CHECK(v[KR_HIGH] >= v[KR_LOW]);
        CHECK(v[KR_VOLUME] >= 0.0 && v[KR_AMOUNT] >= 0.0);
        if (!c->has_volume) CHECK(v[KR_VOLUME] == 0.0 && v[KR_AMOUNT] == 0.0);
    }
    CHECK(!c->has_amount || c->has_volume);
    const kr_forecast_params *p = &r->params;
    CHECK(p->pred_len >= 1 && p->pred_len <= lim->max_pred_len && p->pred_len <= p->max_context);
    CHECK(p->paths >= 1 && p->paths <= lim->max_paths);
    CHECK(p->temperature > 0.0f && isfinite(p->temperature));
    CHECK(p->top_p > 0.0f && p->top_p <= 1.0f);
    CHECK(p->top_k >= 0 && p->lookback >= 0 && p->lookback <= c->n);
    CHECK(p->window == KR_WINDOW_EXACT || p->window == KR_WINDOW_ROLLING);
    CHECK(p->keep_paths == 1);
    CHECK(r->n_quantiles >= 0 && r->n_quantiles <= KR_API_MAX_QUANTILES);
    for (int k = 0; k < r->n_quantiles; k++)
        CHECK(r->quantiles[k] >= 0.0 && r->quantiles[k] <= 1.0);
    CHECK(r->timeout_s >= 0.0 && isfinite(r->timeout_s));
    if (r->future_timestamps) {
        CHECK(r->future_timestamps[0] > c->timestamps[c->n - 1]);
        for (int i = 1; i < p->pred_len; i++)
            CHECK(r->future_timestamps[i] > r->future_timestamps[i - 1]);
    }
    kr_series s = kr_api_request_series(r);
    CHECK(s.n == c->n && s.future_timestamps == r->future_timestamps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    kr_api_limits lim = kr_api_default_limits();
    lim.max_rows = 4096; /* keeps each run fast; the rules do not depend on the count */
    lim.max_paths = 64;
    lim.max_pred_len = 256;

    kr_api_request r;
    kr_api_error err;
    kr_status st = kr_api_forecast_parse(text, size, &lim, &r, &err);
    if (st == KR_OK) {
        check_request(&r, &lim);
        kr_api_request_free(&r);
    } else {
        CHECK(r.candles == NULL && r.future_timestamps == NULL);
        CHECK(err.status == 400 || err.status == 413);
        CHECK(memchr(err.message, '\0', sizeof err.message) != NULL && err.message[0]);
        CHECK(memchr(err.field, '\0', sizeof err.field) != NULL);
        /* The message starts with the field it names. */
        CHECK(!err.field[0] || strncmp(err.message, err.field, strlen(err.field)) == 0);
    }

    /* The same bytes as a config file. */
    static kr_server_config cfg; /* large; not on the fuzzer's stack */
    kr_server_config_defaults(&cfg);
    kr_error cerr;
    if (kr_server_config_parse(text, size, "fuzz.json", &cfg, &cerr) == KR_OK) {
        CHECK(kr_server_config_validate(&cfg, &cerr) == KR_OK);
        CHECK(cfg.n_profiles >= 0 && cfg.n_profiles <= KR_SERVER_MAX_PROFILES);
        for (int m = 0; m < 24 * 60; m += 7) (void)kr_server_profile_at(&cfg, m);
    } else {
        CHECK(memchr(cerr.message, '\0', sizeof cerr.message) != NULL && cerr.message[0]);
    }
    return 0;
}
