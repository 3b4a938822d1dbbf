/*
 * The server's pure parts, without sockets: the /v1/forecast request parser and validator
 * (every layout, every rule, the field and row each error names), the response builders, the
 * router's 404/405 decisions, API-key checks, the config file and its profiles, SSE framing
 * and the job rendezvous between a (simulated) scheduler thread and a connection thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine_helpers.h"
#include "server_fixtures.h"
#include "test_support.h"

#include "base/strbuf.h"
#include "kronos.h"
#include "series/candles.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/conn_watch.h"
#include "server/job.h"
#include "server/request.h"
#include "server/response.h"
#include "server/router.h"
#include "server/sse.h"

/* ------------------------------------------------------------------ request: valid inputs */

static kr_api_request parse_ok(const char *json) {
    kr_api_request r;
    kr_api_error e;
    kr_status st = kr_api_forecast_parse(json, strlen(json), NULL, &r, &e);
    if (st != KR_OK) fail_msg("unexpected error for %s: %s (field %s)", json, e.message, e.field);
    return r;
}

static void test_request_array_rows(void **state) {
    (void)state;
    kr_api_request r =
        parse_ok("{\"candles\": [[\"2024-01-02 09:30\", 10, 11, 9.5, 10.5, 100, 1050],"
                 "               [\"2024-01-02 09:35\", 10.5, 11.5, 10, 11, 200, 2150]],"
                 " \"pred_len\": 3, \"paths\": 4, \"seed\": 42, \"temperature\": 0.5, \"top_k\": 3,"
                 " \"top_p\": 0.8, \"window\": \"rolling\", \"quantiles\": [0.25, 0.75],"
                 " \"return_paths\": true, \"stream\": true, \"timeout_s\": 2.5, \"lookback\": 2,"
                 " \"max_context\": 256}");
    assert_int_equal(r.candles->n, 2);
    assert_int_equal(r.candles->has_volume, 1);
    assert_int_equal(r.candles->has_amount, 1);
    assert_int_equal(r.candles->date_only, 0);
    assert_true(r.candles->values[6 + KR_CLOSE] == 11.0);
    assert_true(r.candles->values[6 + KR_AMOUNT] == 2150.0);
    assert_int_equal(r.candles->timestamps[1] - r.candles->timestamps[0], 300);
    assert_int_equal(r.params.pred_len, 3);
    assert_int_equal(r.params.paths, 4);
    assert_int_equal(r.params.seed, 42);
    assert_true(r.params.temperature == 0.5f);
    assert_int_equal(r.params.top_k, 3);
    assert_true(r.params.top_p == 0.8f);
    assert_int_equal(r.params.window, KR_WINDOW_ROLLING);
    assert_int_equal(r.params.lookback, 2);
    assert_int_equal(r.params.max_context, 256);
    assert_int_equal(r.params.keep_paths, 1);
    assert_int_equal(r.n_quantiles, 2);
    assert_true(r.quantiles[1] == 0.75);
    assert_int_equal(r.return_paths, 1);
    assert_int_equal(r.stream, 1);
    assert_true(r.timeout_s == 2.5);
    kr_series s = kr_api_request_series(&r);
    assert_int_equal(s.n, 2);
    assert_null(s.future_timestamps);
    kr_api_request_free(&r);
    kr_api_request_free(&r); /* idempotent */
}

/* "norm" (exact by default, or the server's default), "norm_refresh" and "model". */
static void test_request_norm_and_model(void **state) {
    (void)state;
    const char *rows = "\"candles\": [[1704186000,10,11,9.5,10.5,100],[1704186300,10.5,11.5,10,11,"
                       "200]], \"pred_len\": 1";
    char body[512];
    snprintf(body, sizeof body, "{%s}", rows);
    kr_api_request r = parse_ok(body);
    assert_int_equal(r.params.norm, KR_NORM_EXACT);
    assert_string_equal(r.model, "");
    kr_api_request_free(&r);
    snprintf(body, sizeof body,
             "{%s, \"norm\": \"anchored\", \"norm_refresh\": 16, \"model\": \"small-int8\"}", rows);
    r = parse_ok(body);
    assert_int_equal(r.params.norm, KR_NORM_ANCHORED);
    assert_int_equal(r.params.norm_refresh, 16);
    assert_string_equal(r.model, "small-int8");
    kr_api_request_free(&r);
    /* The server's default applies to a request that does not say. */
    kr_api_limits lim = kr_api_default_limits();
    lim.default_norm = KR_NORM_ANCHORED;
    lim.default_norm_refresh = 32;
    snprintf(body, sizeof body, "{%s}", rows);
    kr_api_error e;
    assert_int_equal(kr_api_forecast_parse(body, strlen(body), &lim, &r, &e), KR_OK);
    assert_int_equal(r.params.norm, KR_NORM_ANCHORED);
    assert_int_equal(r.params.norm_refresh, 32);
    kr_api_request_free(&r);
    const char *bad[][2] = {
        { "\"norm\": \"rolling\"", "norm" },       { "\"norm\": 1", "norm" },
        { "\"norm_refresh\": 0", "norm_refresh" }, { "\"model\": \"\"", "model" },
        { "\"model\": \"../x\"", "model" },        { "\"model\": 3", "model" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "{%s, %s}", rows, bad[i][0]);
        memset(&e, 0, sizeof e);
        assert_int_not_equal(kr_api_forecast_parse(body, strlen(body), NULL, &r, &e), KR_OK);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.field, bad[i][1]);
    }
}

/* Epoch seconds with a fraction (pandas' float seconds, time.time()), as JSON numbers and as
 * strings: the fraction truncated, as a date-time's fractional seconds are. */
static void test_request_fractional_epochs(void **state) {
    (void)state;
    kr_api_request r = parse_ok("{\"pred_len\": 1, \"candles\": ["
                                "[1704153600.0, 10, 11, 9.5, 10.5, 100],"
                                "[1704153900.999, 10, 11, 9.5, 10.5, 100],"
                                "[\"1704154200.5\", 10, 11, 9.5, 10.5, 100],"
                                "[\"1.704154500e9\", 10, 11, 9.5, 10.5, 100],"
                                "[\"2024-01-02 00:20:00.75\", 10, 11, 9.5, 10.5, 100]]}");
    assert_int_equal(r.candles->n, 5);
    for (int64_t i = 0; i < 5; i++)
        assert_int_equal(r.candles->timestamps[i], 1704153600 + i * 300);
    assert_int_equal(r.candles->date_only, 0);
    kr_api_request_free(&r);
}

/* The same candles in every layout give the same table, and the derived amount follows the
 * reference (volume x mean of OHLC; both zero without volume). */
static void test_request_layouts_agree(void **state) {
    (void)state;
    const char *bodies[] = {
        "{\"pred_len\":1,\"candles\":[[1704186000,10,11,9.5,10.5,100],[1704186300,10.5,11.5,10,11,"
        "200]]}",
        "{\"pred_len\":1,\"candles\":[{\"timestamps\":\"2024-01-02 "
        "09:00:00\",\"open\":10,\"high\":11,"
        "\"low\":9.5,\"close\":10.5,\"volume\":100,\"symbol\":\"X\"},{\"timestamps\":\"2024-01-02 "
        "09:05\",\"open\":10.5,\"high\":11.5,\"low\":10,\"close\":11,\"volume\":200}]}",
        "{\"pred_len\":1,\"candles\":{\"date\":[\"2024-01-02T09:00:00Z\",\"2024-01-02 09:05\"],"
        "\"open\":[10,10.5],\"high\":[11,11.5],\"low\":[9.5,10],\"close\":[10.5,11],\"volume\":["
        "100,200]}}",
        "{\"pred_len\":1,\"columns\":[\"volume\",\"close\",\"low\",\"high\",\"open\",\"time\"],"
        "\"candles\":[[100,10.5,9.5,11,10,\"2024-01-02 09:00\"],[200,11,10,11.5,10.5,\"2024-01-02 "
        "09:05\"]]}",
        "{\"pred_len\":1,\"candles\":\"timestamps,open,high,low,close,volume\\n2024-01-02 "
        "09:00,10,11,"
        "9.5,10.5,100\\n2024-01-02 09:05,10.5,11.5,10,11,200\\n\"}",
        /* pandas DataFrame.to_json: orient='columns' (its default), 'index', 'split' */
        "{\"pred_len\":1,\"candles\":{\"open\":{\"2024-01-02 09:00\":10,\"2024-01-02 09:05\":10.5},"
        "\"high\":{\"2024-01-02 09:00\":11,\"2024-01-02 09:05\":11.5},\"low\":{\"2024-01-02 "
        "09:00\":9.5,\"2024-01-02 09:05\":10},\"close\":{\"2024-01-02 09:00\":10.5,\"2024-01-02 "
        "09:05\":11},\"volume\":{\"2024-01-02 09:00\":100,\"2024-01-02 09:05\":200}}}",
        "{\"pred_len\":1,\"candles\":{\"2024-01-02 09:00\":{\"open\":10,\"high\":11,\"low\":9.5,"
        "\"close\":10.5,\"volume\":100},\"2024-01-02 09:05\":{\"open\":10.5,\"high\":11.5,"
        "\"low\":10,\"close\":11,\"volume\":200}}}",
        "{\"pred_len\":1,\"candles\":{\"columns\":[\"open\",\"high\",\"low\",\"close\",\"volume\"],"
        "\"index\":[\"2024-01-02 09:00\",\"2024-01-02 09:05\"],\"data\":[[10,11,9.5,10.5,100],"
        "[10.5,11.5,10,11,200]]}}",
    };
    kr_api_request ref = parse_ok(bodies[0]);
    assert_int_equal(ref.candles->has_volume, 1);
    assert_int_equal(ref.candles->has_amount, 0);
    assert_true(ref.candles->values[KR_AMOUNT] == 100.0 * (((10.0 + 11.0) + 9.5) + 10.5) / 4.0);
    for (size_t i = 1; i < sizeof bodies / sizeof bodies[0]; i++) {
        kr_api_request r = parse_ok(bodies[i]);
        assert_int_equal(r.candles->n, 2);
        assert_int_equal(r.candles->has_volume, 1);
        assert_int_equal(r.candles->has_amount, 0);
        assert_memory_equal(r.candles->timestamps, ref.candles->timestamps, 2 * sizeof(int64_t));
        assert_memory_equal(r.candles->values, ref.candles->values, 12 * sizeof(double));
        kr_api_request_free(&r);
    }
    kr_api_request_free(&ref);

    /* Without volume: volume and amount are 0 even when an amount is given. */
    kr_api_request nv =
        parse_ok("{\"pred_len\":1,\"candles\":[{\"timestamps\":\"2024-01-02\",\"open\":1,"
                 "\"high\":2,\"low\":1,\"close\":2,\"amount\":5},{\"timestamps\":"
                 "\"2024-01-03\",\"open\":1,\"high\":2,\"low\":1,\"close\":2}]}");
    assert_int_equal(nv.candles->has_volume, 0);
    assert_int_equal(nv.candles->has_amount, 0);
    assert_true(nv.candles->values[KR_VOLUME] == 0.0 && nv.candles->values[KR_AMOUNT] == 0.0);
    assert_int_equal(nv.candles->date_only, 1);
    assert_string_equal(nv.candles->amount_dropped, "amount");
    kr_api_request_free(&nv);
    /* Named in every layout: columns, and rows of arrays with "columns". */
    nv = parse_ok("{\"pred_len\":1,\"candles\":{\"Date\":[\"2024-01-02\",\"2024-01-03\"],"
                  "\"Open\":[1,1],\"High\":[2,2],\"Low\":[1,1],\"Close\":[2,2],\"Amount\":[5,6]}}");
    assert_string_equal(nv.candles->amount_dropped, "Amount");
    kr_api_request_free(&nv);
    nv = parse_ok("{\"pred_len\":1,\"columns\":[\"timestamps\",\"open\",\"high\",\"low\","
                  "\"close\",\"amount\"],\"candles\":[[\"2024-01-02\",1,2,1,2,5],"
                  "[\"2024-01-03\",1,2,1,2,6]]}");
    assert_string_equal(nv.candles->amount_dropped, "amount");
    kr_api_request_free(&nv);
    kr_api_request with = parse_ok(bodies[1]);
    assert_string_equal(with.candles->amount_dropped, "");
    kr_api_request_free(&with);
}

static void test_request_defaults_and_future(void **state) {
    (void)state;
    kr_api_request r = parse_ok("{\"candles\":[[\"2024-01-02\",1,2,1,2],[\"2024-01-03\",1,2,1,2]],"
                                "\"pred_len\":2,\"seed\":\"18446744073709551615\",\"paths\":null,"
                                "\"future_timestamps\":[\"2024-01-04\",1704499200]}");
    kr_forecast_params d = kr_forecast_default_params();
    assert_int_equal(r.params.paths, 1);
    assert_true(r.params.temperature == d.temperature);
    assert_true(r.params.top_p == d.top_p);
    assert_int_equal(r.params.max_context, d.max_context);
    assert_true(r.params.seed == UINT64_MAX);
    assert_int_equal(r.n_quantiles, 3);
    assert_int_equal(r.return_paths, 0);
    assert_int_equal(r.stream, 0);
    assert_non_null(r.future_timestamps);
    assert_int_equal(r.future_timestamps[1] - r.future_timestamps[0], 86400 * 2);
    kr_series s = kr_api_request_series(&r);
    assert_ptr_equal(s.future_timestamps, r.future_timestamps);
    kr_api_request_free(&r);
}

/* ------------------------------------------------------------------ request: errors */

typedef struct bad_case {
    const char *body;
    const char *field; /* expected err.field */
    const char *needle; /* expected substring of err.message */
} bad_case;

#define ROW0 "[\"2024-01-02 09:30\",10,11,9.5,10.5,100]"
#define ROW1 "[\"2024-01-02 09:35\",10,11,9.5,10.5,100]"
#define OK2 "\"candles\":[" ROW0 "," ROW1 "]"

static const bad_case k_bad[] = {
    { "", "body", "empty" },
    { "{\"pred_len\": 3,", "body", "invalid JSON at line 1" },
    { "{\n\"pred_len\": 3,\n  oops}", "body", "line 3" },
    { "[1,2]", "body", "must be a JSON object" },
    { "{\"pred_len\":3}", "candles", "required" },
    /* pandas frames whose columns (rows) do not hold a value per key, in order */
    { "{\"pred_len\":1,\"candles\":{\"open\":{\"a\":1,\"b\":1},\"high\":{\"a\":1},\"low\":"
      "{\"a\":1,\"b\":1},\"close\":{\"a\":1,\"b\":1}}}",
      "candles", "column 'high' has no value for index key 'b'" },
    { "{\"pred_len\":1,\"candles\":{\"open\":{\"a\":1,\"b\":1},\"high\":{\"b\":1,\"a\":1},"
      "\"low\":{\"a\":1,\"b\":1},\"close\":{\"a\":1,\"b\":1}}}",
      "candles", "in the same order" },
    { "{\"pred_len\":1,\"candles\":{\"open\":{\"a\":1,\"b\":1},\"high\":{\"a\":1,\"b\":1,\"c\":1},"
      "\"low\":{\"a\":1,\"b\":1},\"close\":{\"a\":1,\"b\":1}}}",
      "candles", "column 'high' has an index key 'c'" },
    { "{\"pred_len\":1,\"candles\":{\"open\":{\"a\":1,\"b\":1},\"high\":3,"
      "\"low\":{\"a\":1,\"b\":1},\"close\":{\"a\":1,\"b\":1}}}",
      "candles", "column 'high' must be an object" },
    { "{\"pred_len\":1,\"candles\":{\"r1\":{\"open\":1,\"high\":1,\"low\":1,\"close\":1},"
      "\"r2\":{\"open\":1,\"high\":1,\"low\":1}}}",
      "candles", "row 'r2' has no value for column 'close'" },
    { "{\"pred_len\":1,\"candles\":{\"r1\":{\"open\":1,\"high\":1,\"low\":1,\"close\":1},"
      "\"r2\":{\"open\":1,\"high\":1,\"low\":1,\"close\":1,\"x\":2}}}",
      "candles", "row 'r2' has a column 'x'" },
    { "{\"pred_len\":1,\"candles\":{\"r1\":{\"open\":1,\"high\":1,\"low\":1,\"close\":1},"
      "\"r2\":[1,2]}}",
      "candles", "row 'r2' must be an object" },
    { "{" OK2 "}", "pred_len", "required" },
    { "{" OK2 ",\"pred_length\":3}", "pred_length", "unknown field" },
    { "{" OK2 ",\"pred_len\":3,\"pred_len\":4}", "pred_len", "given twice" },
    { "{" OK2 ",\"pred_len\":0}", "pred_len", "1..2048" },
    { "{" OK2 ",\"pred_len\":2.5}", "pred_len", "integer" },
    { "{" OK2 ",\"pred_len\":\"5\"}", "pred_len", "got a string" },
    { "{" OK2 ",\"pred_len\":600}", "pred_len", "at most max_context (512)" },
    { "{" OK2 ",\"pred_len\":3,\"paths\":100000}", "paths", "1..256" },
    { "{" OK2 ",\"pred_len\":3,\"temperature\":-1}", "temperature", "(0, 1e+06]" },
    { "{" OK2 ",\"pred_len\":3,\"top_p\":0}", "top_p", "(0, 1]" },
    { "{" OK2 ",\"pred_len\":3,\"top_k\":-2}", "top_k", "integer" },
    { "{" OK2 ",\"pred_len\":3,\"window\":\"fast\"}", "window", "'fast'" },
    { "{" OK2 ",\"pred_len\":3,\"seed\":-1}", "seed", "0..2^53" },
    { "{" OK2 ",\"pred_len\":3,\"seed\":\"12a\"}", "seed", "not an unsigned 64-bit" },
    { "{" OK2 ",\"pred_len\":3,\"seed\":\"18446744073709551616\"}", "seed", "not an unsigned" },
    { "{" OK2 ",\"pred_len\":3,\"lookback\":5}", "lookback", "exceeds the 2 candles" },
    { "{" OK2 ",\"pred_len\":3,\"max_context\":0}", "max_context", "1..2048" },
    /* a window whose attention would hold the engine for minutes (60,000 rows took 120 s) */
    { "{" OK2 ",\"pred_len\":3,\"max_context\":65536}", "max_context", "1..2048, got 65536" },
    { "{" OK2 ",\"pred_len\":3,\"return_paths\":\"yes\"}", "return_paths", "true or false" },
    { "{" OK2 ",\"pred_len\":3,\"stream\":1}", "stream", "true or false" },
    { "{" OK2 ",\"pred_len\":3,\"timeout_s\":0}", "timeout_s", "(0, 86400]" },
    { "{" OK2 ",\"pred_len\":1,\"quantiles\":[0.1,1.5]}", "quantiles[1]", "[0, 1]" },
    { "{" OK2 ",\"pred_len\":1,\"quantiles\":0.5}", "quantiles", "array" },
    { "{" OK2 ",\"pred_len\":2,\"future_timestamps\":[\"2024-01-03\"]}", "future_timestamps",
      "has 1 timestamps, pred_len is 2" },
    { "{" OK2 ",\"pred_len\":1,\"future_timestamps\":[\"2024-01-02 09:35\"]}",
      "future_timestamps[0]", "not after the last candle" },
    { "{" OK2 ",\"pred_len\":2,\"future_timestamps\":[\"2024-01-03\",\"2024-01-03\"]}",
      "future_timestamps[1]", "not after the previous" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 "]}", "candles", "needs 2.." },
    { "{\"pred_len\":1,\"candles\":[]}", "candles", "got 0" },
    { "{\"pred_len\":1,\"candles\":5}", "candles", "got a number" },
    { "{\"pred_len\":1,\"candles\":[1,2]}", "candles[0]", "got a number" },
    { "{\"pred_len\":1,\"candles\":[[1,2,3],[1,2,3]]}", "candles[0]", "has 3 values" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9.5,10.5]]}", "candles[1]",
      "has 5 values, expected 6" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",{\"open\":1}]}", "candles[1]", "must be an array" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,9.1,9.3,9.2,1]]}",
      "candles[1].high", "9.1 is below low 9.3" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",-10,11,9,10,1]]}",
      "candles[1].open", "must be positive" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9,0,1]]}",
      "candles[1].close", "must be positive" },
    /* > 0 in double, 0 in the float32 the model reads */
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",1e-320,11,9,10,1]]}",
      "candles[1].open", "must be positive (in float32" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9,10,-1]]}",
      "candles[1].volume", "non-negative" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9,\"10\",1]]}",
      "candles[1].close", "must be a number, got a string" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9,null,1]]}",
      "candles[1].close", "got null" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9,1e999,1]]}",
      "candles[1].close", "not finite" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,1e39,9,10,1]]}",
      "candles[1].high", "out of range" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-01-02 09:35\",10,11,9,10,1e38]]}",
      "candles[1].volume", "derived amount" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 "," ROW1 ",[\"2024-01-02 09:35\",10,11,9,10,1]]}",
      "candles[2].timestamps", "repeats" },
    { "{\"pred_len\":1,\"candles\":[" ROW1 "," ROW0 "]}", "candles[1].timestamps", "is before" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"2024-13-02\",10,11,9,10,1]]}",
      "candles[1].timestamps", "cannot parse '2024-13-02'" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[12345,10,11,9,10,1]]}", "candles[1].timestamps",
      "12345 is not an epoch" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[1704067200123.5,10,11,9,10,1]]}",
      "candles[1].timestamps", "1704067200123.5 is not an epoch" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[20240103.5,10,11,9,10,1]]}", "candles[1].timestamps",
      "20240103.5 is not an epoch" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"1704067200123.5\",10,11,9,10,1]]}",
      "candles[1].timestamps", "a fraction on a count of 13 digits (milliseconds)" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"1.7041536e9\",10,11,9,10,1]]}",
      "candles[1].timestamps", "8 significant digits" },
    { "{\"pred_len\":1,\"candles\":{\"columns\":[\"open\",\"high\",\"low\",\"close\"],"
      "\"index\":[\"2024-01-01\",\"2024-01-02\",\"2024-01-03\"],\"data\":[[1,2,0.5,1],[1,2,"
      "0.5,1]]}}",
      "candles", "\"index\" has 3 entries but its \"data\" 2 rows" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[\"9999-12-20\",10,11,9,10,1]]}",
      "candles[1].timestamps", "'9999-12-20' is outside the years 1900-2200" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[9999999999,10,11,9,10,1]]}", "candles[1].timestamps",
      "9999999999 is outside the years 1900-2200" },
    { "{\"pred_len\":1,\"candles\":\"timestamps,open,high,low,close\\n2024-01-02,1,2,1,1\\n2924-01-"
      "03,1,2,1,1\\n\"}",
      "candles", "candles: line 3, column 'timestamps': '2924-01-03' is outside the years" },
    { "{\"pred_len\":1,\"candles\":[" ROW0 ",[true,10,11,9,10,1]]}", "candles[1].timestamps",
      "got a boolean" },
    { "{\"pred_len\":1,\"candles\":[{\"timestamps\":\"2024-01-02\",\"open\":1,\"high\":2,\"low\":1,"
      "\"close\":1},{\"timestamps\":\"2024-01-03\",\"open\":1,\"high\":2,\"low\":1}]}",
      "candles[1].close", "required" },
    { "{\"pred_len\":1,\"candles\":[{\"timestamps\":\"2024-01-02\",\"open\":1,\"high\":2,\"low\":1,"
      "\"close\":1},{\"timestamps\":\"2024-01-03\",\"open\":1,\"high\":2,\"low\":1,\"close\":1,"
      "\"volume\":5}]}",
      "candles[1].volume", "first row has no volume" },
    { "{\"pred_len\":1,\"candles\":[{\"date\":\"2024-01-02\",\"time\":\"2024-01-02\",\"open\":1}]}",
      "candles", "needs 2" },
    { "{\"pred_len\":1,\"candles\":[{\"date\":\"2024-01-02\",\"time\":\"2024-01-02\",\"open\":1},{}"
      "]}",
      "candles[0].time", "same field as 'date'" },
    { "{\"pred_len\":1,\"candles\":{\"timestamps\":[\"2024-01-02\",\"2024-01-03\"],\"open\":[1,1],"
      "\"high\":[2,2],\"low\":[1,1],\"close\":[1]}}",
      "candles.close", "has 1 values, the other columns 2" },
    { "{\"pred_len\":1,\"candles\":{\"timestamps\":[\"2024-01-02\",\"2024-01-03\"],\"open\":[1,1],"
      "\"high\":[2,0.5],\"low\":[1,1],\"close\":[1,1]}}",
      "candles.high[1]", "0.5 is below low 1" },
    { "{\"pred_len\":1,\"candles\":{\"timestamps\":[\"2024-01-02\",\"2024-01-03\"],\"open\":[1,1],"
      "\"high\":[2,2],\"low\":[1,1]}}",
      "candles", "missing the 'close' column" },
    { "{\"pred_len\":1,\"columns\":[\"timestamps\",\"open\",\"high\",\"low\",\"volume\"],"
      "\"candles\":["
      "[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1]]}",
      "columns", "missing the 'close' column" },
    { "{\"pred_len\":1,\"columns\":[\"timestamps\",\"open\",\"high\",\"low\",\"close\"],"
      "\"candles\":{}}",
      "columns", "only applies" },
    { "{\"pred_len\":1,\"columns\":[\"timestamps\",\"open\",\"high\",\"low\",\"close\"],"
      "\"candles\":"
      "[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1]]}",
      "candles[1]", "one per \"columns\" entry" },
    { "{\"pred_len\":1,\"candles\":\"timestamps,open,high,low,close\\n2024-01-02,1,2,1,1\\n2024-01-"
      "03,"
      "1,0.5,1,1\\n\"}",
      "candles", "candles: line 3, column 'high'" },
};

static void test_request_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        const bad_case *c = &k_bad[i];
        kr_api_request r;
        kr_api_error e;
        memset(&r, 0x5a, sizeof r); /* the parser must reset it */
        kr_status st = kr_api_forecast_parse(c->body, strlen(c->body), NULL, &r, &e);
        if (st == KR_OK) fail_msg("case %zu accepted: %s", i, c->body);
        assert_int_equal(e.status, 400);
        if (strcmp(e.field, c->field) != 0)
            fail_msg("case %zu: field '%s', expected '%s' (message: %s)", i, e.field, c->field,
                     e.message);
        if (!strstr(e.message, c->needle))
            fail_msg("case %zu: message '%s' lacks '%s'", i, e.message, c->needle);
        /* Messages start with the field they name, so a human reads the place first. */
        if (e.field[0] && strncmp(e.message, e.field, strlen(e.field)) != 0)
            fail_msg("case %zu: message '%s' does not start with '%s'", i, e.message, e.field);
        assert_null(r.candles);
        assert_null(r.future_timestamps);
    }
}

static void test_request_limits(void **state) {
    (void)state;
    kr_api_limits lim = kr_api_default_limits();
    lim.max_paths = 4;
    lim.max_pred_len = 8;
    lim.max_rows = 3;
    const char *rows4 =
        "{\"pred_len\":1,\"candles\":[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1],"
        "[\"2024-01-04\",1,2,1,1],[\"2024-01-05\",1,2,1,1]]}";
    kr_api_request r;
    kr_api_error e;
    assert_int_not_equal(kr_api_forecast_parse(rows4, strlen(rows4), &lim, &r, &e), KR_OK);
    assert_string_equal(e.field, "candles");
    /* pandas frames are counted before they are rebuilt as rows: rows against max_rows, and
     * columns, however many cells a body leaves out. A 78 KB body of 4000 keys x 4000 empty
     * columns once took 1.3 GB to be refused; a 2 MB one of two disjoint columns a minute. */
    const char *pd_rows4 =
        "{\"pred_len\":1,\"candles\":{\"open\":{\"a\":1,\"b\":1,\"c\":1,\"d\":1}}}";
    assert_int_not_equal(kr_api_forecast_parse(pd_rows4, strlen(pd_rows4), &lim, &r, &e), KR_OK);
    assert_string_equal(e.field, "candles");
    assert_non_null(strstr(e.message, "got 4"));
    {
        enum { C = 4000 };
        kr_sb sb = { 0 };
        kr_sb_append(&sb, "{\"pred_len\":1,\"candles\":{\"0\":{");
        for (int i = 0; i < C; i++) kr_sb_appendf(&sb, "%s\"c%d\":1", i ? "," : "", i);
        kr_sb_append(&sb, "}");
        for (int i = 1; i < C; i++) kr_sb_appendf(&sb, ",\"%d\":{}", i);
        kr_sb_append(&sb, "}}");
        assert_false(sb.oom);
        kr_api_limits big = kr_api_default_limits();
        assert_int_not_equal(kr_api_forecast_parse(sb.data, sb.len, &big, &r, &e), KR_OK);
        assert_string_equal(e.field, "candles");
        if (!strstr(e.message, "4001 columns")) fail_msg("%s", e.message);
        kr_sb_free(&sb);
    }
    const char *paths = "{\"pred_len\":1,\"paths\":5," OK2 "}";
    assert_int_not_equal(kr_api_forecast_parse(paths, strlen(paths), &lim, &r, &e), KR_OK);
    assert_string_equal(e.field, "paths");
    const char *pl = "{\"pred_len\":9," OK2 "}";
    assert_int_not_equal(kr_api_forecast_parse(pl, strlen(pl), &lim, &r, &e), KR_OK);
    assert_string_equal(e.field, "pred_len");
    /* Not NUL-terminated input: only len bytes are read. */
    char buf[64];
    const char *ok = "{\"pred_len\":1," OK2 "}";
    size_t n = strlen(ok);
    char *heap = malloc(n);
    memcpy(heap, ok, n);
    assert_int_equal(kr_api_forecast_parse(heap, n, &lim, &r, &e), KR_OK);
    kr_api_request_free(&r);
    free(heap);
    snprintf(buf, sizeof buf, "{}");
    assert_int_not_equal(kr_api_forecast_parse(buf, 1, &lim, &r, &e), KR_OK);
    assert_string_equal(e.field, "body");
}

/* ------------------------------------------------------------------ responses */

static kr_model *load_demo(void) {
    kr_model *m = kr_test_demo_model(NULL);
    assert_non_null(m);
    return m;
}

static void test_response_forecast_json(void **state) {
    (void)state;
    kr_model *m = load_demo();
    kr_candles *c = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_read_csv(KR_SOURCE_DIR "/data/XSHG_5min_600977.csv", &c, &err),
                     KR_OK);
    kr_api_request req;
    memset(&req, 0, sizeof req);
    req.candles = c;
    req.params = kr_forecast_default_params();
    req.params.pred_len = 12;
    req.params.paths = 8;
    req.params.lookback = 64;
    req.params.seed = 5;
    req.params.keep_paths = 1;
    req.quantiles[0] = 0.1;
    req.quantiles[1] = 0.9;
    req.n_quantiles = 2;
    kr_series s = kr_candles_slice(c, 0, 100);
    kr_forecast *fc = NULL;
    kr_context *ctx = kr_test_context(m, 2, NULL);
    assert_int_equal(kr_forecast_run(ctx, &s, &req.params, &fc, &err), KR_OK);
    kr_context_free(ctx);
    kr_api_model_desc md = { "kronos-demo", "f32", "f32", { 0 }, NULL };
    kr_model_get_info(m, &md.info);
    kr_api_usage u = { 7, 64, 0, 96, 0.01, 0.02, 0.03 };

    for (int rp = 0; rp <= 1; rp++) {
        req.return_paths = rp;
        char *json = NULL;
        size_t len = 0;
        assert_int_equal(kr_api_forecast_json(&req, fc, &u, &md, &json, &len, &err), KR_OK);
        assert_int_equal(len, strlen(json));
        cJSON *root = cJSON_Parse(json);
        assert_non_null(root);
        assert_string_equal(cJSON_GetObjectItem(root, "id")->valuestring, "fc-7");
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "name")->valuestring,
            "kronos-demo");
        cJSON *mean = cJSON_GetObjectItem(root, "mean");
        assert_int_equal(cJSON_GetArraySize(mean), 12);
        /* Every value reads back bit for bit (cJSON's own printer can be one ulp off). */
        static const char *k_cols[] = { "open", "high", "low", "close", "volume", "amount" };
        const double *mv = kr_forecast_mean(fc);
        for (int i = 0; i < 12; i++) {
            cJSON *row = cJSON_GetArrayItem(mean, i);
            assert_true(cJSON_IsString(cJSON_GetObjectItem(row, "timestamps")));
            for (int k = 0; k < 6; k++)
                if (cJSON_GetObjectItem(row, k_cols[k])->valuedouble != mv[i * 6 + k])
                    fail_msg("mean[%d].%s: %.17g in JSON, %.17g in the result", i, k_cols[k],
                             cJSON_GetObjectItem(row, k_cols[k])->valuedouble, mv[i * 6 + k]);
        }
        cJSON *q = cJSON_GetObjectItem(root, "quantiles");
        assert_int_equal(cJSON_GetArraySize(q), 2);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(q, "0.9")), 12);
        cJSON *params = cJSON_GetObjectItem(root, "params");
        assert_true(cJSON_GetObjectItem(params, "top_p")->valuedouble == 0.9);
        cJSON *usage = cJSON_GetObjectItem(root, "usage");
        assert_int_equal(cJSON_GetObjectItem(usage, "prefill_tokens")->valuedouble, 64);
        assert_int_equal(cJSON_GetObjectItem(usage, "generated_tokens")->valuedouble, 96);
        /* Tokens and the forecast's own timings come from its stats (as in the CLI's JSON);
         * queue and TTFT, which only the scheduler knows, from the usage. */
        kr_forecast_stats fs;
        kr_forecast_get_stats(fc, &fs);
        assert_int_equal(cJSON_GetObjectItem(usage, "decode_tokens")->valuedouble,
                         fs.decode_tokens);
        cJSON *timing = cJSON_GetObjectItem(root, "timing");
        assert_true(cJSON_GetObjectItem(timing, "total_seconds")->valuedouble == fs.seconds_total);
        assert_true(cJSON_GetObjectItem(timing, "queue_seconds")->valuedouble == 0.01);
        assert_true(cJSON_GetObjectItem(timing, "ttft_seconds")->valuedouble == 0.02);
        /* The step profile rides along in timing (on by default in a context). */
        cJSON *gemm = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(timing, "profile"), "parts"), "gemm");
        assert_non_null(gemm);
        assert_true(fabs(cJSON_GetObjectItem(gemm, "gflop")->valuedouble -
                         fs.profile.part[KR_PART_GEMM].flops * 1e-9) <=
                    1e-5 * fs.profile.part[KR_PART_GEMM].flops * 1e-9);
        cJSON *paths = cJSON_GetObjectItem(root, "paths");
        if (!rp) {
            assert_null(paths);
        } else {
            assert_int_equal(cJSON_GetArraySize(paths), 8);
            for (int p = 0; p < 8; p++) {
                cJSON *pj = cJSON_GetArrayItem(paths, p);
                assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(pj, "s1")), 12);
                assert_int_equal(cJSON_GetObjectItem(pj, "s2")->child->valuedouble,
                                 kr_forecast_path_s2(fc, p)[0]);
                cJSON *pc = cJSON_GetObjectItem(pj, "candles");
                assert_int_equal(cJSON_GetArraySize(pc), 12);
                for (int i = 0; i < 12; i++)
                    for (int k = 0; k < 6; k++)
                        if (cJSON_GetObjectItem(cJSON_GetArrayItem(pc, i), k_cols[k])
                                ->valuedouble != kr_forecast_path(fc, p)[i * 6 + k])
                            fail_msg("paths[%d].candles[%d].%s differs from the result", p, i,
                                     k_cols[k]);
            }
        }
        cJSON_Delete(root);
        free(json);
    }
    kr_forecast_free(fc);
    kr_candles_free(c);
    kr_model_free(m);
}

static void test_response_error_and_models(void **state) {
    (void)state;
    char *e = kr_api_error_json(400, "candles[17].high: 9.1 is below low 9.3", "candles[17].high");
    cJSON *root = cJSON_Parse(e);
    cJSON *err = cJSON_GetObjectItem(root, "error");
    assert_int_equal(cJSON_GetObjectItem(err, "code")->valuedouble, 400);
    assert_string_equal(cJSON_GetObjectItem(err, "field")->valuestring, "candles[17].high");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring,
                        "candles[17].high: 9.1 is below low 9.3");
    cJSON_Delete(root);
    free(e);
    e = kr_api_error_json(404, "no such route", NULL);
    assert_null(strstr(e, "field"));
    free(e);

    kr_api_model_desc md = { "kronos-demo", "f32", "f32", { 0 }, NULL };
    md.info.d_model = 128;
    char *ms = kr_api_models_json(&md, NULL);
    root = cJSON_Parse(ms);
    cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0);
    assert_string_equal(cJSON_GetObjectItem(m0, "id")->valuestring, "kronos-demo");
    assert_int_equal(cJSON_GetObjectItem(m0, "d_model")->valuedouble, 128);
    /* No language model: "narrative" is there, null (a client need not guess from absence). */
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(root, "narrative")));
    cJSON_Delete(root);
    free(ms);
    ms = kr_api_models_json(&md, "gemma3");
    root = cJSON_Parse(ms);
    const cJSON *nm = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "narrative"), "model");
    assert_true(cJSON_IsString(nm));
    assert_string_equal(nm->valuestring, "gemma3");
    cJSON_Delete(root);
    free(ms);

    assert_int_equal(kr_api_http_status(KR_ERR_BUSY), 429);
    assert_int_equal(kr_api_http_status(KR_ERR_TIMEOUT), 504);
    assert_int_equal(kr_api_http_status(KR_ERR_INVALID_ARG), 400);
    assert_int_equal(kr_api_http_status(KR_ERR_CANCELLED), 499);
    assert_int_equal(kr_api_http_status(KR_ERR_INTERNAL), 500);
    assert_string_equal(kr_api_reason(413), "Payload Too Large");
}

/* ------------------------------------------------------------------ router, auth */

static void test_router(void **state) {
    (void)state;
    const kr_route *r;
    assert_int_equal(kr_route_match("POST", "/v1/forecast", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_FORECAST);
    assert_true(r->v1);
    assert_int_equal(kr_route_match("GET", "/v1/forecast", &r), 405);
    assert_string_equal(r->method, "POST");
    assert_int_equal(kr_route_match("GET", "/health", &r), 200);
    assert_false(r->v1);
    assert_int_equal(kr_route_match("HEAD", "/ready", &r), 200);
    assert_int_equal(kr_route_match("DELETE", "/metrics", &r), 405);
    assert_int_equal(kr_route_match("GET", "/v1/models?x=1", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_MODELS);
    assert_int_equal(kr_route_match("GET", "/v1/models/", &r), 404);
    assert_null(r);
    assert_int_equal(kr_route_match("GET", "/", &r), 200); /* the web page (static_files.c) */
    assert_int_equal(kr_route_match("GET", "/healthz", &r), 404);
    assert_string_equal(kr_route_label(NULL), "other");
    kr_route_match("POST", "/v1/forecast", &r);
    assert_string_equal(kr_route_label(r), "/v1/forecast");
}

static void test_auth(void **state) {
    (void)state;
    assert_true(kr_auth_check("Bearer s3cret", "s3cret"));
    assert_true(kr_auth_check("bearer   s3cret  ", "s3cret"));
    assert_false(kr_auth_check("Bearer s3cre", "s3cret"));
    assert_false(kr_auth_check("Bearer s3cret2", "s3cret"));
    assert_false(kr_auth_check("Basic s3cret", "s3cret"));
    assert_false(kr_auth_check("Bearers3cret", "s3cret"));
    assert_false(kr_auth_check("Bearer ", "s3cret"));
    assert_false(kr_auth_check(NULL, "s3cret"));
    assert_true(kr_auth_check(NULL, "")); /* no key configured: open */
    assert_true(kr_auth_equal("abc", 3, "abc", 3));
    assert_false(kr_auth_equal("abd", 3, "abc", 3));
    assert_false(kr_auth_equal("ab", 2, "abc", 3));
    assert_false(kr_auth_equal("abcd", 4, "abc", 3));

    const char *tmp = kr_test_fresh_dir();
    char path[4200], key[64];
    kr_error err = { 0 };
    snprintf(path, sizeof path, "%s/key", tmp);
    assert_int_equal(kr_test_write_file(path, "  k-123 \n second line\n", 23), 0);
    assert_int_equal(kr_auth_load_key_file(path, key, sizeof key, &err), KR_OK);
    assert_string_equal(key, "k-123");
    assert_int_equal(kr_test_write_file(path, " \n", 2), 0);
    assert_int_not_equal(kr_auth_load_key_file(path, key, sizeof key, &err), KR_OK);
    assert_non_null(strstr(err.message, "empty"));
    assert_int_equal(kr_test_write_file(path, "a\tb\n", 4), 0);
    assert_int_not_equal(kr_auth_load_key_file(path, key, sizeof key, &err), KR_OK);
    assert_non_null(strstr(err.message, "control character"));
    unlink(path);
    assert_int_not_equal(kr_auth_load_key_file(path, key, sizeof key, &err), KR_OK);
    assert_int_equal(err.status, KR_ERR_IO);
    rmdir(tmp);
}

/* ------------------------------------------------------------------ config */

static void test_config_file(void **state) {
    (void)state;
    kr_server_config c;
    kr_server_config_defaults(&c);
    assert_string_equal(c.host, "127.0.0.1");
    assert_int_equal(c.port, 8080);
    assert_int_equal(c.max_body_bytes, 8 << 20);
    assert_true(c.request_timeout_s == 120.0);
    const char *doc =
        "{\"host\":\"0.0.0.0\",\"port\":0,\"threads\":2,\"kv_budget\":\"64MiB\",\"tune\":false,"
        "\"request_timeout_s\":30,\"max_body_bytes\":65536,\"batch_wait_ms\":10,"
        "\"max_batch_tokens\":2048,\"max_queue\":8,\"max_running\":4,\"target_queue_p95_s\":0.2,"
        "\"target_ttft_p95_s\":1,\"static_batching\":true,\"prefix_cache\":false,\"no_mmap\":true,"
        "\"backfill\":false,"
        "\"profiles\":[{\"name\":\"session\",\"from\":\"09:30\",\"to\":\"16:00\",\"batch_wait_ms\":"
        "20},"
        "{\"name\":\"night\",\"from\":\"22:00\",\"to\":\"06:00\",\"max_running\":2,"
        "\"target_ttft_p95_s\":5}]}";
    kr_error err = { 0 };
    assert_int_equal(kr_server_config_parse(doc, strlen(doc), "test.json", &c, &err), KR_OK);
    assert_string_equal(c.host, "0.0.0.0");
    assert_int_equal(c.port, 0);
    assert_int_equal(c.threads, 2);
    assert_int_equal(c.sched.kv_budget_bytes, 64 << 20);
    assert_int_equal(c.sched.tune, 0);
    assert_int_equal(c.sched.static_batching, 1);
    assert_int_equal(c.sched.prefix_cache, 0);
    assert_int_equal(c.sched.backfill, 0);
    assert_int_equal(c.no_mmap, 1);
    assert_int_equal(c.sched.batch_wait_ms, 10);
    assert_int_equal(c.sched.max_queue, 8);
    assert_int_equal(c.max_body_bytes, 65536);
    assert_int_equal(c.n_profiles, 2);

    /* Profile lookup, including one that wraps midnight. */
    assert_null(kr_server_profile_at(&c, 9 * 60 + 29));
    assert_string_equal(kr_server_profile_at(&c, 9 * 60 + 30)->name, "session");
    assert_string_equal(kr_server_profile_at(&c, 15 * 60 + 59)->name, "session");
    assert_null(kr_server_profile_at(&c, 16 * 60));
    assert_string_equal(kr_server_profile_at(&c, 23 * 60)->name, "night");
    assert_string_equal(kr_server_profile_at(&c, 3 * 60)->name, "night");
    kr_context_params eff = kr_server_profile_apply(&c.sched, kr_server_profile_at(&c, 600));
    assert_int_equal(eff.batch_wait_ms, 20);
    assert_int_equal(eff.max_running, 4); /* kept */
    eff = kr_server_profile_apply(&c.sched, kr_server_profile_at(&c, 60));
    assert_int_equal(eff.max_running, 2);
    assert_true(eff.target_ttft_p95_s == 5.0);
    assert_int_equal(eff.batch_wait_ms, 10);

    /* Every key a profile holds applies: static batching and the tight latency mode too. */
    int minute = -1;
    kr_server_config_defaults(&c);
    const char *doc2 =
        "{\"batch_wait_ms\":80,\"timezone\":\"America/New_York\",\"profiles\":["
        "{\"name\":\"live\",\"from\":\"09:30\",\"to\":\"16:00\",\"latency_mode\":\"tight\","
        "\"max_running\":1,\"max_queue\":7},"
        "{\"name\":\"batch\",\"from\":\"20:00\",\"to\":\"06:00\",\"static_batching\":true,"
        "\"max_running\":32,\"latency_mode\":\"normal\"}]}";
    if (kr_server_config_parse(doc2, strlen(doc2), "cfg", &c, &err) != KR_OK)
        fail_msg("%s", err.message);
    eff = kr_server_profile_apply(&c.sched, kr_server_profile_at(&c, 10 * 60));
    assert_int_equal(eff.batch_wait_ms, KR_TIGHT_WAIT_MS);
    assert_int_equal(eff.max_running, 1);
    assert_int_equal(eff.max_queue, 7);
    assert_int_equal(eff.static_batching, 0);
    eff = kr_server_profile_apply(&c.sched, kr_server_profile_at(&c, 22 * 60));
    assert_int_equal(eff.static_batching, 1);
    assert_int_equal(eff.max_running, 32);
    assert_int_equal(eff.batch_wait_ms, 80);
    /* New York in July is UTC-4, in December UTC-5. */
    assert_int_equal(
        kr_server_profile_minute(&c, 1783000800 /* 2026-07-02 14:00 UTC */, &minute, &err), KR_OK);
    assert_int_equal(minute, 10 * 60);
    assert_int_equal(
        kr_server_profile_minute(&c, 1796137200 /* 2026-12-01 15:00 UTC */, &minute, &err), KR_OK);
    assert_int_equal(minute, 10 * 60);
    /* A top-level tight mode shortens the base wait unless the file sets one. */
    kr_server_config_defaults(&c);
    assert_int_equal(kr_server_config_parse("{\"latency_mode\":\"tight\"}", 25, "cfg", &c, &err),
                     KR_OK);
    assert_int_equal(c.sched.batch_wait_ms, KR_TIGHT_WAIT_MS);

    /* The example shipped in deploy/ stays valid. */
    kr_server_config_defaults(&c);
    if (kr_server_config_load(KR_SOURCE_DIR "/deploy/kronos-serve.json", &c, &err) != KR_OK)
        fail_msg("%s", err.message);
    assert_int_equal(c.n_profiles, 4);
    assert_string_equal(kr_server_profile_zone(&c), "Asia/Shanghai");
    /* The brief, sentence by sentence (issue 41):
     * "session = larger batches and longer waits" (throughput at the peak), */
    const kr_server_profile *sp = kr_server_profile_at(&c, 10 * 60);
    assert_string_equal(sp->name, "session");
    const kr_context_params session = kr_server_profile_apply(&c.sched, sp);
    assert_true(!sp->latency_tight && session.batch_wait_ms >= 50 && session.batch_wait_ms <= 100);
    assert_int_equal(session.static_batching, 0);
    assert_true(session.max_running > c.sched.max_running);
    assert_true(session.max_batch_tokens > c.sched.max_batch_tokens);
    /* "pre/post-market = smaller batches, short waits" (latency: warm-up, analysis), */
    static const int quiet_minutes[] = { 9 * 60, 16 * 60 };
    static const char *const quiet_names[] = { "pre-market", "post-market" };
    for (int k = 0; k < 2; k++) {
        sp = kr_server_profile_at(&c, quiet_minutes[k]);
        assert_string_equal(sp->name, quiet_names[k]);
        eff = kr_server_profile_apply(&c.sched, sp);
        assert_int_equal(eff.static_batching, 0);
        assert_true(eff.batch_wait_ms <= KR_TIGHT_WAIT_MAX_MS);
        assert_true(eff.batch_wait_ms < session.batch_wait_ms);
        assert_true(eff.max_running < session.max_running);
        assert_true(eff.max_batch_tokens < session.max_batch_tokens);
    }
    /* "offline scoring (backtest jobs, /v1/analyze/batch, forecast --batch-size) = static
     * batches of 32-64 with a long wait, whatever the time of day": its keys are top-level (no
     * profile can set them), the batch 32-64 rows, the wait longer than any profile's. */
    assert_true(c.batch_size >= 32 && c.batch_size <= 64);
    assert_true(KR_STATIC_BATCH_ROWS_DEFAULT >= 32 && KR_STATIC_BATCH_ROWS_DEFAULT <= 64);
    for (int m = 0; m < 24 * 60; m++) {
        sp = kr_server_profile_at(&c, m);
        assert_non_null(sp); /* every minute of the day has a profile */
        eff = kr_server_profile_apply(&c.sched, sp);
        assert_true(c.offline_batch_wait_ms >= 4 * eff.batch_wait_ms);
        assert_true(c.offline_batch_wait_ms >= 200);
    }
    /* and overnight, few clients: a tight wait. */
    sp = kr_server_profile_at(&c, 2 * 60);
    assert_string_equal(sp->name, "overnight");
    eff = kr_server_profile_apply(&c.sched, sp);
    assert_true(sp->latency_tight && eff.batch_wait_ms <= KR_TIGHT_WAIT_MAX_MS);
    assert_int_equal(eff.static_batching, 0);
    /* The profiles' clock is the market's: 01:45 UTC is 09:45 in Shanghai (session). */
    assert_int_equal(
        kr_server_profile_minute(&c, 1796089500 /* 2026-12-01 01:45 UTC */, &minute, &err), KR_OK);
    assert_int_equal(minute, 9 * 60 + 45);
    assert_string_equal(kr_server_profile_at(&c, minute)->name, "session");

    /* A file on disk. */
    const char *tmp = kr_test_fresh_dir();
    char path[4200];
    snprintf(path, sizeof path, "%s/serve.json", tmp);
    assert_int_equal(kr_test_write_file(path, "{\"port\": 9000}", 14), 0);
    kr_server_config_defaults(&c);
    assert_int_equal(kr_server_config_load(path, &c, &err), KR_OK);
    assert_int_equal(c.port, 9000);
    unlink(path);
    assert_int_not_equal(kr_server_config_load(path, &c, &err), KR_OK);
    assert_non_null(strstr(err.message, path));
    rmdir(tmp);
}

static void test_config_errors(void **state) {
    (void)state;
    static const struct {
        const char *doc, *needle;
    } k_cases[] = {
        { "{\"prot\":1}", "cfg: prot: unknown key" },
        { "{\"port\":70000}", "cfg: port: must be an integer in 0..65535" },
        { "{\"port\":\"80\"}", "port: must be an integer" },
        { "{\"batch_wait_ms\":-1}", "batch_wait_ms" },
        { "{\"quant\":\"int4\"}", "quant: 'int4' is not one of f32, bf16, int8, fp8, q4" },
        { "{\"kv_dtype\":\"f16\"}", "kv_dtype: 'f16' is not one of f32, bf16, int8" },
        { "{\"drift_sample\":1.5}", "drift_sample: must be a number in [0, 1]" },
        { "{\"drift_kv_share\":0}", "drift_kv_share: must be a number in (0, 0.9]" },
        { "{\"drift_kv_share\":0.95}", "drift_kv_share: must be a number in (0, 0.9]" },
        { "{\"tune\":1}", "tune: must be true or false" },
        { "{\"request_timeout_s\":0}", "request_timeout_s: must be a number in (0, 86400]" },
        { "{\"max_body_bytes\":10}", "max_body_bytes" },
        { "{\"kv_budget\":\"95%\"}", "max 90%" },
        { "{\"kv_budget\":\"12 parsecs\"}", "kv_budget" },
        { "{\"kv_budget\":true}", "kv_budget" },
        /* The engine's range (kr_context_create refuses 0): --check-config must not pass it. */
        { "{\"max_queue\":0}", "max_queue: must be an integer in 1..1048576" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\",\"max_queue\":0}]}",
          "profiles[0].max_queue" },
        { "{\"host\":\"\"}", "host: must not be empty" },
        { "{\"port\":1,\"port\":2}", "port: duplicate key" },
        { "[1]", "top level must be a JSON object" },
        { "{\"port\":", "invalid JSON" },
        { "{\"profiles\":{}}", "profiles: must be an array" },
        { "{\"latency_mode\":\"fast\"}", "latency_mode: must be \"normal\" or \"tight\"" },
        { "{\"latency_mode\":\"tight\",\"batch_wait_ms\":50}", "allows at most 20 ms" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\","
          "\"latency_mode\":\"tight\",\"batch_wait_ms\":25}]}",
          "profiles[0].batch_wait_ms: latency_mode \"tight\" allows at most 20 ms" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\","
          "\"static_batching\":1}]}",
          "profiles[0].static_batching: must be true or false" },
        { "{\"timezone\":\"Mars/Olympus\"}", "timezone: time zone 'Mars/Olympus'" },
        { "{\"market\":\"LSE\"}", "market" },
        { "{\"llm_url\":\"ftp://x\"}", "llm_url: " },
        { "{\"tune_window_s\":0}", "tune_window_s" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"9:30\",\"to\":\"10:00\"}]}",
          "profiles[0].from: must be a local time" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"24:00\",\"to\":\"10:00\"}]}",
          "profiles[0].from" },
        { "{\"profiles\":[{\"from\":\"09:00\",\"to\":\"10:00\"}]}",
          "profiles[0]: needs a \"name\"" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\"}]}", "needs \"from\" and \"to\"" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"09:00\"}]}",
          "would cover no time" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\",\"port\":1}]}",
          "profiles[0].port: unknown profile key" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\",\"batch_wait_ms\":-5}"
          "]}",
          "profiles[0].batch_wait_ms" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\"},"
          "{\"name\":\"b\",\"from\":\"09:59\",\"to\":\"11:00\"}]}",
          "profiles[1]: overlaps profile 'a' at 09:59" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"22:00\",\"to\":\"02:00\"},"
          "{\"name\":\"b\",\"from\":\"01:00\",\"to\":\"03:00\"}]}",
          "overlaps profile 'a' at 01:00" },
        { "{\"profiles\":[{\"name\":\"a\",\"from\":\"09:00\",\"to\":\"10:00\"},"
          "{\"name\":\"a\",\"from\":\"11:00\",\"to\":\"12:00\"}]}",
          "duplicate profile name" },
        { "{\"profiles\":[{\"name\":\"a b\",\"from\":\"09:00\",\"to\":\"10:00\"}]}",
          "profiles[0].name" },
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        kr_server_config c;
        kr_server_config_defaults(&c);
        kr_error err = { 0 };
        if (kr_server_config_parse(k_cases[i].doc, strlen(k_cases[i].doc), "cfg", &c, &err) ==
            KR_OK)
            fail_msg("case %zu accepted: %s", i, k_cases[i].doc);
        if (!strstr(err.message, k_cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.message, k_cases[i].needle);
        if (strncmp(err.message, "cfg: ", 5) != 0)
            fail_msg("case %zu: '%s' does not name the file", i, err.message);
    }
}

static void test_kv_budget_and_clock(void **state) {
    (void)state;
    size_t b = 0;
    kr_error err = { 0 };
    assert_int_equal(kr_server_parse_kv_budget("1048576", &b, &err), KR_OK);
    assert_int_equal(b, 1048576);
    assert_int_equal(kr_server_parse_kv_budget("2GiB", &b, &err), KR_OK);
    assert_int_equal(b, (size_t)2 << 30);
    assert_int_equal(kr_server_parse_kv_budget("500M", &b, &err), KR_OK);
    assert_int_equal(b, 500000000);
    assert_int_equal(kr_server_parse_kv_budget("10%", &b, &err), KR_OK);
    assert_true(b > 0);
    assert_int_not_equal(kr_server_parse_kv_budget("0", &b, &err), KR_OK);
    assert_int_not_equal(kr_server_parse_kv_budget("-5%", &b, &err), KR_OK);
    assert_int_not_equal(kr_server_parse_kv_budget("1.5", &b, &err), KR_OK);
    assert_int_not_equal(kr_server_parse_kv_budget("100", &b, &err), KR_OK); /* < 64 KiB */
    assert_int_not_equal(kr_server_parse_kv_budget("", &b, &err), KR_OK);
    /* Far above the machine's RAM (issue 38): refused, naming the RAM, never taken as is. */
    assert_int_equal(kr_server_parse_kv_budget("1e15", &b, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "RAM"));
    assert_non_null(strstr(err.message, "GiB"));
    int m;
    assert_int_equal(kr_server_parse_clock("00:00", &m), 0);
    assert_int_equal(m, 0);
    assert_int_equal(kr_server_parse_clock("23:59", &m), 0);
    assert_int_equal(m, 1439);
    assert_int_not_equal(kr_server_parse_clock("24:00", &m), 0);
    assert_int_not_equal(kr_server_parse_clock("9:30", &m), 0);
    assert_int_not_equal(kr_server_parse_clock("09:60", &m), 0);
    assert_int_not_equal(kr_server_parse_clock(NULL, &m), 0);
}

/* ------------------------------------------------------------------ SSE and jobs */

static void test_sse_framing(void **state) {
    (void)state;
    kr_sse_buf b = { 0 };
    assert_int_equal(kr_sse_event(&b, "progress", "{\"step\":1,\"pred_len\":2}"), 0);
    assert_int_equal(kr_sse_event(&b, "result", "line1\nline2\r\nline3"), 0);
    assert_int_equal(kr_sse_comment(&b, "keep-alive"), 0);
    const char *want = "event: progress\ndata: {\"step\":1,\"pred_len\":2}\n\n"
                       "event: result\ndata: line1\ndata: line2\ndata: line3\n\n"
                       ": keep-alive\n\n";
    assert_int_equal(kr_sse_pending(&b), strlen(want));
    /* Drained in small pieces, as a slow socket would. */
    char out[256];
    size_t n = 0, got;
    while ((got = kr_sse_read(&b, out + n, 7)) > 0) n += got;
    out[n] = '\0';
    assert_string_equal(out, want);
    assert_int_equal(kr_sse_pending(&b), 0);
    /* Reuse after draining, with a large event. */
    char *big = malloc(100000);
    memset(big, 'x', 99999);
    big[99999] = '\0';
    assert_int_equal(kr_sse_event(&b, NULL, big), 0);
    assert_int_equal(kr_sse_pending(&b), 6 + 99999 + 2);
    free(big);
    kr_sse_free(&b);
    kr_sse_free(&b);
}

typedef struct fake_sched {
    kr_job *job;
    int steps;
    int fail;
} fake_sched;

/* Plays the scheduler thread: STARTED, STEP..., then DONE (result NULL stands in) or FAILED. */
static void *fake_sched_run(void *arg) {
    fake_sched *f = arg;
    kr_event ev;
    memset(&ev, 0, sizeof ev);
    ev.id = 77;
    ev.pred_len = f->steps;
    ev.kind = KR_EVENT_STARTED;
    ev.stats.queue_seconds = 0.25;
    kr_job_on_event(f->job, &ev);
    for (int k = 1; k <= f->steps; k++) {
        usleep(2000);
        ev.kind = KR_EVENT_STEP;
        ev.step = k;
        kr_job_on_event(f->job, &ev);
    }
    if (f->fail) {
        ev.kind = KR_EVENT_FAILED;
        ev.error.status = KR_ERR_TIMEOUT;
        snprintf(ev.error.message, sizeof ev.error.message, "deadline passed");
    } else {
        ev.kind = KR_EVENT_DONE;
        ev.stats.generated_tokens = f->steps;
    }
    kr_job_on_event(f->job, &ev);
    return NULL;
}

static void test_job_rendezvous(void **state) {
    (void)state;
    for (int fail = 0; fail <= 1; fail++) {
        kr_job *j = kr_job_create();
        kr_job_ref(j); /* the scheduler's */
        fake_sched f = { j, 20, fail };
        pthread_t th;
        pthread_create(&th, NULL, fake_sched_run, &f);
        int seen = 0, wakeups = 0;
        kr_job_state st;
        for (;;) {
            if (!kr_job_wait(j, seen, 5.0, &st)) fail_msg("job wait timed out");
            wakeups++;
            assert_true(st.steps >= seen);
            seen = st.steps;
            if (st.done) break;
        }
        pthread_join(th, NULL);
        assert_int_equal(kr_job_id(j), 77);
        assert_true(st.usage.queue_seconds == 0.25);
        if (fail) {
            assert_int_equal(st.status, KR_ERR_TIMEOUT);
            assert_string_equal(st.error.message, "deadline passed");
        } else {
            assert_int_equal(st.status, KR_OK);
            assert_int_equal(st.steps, 20);
            assert_int_equal(st.usage.generated_tokens, 20);
        }
        assert_true(wakeups >= 2);
        assert_null(kr_job_take_result(j));
        /* Waiting after done returns at once. */
        assert_int_equal(kr_job_wait(j, INT32_MAX, 10.0, &st), 1);
        kr_job_unref(j);
    }
    /* The HTTP side leaving first: the scheduler's final event frees the job (ASan checks). */
    kr_job *j = kr_job_create();
    kr_job_ref(j);
    kr_job_unref(j);
    fake_sched f = { j, 3, 0 };
    fake_sched_run(&f);
    /* A timeout with nothing happening. */
    j = kr_job_create();
    kr_job_state st;
    assert_int_equal(kr_job_wait(j, 0, 0.02, &st), 0);
    assert_int_equal(st.done, 0);
    kr_job_unref(j);
    kr_job_unref(NULL);
}

/* A finished result waiting in its job counts against the server's memory budget until it is
 * taken, or until the job is freed with it (a streamed forecast whose client never reads). */
typedef struct charge_log {
    long long held;
    int calls;
} charge_log;

static void log_charge(void *user, size_t bytes, int release) {
    charge_log *l = user;
    l->held += release ? -(long long)bytes : (long long)bytes;
    l->calls++;
}

static void test_job_charges_its_result(void **state) {
    (void)state;
    kr_model *m = NULL;
    kr_candles *data = NULL;
    assert_int_equal(kr_test_load_demo(&m, &data), 0);
    kr_context *ctx = kr_test_context(m, 1, NULL);
    kr_series series = kr_candles_slice(data, 0, 64);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 3;
    p.paths = 5;
    p.keep_paths = 1;
    for (int taken = 0; taken <= 1; taken++) {
        kr_forecast *f = kr_test_run_opt(ctx, &series, &p, NULL);
        const size_t bytes = kr_forecast_bytes(f);
        /* 5 paths x 3 steps: tokens, normalised and raw candles; 64 history tokens. */
        assert_true(bytes > 5 * 3 * 6 * (sizeof(float) + sizeof(double)) + 64 * 8);
        charge_log log = { 0, 0 };
        kr_job *j = kr_job_create();
        kr_job_set_charge(j, log_charge, &log);
        kr_job_ref(j); /* the scheduler's */
        kr_event ev;
        memset(&ev, 0, sizeof ev);
        ev.id = 5;
        ev.kind = KR_EVENT_DONE;
        ev.result = f;
        kr_job_on_event(j, &ev); /* drops the scheduler's reference */
        assert_int_equal(log.held, (long long)bytes);
        if (taken) {
            kr_forecast *r = kr_job_take_result(j);
            assert_ptr_equal(r, f);
            assert_int_equal(log.held, 0);
            assert_null(kr_job_take_result(j)); /* nothing more to give back */
            kr_forecast_free(r);
        }
        kr_job_unref(j); /* not taken: freed here, with its charge */
        assert_int_equal(log.held, 0);
        assert_int_equal(log.calls, 2);
    }
    kr_context_free(ctx);
    kr_candles_free(data);
    kr_model_free(m);
}

static atomic_int g_ticks;

static void count_tick(void *user) {
    (void)user;
    atomic_fetch_add(&g_ticks, 1);
}

/* The watchdog's tick (what switches profiles when no request comes) runs on its own, and
 * never after the watchdog is freed. */
static void test_watch_tick(void **state) {
    (void)state;
    kr_conn_watch *w = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_conn_watch_create(30, NULL, NULL, &w, &err), KR_OK);
    atomic_store(&g_ticks, 0);
    kr_conn_watch_set_tick(w, count_tick, NULL);
    for (int i = 0; i < 1000 && atomic_load(&g_ticks) < 3; i++) usleep(10000);
    assert_true(atomic_load(&g_ticks) >= 3);
    kr_conn_watch_free(w);
    int after = atomic_load(&g_ticks);
    usleep(300000);
    assert_int_equal(atomic_load(&g_ticks), after);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_array_rows),
        cmocka_unit_test(test_request_fractional_epochs),
        cmocka_unit_test(test_request_norm_and_model),
        cmocka_unit_test(test_request_layouts_agree),
        cmocka_unit_test(test_request_defaults_and_future),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_request_limits),
        cmocka_unit_test(test_response_forecast_json),
        cmocka_unit_test(test_response_error_and_models),
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_watch_tick),
        cmocka_unit_test(test_kv_budget_and_clock),
        cmocka_unit_test(test_sse_framing),
        cmocka_unit_test(test_job_rendezvous),
        cmocka_unit_test(test_job_charges_its_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
