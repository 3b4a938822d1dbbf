/*
 * fuzz_query — libFuzzer target for what the server reads from a request's URL and headers
 * besides the body: the GET /v1/candles query parameters (kr_api_candles_query: interval,
 * limit), the path's symbol (kr_api_store_name), DELETE /v1/candles' from / to
 * (kr_store_parse_range), the X-Request-Id check and the framing check
 * of Content-Length / Transfer-Encoding (server/framing). The input is split at '&' into
 * values, as a query string would be.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/access_log.h"
#include "server/analyst_request.h"
#include "server/framing.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char text[4096];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    const char *v[4] = { "", "", "", "" };
    char *p = text;
    for (int i = 0; i < 4 && p; i++) {
        v[i] = p;
        p = strchr(p, '&');
        if (p) *p++ = '\0';
    }

    char interval[64];
    int limit = -1;
    kr_api_error err;
    if (kr_api_candles_query(v[0][0] ? v[0] : NULL, v[1][0] ? v[1] : NULL, interval,
                             sizeof interval, &limit, &err) == KR_OK) {
        CHECK(limit >= 1 && limit <= KR_API_CANDLES_MAX);
        kr_error e;
        CHECK(!interval[0] || kr_store_check_interval(interval, &e) == KR_OK);
    } else {
        CHECK(err.status == 400 && err.message[0]);
        CHECK(!strcmp(err.field, "interval") || !strcmp(err.field, "limit"));
    }
    char symbol[64];
    if (kr_api_store_name(v[2], "symbol", 0, symbol, sizeof symbol, &err) == KR_OK)
        CHECK(symbol[0] && strlen(symbol) <= KR_STORE_NAME_MAX);

    /* DELETE /v1/candles' from / to: an accepted range never runs backwards; a refusal names
     * its end. */
    int64_t from_ts, to_ts;
    kr_error range_err;
    if (kr_store_parse_range(v[0], v[1], "from", "to", &from_ts, &to_ts, &range_err) == KR_OK)
        CHECK(from_ts <= to_ts);
    else
        CHECK(!strncmp(range_err.message, "from:", 5) || !strncmp(range_err.message, "to:", 3));

    /* An X-Request-Id accepted as is is safe in a header and a log line. */
    if (kr_request_id_valid(v[3]))
        for (const char *c = v[3]; *c; c++) CHECK(*c > 0x20 && *c < 0x7f && *c != '"');

    const char *names[3] = { "Content-Length", "Content-Length", "Transfer-Encoding" };
    const char *values[3] = { v[0], v[1], v[2] };
    char msg[256];
    int st = kr_http_check_framing(3, names, values, msg, sizeof msg);
    CHECK(st == 400); /* Transfer-Encoding with Content-Length is always refused */
    st = kr_http_check_framing(2, names, values, msg, sizeof msg);
    CHECK(st == 0 || st == 400);
    if (st == 0) CHECK(strtoll(v[0], NULL, 10) == strtoll(v[1], NULL, 10));
    /* A Transfer-Encoding alone passes only as one "chunked"; a spaced name never passes. */
    st = kr_http_check_framing(1, names + 2, values + 2, msg, sizeof msg);
    if (st == 0) {
        char low[64] = "";
        for (size_t i = 0; v[2][i] && i < sizeof low - 1; i++)
            low[i] = (char)(v[2][i] >= 'A' && v[2][i] <= 'Z' ? v[2][i] + 32 : v[2][i]);
        CHECK(strstr(low, "chunked") && !strchr(v[2], ','));
    }
    const char *spaced[1] = { v[3][0] ? "Content-Length " : "Transfer-Encoding\t" };
    CHECK(kr_http_check_framing(1, spaced, values, msg, sizeof msg) == 400);
    return 0;
}
