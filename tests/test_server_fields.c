/*
 * The JSON request-field readers (server/fields) and the body parser (server/json_body) that
 * every JSON route uses, without sockets: descriptor tables (types, ranges, required fields,
 * defaults, the config key of a cap), unknown and duplicate fields, and the same answers from
 * every route's parser (/v1/forecast, /v1/analyze, /v1/analyze/batch, /v1/candles).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "test_support.h"

#include "base/strbuf.h"
#include "server/access_log.h"
#include "server/analyst_request.h"
#include "common/fields.h"
#include "common/json_body.h"
#include "server/request.h"
#include "server/response.h"

/* Every error message starts with the field it names. */
static void assert_names(const kr_api_error *e, const char *field, const char *needle) {
    if (strcmp(e->field, field) != 0)
        fail_msg("field '%s', expected '%s' (message: %s)", e->field, field, e->message);
    if (!strstr(e->message, needle)) fail_msg("message '%s' lacks '%s'", e->message, needle);
    if (e->field[0] && strncmp(e->message, e->field, strlen(e->field)) != 0)
        fail_msg("message '%s' does not start with '%s'", e->message, e->field);
    assert_int_equal(e->status, 400);
}

typedef struct sample {
    int count, flag, choice;
    double ratio;
    float scale;
    uint64_t seed;
    const cJSON *rows;
} sample;

static const char *const k_modes[] = { "fast", "exact", "slow", NULL };

/* Reads json into s against a small table; returns the status (err filled). */
static kr_status read_sample(const char *json, sample *s, kr_api_error *err) {
    s->count = 7; /* the defaults: what the destination holds before the call */
    s->flag = 0;
    s->choice = 1;
    s->ratio = 0.5;
    s->scale = 1.0f;
    s->seed = 3;
    s->rows = NULL;
    kr_field f[] = {
        KR_F_INT("count", &s->count, 1, 100, 0),
        KR_F_BOOL("flag", &s->flag),
        KR_F_CHOICE("mode", &s->choice, k_modes),
        KR_F_NUM("ratio", &s->ratio, 0.0, 1.0, 0),
        KR_F_FLOAT("scale", &s->scale, 0.0, 10.0, KR_FIELD_MIN_EXCL),
        KR_F_SEED("seed", &s->seed),
        KR_F_VALUE("rows", &s->rows, KR_FIELD_REQUIRED),
    };
    f[0].max_key = "max_count";
    cJSON *root = NULL;
    memset(err, 0, sizeof *err);
    kr_status st = kr_json_body_parse(json, strlen(json), NULL, &root, err);
    if (st == KR_OK) st = kr_fields_read(root, f, (int)(sizeof f / sizeof f[0]), err);
    /* present says which fields were given (not null) */
    if (st == KR_OK && strstr(json, "\"count\":null")) assert_int_equal(f[0].present, 0);
    cJSON_Delete(root);
    return st;
}

static void test_descriptor_table(void **state) {
    (void)state;
    sample s;
    kr_api_error e;
    /* Absent and null fields keep the defaults; given ones are converted. */
    assert_int_equal(read_sample("{\"rows\":[1],\"count\":null}", &s, &e), KR_OK);
    assert_int_equal(s.count, 7);
    assert_int_equal(s.choice, 1);
    assert_true(s.ratio == 0.5 && s.scale == 1.0f && s.seed == 3);
    assert_int_equal(read_sample("{\"rows\":[],\"count\":100,\"flag\":true,\"mode\":\"slow\","
                                 "\"ratio\":0,\"scale\":0.25,\"seed\":\"18446744073709551615\"}",
                                 &s, &e),
                     KR_OK);
    assert_int_equal(s.count, 100);
    assert_int_equal(s.flag, 1);
    assert_int_equal(s.choice, 2);
    assert_true(s.ratio == 0.0 && s.scale == 0.25f && s.seed == UINT64_MAX);

    static const struct {
        const char *json, *field, *needle;
    } bad[] = {
        { "{\"count\":5}", "rows", "required" },
        { "{\"rows\":null}", "rows", "required" },
        { "{\"rows\":1,\"cuont\":5}", "cuont",
          "unknown field (expected count, flag, mode, ratio, scale, seed, rows)" },
        { "{\"rows\":1,\"count\":5,\"count\":6}", "count", "given twice" },
        { "{\"rows\":1,\"count\":101}", "count",
          "must be an integer in 1..100 (max_count), got 101" },
        { "{\"rows\":1,\"count\":2.5}", "count", "got 2.5" },
        { "{\"rows\":1,\"count\":\"5\"}", "count", "got a string" },
        { "{\"rows\":1,\"count\":1e999}", "count", "got a number" },
        { "{\"rows\":1,\"flag\":1}", "flag", "must be true or false, got a number" },
        { "{\"rows\":1,\"mode\":\"quick\"}", "mode",
          "must be \"fast\", \"exact\" or \"slow\", got 'quick'" },
        { "{\"rows\":1,\"mode\":3}", "mode", "got a number" },
        { "{\"rows\":1,\"ratio\":1.5}", "ratio", "must be a number in [0, 1], got 1.5" },
        { "{\"rows\":1,\"ratio\":1e999}", "ratio", "non-finite" },
        { "{\"rows\":1,\"scale\":0}", "scale", "(0, 10]" },
        { "{\"rows\":1,\"scale\":1e-50}", "scale", "in float32" },
        { "{\"rows\":1,\"seed\":-1}", "seed", "0..2^53" },
        { "{\"rows\":1,\"seed\":\"1x\"}", "seed", "'1x' is not an unsigned 64-bit integer" },
        { "{\"rows\":1,\"seed\":\"18446744073709551616\"}", "seed", "not an unsigned" },
        { "{\"rows\":1,\"seed\":[]}", "seed", "got an array" },
        { "[1]", "body", "must be a JSON object, got an array" },
        { "", "body", "empty" },
        { "{\"rows\":", "body", "invalid JSON at line 1" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (read_sample(bad[i].json, &s, &e) == KR_OK) fail_msg("accepted: %s", bad[i].json);
        assert_names(&e, bad[i].field, bad[i].needle);
    }
    /* Client text in a field name is quoted safely. */
    assert_int_not_equal(read_sample("{\"rows\":1,\"a\\\"b\\n\":1}", &s, &e), KR_OK);
    assert_string_equal(e.field, "a?b?");
}

static void test_single_value(void **state) {
    (void)state;
    double q = -1;
    kr_field f = KR_F_NUM("quantiles[3]", &q, 0.0, 1.0, KR_FIELD_REQUIRED);
    cJSON *v = cJSON_CreateNumber(0.25);
    kr_api_error e;
    assert_int_equal(kr_field_read_value(&f, v, &e), KR_OK);
    assert_true(q == 0.25);
    cJSON_SetNumberValue(v, 2);
    assert_int_not_equal(kr_field_read_value(&f, v, &e), KR_OK);
    assert_names(&e, "quantiles[3]", "[0, 1]");
    assert_int_not_equal(kr_field_read_value(&f, NULL, &e), KR_OK);
    assert_names(&e, "quantiles[3]", "required");
    cJSON_Delete(v);
}

/* The routes read their fields through the same tables: each route's unknown-field message
 * lists that route's own fields, and the caps name their config keys. */
static void test_routes_share_readers(void **state) {
    (void)state;
    kr_api_error e;
    kr_api_request fr;
    const char *j = "{\"candles\":[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1]],"
                    "\"pred_len\":1,\"horizon\":3}";
    assert_int_not_equal(kr_api_forecast_parse(j, strlen(j), NULL, &fr, &e), KR_OK);
    assert_names(&e, "horizon", "unknown field (expected candles, columns, pred_len, paths");
    j = "{\"candles\":[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1]],\"pred_len\":1,"
        "\"paths\":9999}";
    assert_int_not_equal(kr_api_forecast_parse(j, strlen(j), NULL, &fr, &e), KR_OK);
    assert_names(&e, "paths", "1..256 (max_paths), got 9999");

    kr_api_analyze_request ar;
    j = "{\"symbol\":\"AAPL\",\"pred_len\":3}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &ar, &e), KR_OK);
    assert_names(&e, "pred_len",
                 "unknown field (expected symbol, interval, candles, columns, horizon");
    j = "{\"symbols\":[\"AAPL\"],\"symbol\":\"AAPL\"}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 1, NULL, &ar, &e), KR_OK);
    assert_names(&e, "symbol", "unknown field (expected symbols, interval, horizon");
    j = "{\"interval\":\"1d\"}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 1, NULL, &ar, &e), KR_OK);
    assert_names(&e, "symbols", "required");
    j = "{\"symbol\":\"AAPL\",\"paths\":0}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &ar, &e), KR_OK);
    assert_names(&e, "paths", "(max_analyze_paths), got 0");
    j = "{\"symbol\":\"AAPL\",\"format\":\"pdf\"}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &ar, &e), KR_OK);
    assert_names(&e, "format", "must be \"json\", \"md\", \"markdown\" or \"html\", got 'pdf'");
    j = "{\"symbol\":\"AAPL\",\"format\":\"markdown\",\"stream\":null}";
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &ar, &e), KR_OK);
    assert_int_equal(ar.format, KR_FORMAT_MD);
    kr_api_analyze_request_free(&ar);

    kr_candles *cs = NULL;
    j = "{\"candles\":[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1]],\"rows\":1}";
    assert_int_not_equal(kr_api_candles_parse(j, strlen(j), 0, NULL, &cs, &e), KR_OK);
    assert_names(&e, "rows", "unknown field (expected candles, columns)");
    j = "{\"columns\":[\"timestamps\",\"open\",\"high\",\"low\",\"close\"]}";
    assert_int_not_equal(kr_api_candles_parse(j, strlen(j), 0, NULL, &cs, &e), KR_OK);
    assert_names(&e, "candles", "required");
    assert_null(cs);
}

/* The GET /v1/candles query parameters. */
static void test_candles_query(void **state) {
    (void)state;
    char iv[64];
    int limit = 0;
    kr_api_error e;
    assert_int_equal(kr_api_candles_query(NULL, NULL, iv, sizeof iv, &limit, &e), KR_OK);
    assert_string_equal(iv, "");
    assert_int_equal(limit, KR_API_CANDLES_LIMIT);
    assert_int_equal(kr_api_candles_query("5m", "250", iv, sizeof iv, &limit, &e), KR_OK);
    assert_string_equal(iv, "5m");
    assert_int_equal(limit, 250);
    const char *bad_limits[] = { "",     "0",      "-5",
                                 "+5",   " 5",     "5 ",
                                 "0x10", "100001", "99999999999999999999" };
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        if (kr_api_candles_query(NULL, bad_limits[i], iv, sizeof iv, &limit, &e) == KR_OK)
            fail_msg("limit '%s' accepted", bad_limits[i]);
        assert_names(&e, "limit", "must be an integer in 1..100000");
    }
    assert_int_not_equal(kr_api_candles_query("5 minutes", NULL, iv, sizeof iv, &limit, &e), KR_OK);
    assert_string_equal(e.field, "interval");
}

/* Defect 7: bytes after the document are refused on every JSON route's parser. */
static void test_trailing_bytes(void **state) {
    (void)state;
    static const char *const k_tails[] = { "xyz", "}", "{}", "\n{\"pred_len\":2}", "\x01", "0" };
    const char *rows = "[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1]]";
    for (size_t t = 0; t < sizeof k_tails / sizeof k_tails[0]; t++) {
        char fc[512], an[256], ba[256], ca[256];
        snprintf(fc, sizeof fc, "{\"candles\":%s,\"pred_len\":1} %s", rows, k_tails[t]);
        snprintf(an, sizeof an, "{\"symbol\":\"AAPL\"}%s", k_tails[t]);
        snprintf(ba, sizeof ba, "{\"symbols\":[\"AAPL\"]}\r\n%s", k_tails[t]);
        snprintf(ca, sizeof ca, "%s%s", rows, k_tails[t]);
        kr_api_error e;
        kr_api_request fr;
        kr_api_analyze_request ar;
        kr_candles *cs = NULL;
        if (kr_api_forecast_parse(fc, strlen(fc), NULL, &fr, &e) == KR_OK)
            fail_msg("forecast accepted %s", fc);
        assert_names(&e, "body", "after the JSON document");
        if (kr_api_analyze_parse(an, strlen(an), 0, NULL, &ar, &e) == KR_OK)
            fail_msg("analyze accepted %s", an);
        assert_names(&e, "body", "after the JSON document");
        if (kr_api_analyze_parse(ba, strlen(ba), 1, NULL, &ar, &e) == KR_OK)
            fail_msg("batch accepted %s", ba);
        assert_names(&e, "body", "after the JSON document at line ");
        if (kr_api_candles_parse(ca, strlen(ca), 0, NULL, &cs, &e) == KR_OK)
            fail_msg("candles accepted %s", ca);
        assert_names(&e, "body", "after the JSON document");
        assert_null(cs);
    }
    /* Trailing whitespace is not a second document. */
    kr_api_analyze_request ar;
    kr_api_error e;
    const char *ok = "{\"symbol\":\"AAPL\"} \r\n\t ";
    assert_int_equal(kr_api_analyze_parse(ok, strlen(ok), 0, NULL, &ar, &e), KR_OK);
    kr_api_analyze_request_free(&ar);
}

/* Defect 11: a NUL inside a string is refused, naming the field, instead of truncating it. */
static void test_nul_in_strings(void **state) {
    (void)state;
    static const struct {
        const char *json, *field, *needle;
        int route; /* 0 forecast, 1 analyze, 2 batch, 3 candles */
    } k_cases[] = {
        { "{\"symbol\":\"AAPL\\u0000.TO\"}", "symbol", "NUL (\\u0000)", 1 },
        { "{\"symbol\":\"AAPL\",\"interval\":\"1d\\u0000\"}", "interval", "NUL", 1 },
        { "{\"symbols\":[\"A\",\"B\\u0000C\"]}", "symbols[1]", "NUL", 2 },
        { "{\"pred_len\":1,\"candles\":[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\\u0000x\",1,2,1,1]]"
          "}",
          "candles[1][0]", "NUL", 0 },
        { "{\"pred_len\":1,\"seed\":\"12\\u00003\",\"candles\":[]}", "seed", "NUL", 0 },
        { "{\"pred_len\":1,\"candles\":{\"timestamps\":[\"2024-01-02\",\"2024\\u0000\"]}}",
          "candles.timestamps[1]", "NUL", 0 },
        { "[[\"2024-01-02\",1,2,1,1],{\"date\\u0000\":\"2024-01-03\"}]", "[1].date?", "a key holds",
          3 },
        { "{\"symbol\":\"AA\tPL\"}", "symbol", "raw control", 1 },
        { "{\"symbol\":\"AA\x01PL\"}", "symbol", "raw control", 1 },
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const char *j = k_cases[i].json;
        kr_api_error e;
        kr_api_request fr;
        kr_api_analyze_request ar;
        kr_candles *cs = NULL;
        kr_status st =
            k_cases[i].route == 0 ? kr_api_forecast_parse(j, strlen(j), NULL, &fr, &e)
            : k_cases[i].route == 3
                ? kr_api_candles_parse(j, strlen(j), 0, NULL, &cs, &e)
                : kr_api_analyze_parse(j, strlen(j), k_cases[i].route == 2, NULL, &ar, &e);
        if (st == KR_OK) fail_msg("case %zu accepted: %s", i, j);
        assert_names(&e, k_cases[i].field, k_cases[i].needle);
    }
    /* An escaped backslash before "u0000" is text, not a NUL. */
    const char *ok = "{\"symbol\":\"AAPL\",\"interval\":\"1d\"}";
    kr_api_analyze_request ar;
    kr_api_error e;
    assert_int_equal(kr_api_analyze_parse(ok, strlen(ok), 0, NULL, &ar, &e), KR_OK);
    kr_api_analyze_request_free(&ar);
    kr_json_scan scan;
    const char *text = "{\"a\":\"x\\\\u0000\"}";
    assert_int_equal(kr_json_body_scan(text, strlen(text), NULL, &scan, &e), KR_OK);
}

/* Defect 4: the value count is checked before any tree is built, and the tree's memory is
 * estimated from the scan. */
static void test_value_limit(void **state) {
    (void)state;
    /* {"pred_len":1,"candles":[0,0,0,...]}: 2 bytes a value, ~90 in a tree. */
    const size_t n = 200000;
    char *body = malloc(n * 2 + 64);
    size_t len = (size_t)sprintf(body, "{\"pred_len\":1,\"candles\":[");
    for (size_t i = 0; i < n; i++) body[len++] = '0', body[len++] = ',';
    len--;
    len += (size_t)sprintf(body + len, "]}");
    kr_json_scan scan;
    kr_api_error e;
    assert_int_equal(kr_json_body_scan(body, len, NULL, &scan, &e), KR_OK);
    assert_int_equal(scan.values, n + 3); /* the zeros, the array, the object, pred_len's 1 */
    assert_int_equal(scan.strings, 2); /* the two keys */
    assert_int_equal(scan.max_depth, 2);
    assert_true(kr_json_scan_tree_bytes(&scan) >= n * sizeof(cJSON));
    /* With max_rows 1000 the body is refused (413) before a tree exists. */
    kr_api_limits lim = kr_api_default_limits();
    lim.max_rows = 1000;
    lim.max_rows_key = "max_rows";
    kr_api_request r;
    assert_int_not_equal(kr_api_forecast_parse(body, len, &lim, &r, &e), KR_OK);
    assert_int_equal(e.status, 413);
    assert_string_equal(e.field, "body");
    assert_non_null(strstr(e.message, "follows from max_rows"));
    kr_api_analyze_request ar;
    assert_int_not_equal(kr_api_analyze_parse(body, len, 0, &lim, &ar, &e), KR_OK);
    assert_int_equal(e.status, 413);
    kr_candles *cs = NULL;
    assert_int_not_equal(kr_api_candles_parse(body, len, 0, &lim, &cs, &e), KR_OK);
    assert_int_equal(e.status, 413);
    free(body);
    /* Rows past max_rows (within the value limit) name the cap. */
    const char *rows3 = "{\"pred_len\":1,\"candles\":[[\"2024-01-02\",1,2,1,1],"
                        "[\"2024-01-03\",1,2,1,1],[\"2024-01-04\",1,2,1,1]]}";
    lim.max_rows = 2;
    assert_int_not_equal(kr_api_forecast_parse(rows3, strlen(rows3), &lim, &r, &e), KR_OK);
    assert_names(&e, "candles", "needs 2..2 rows (max_rows), got 3");
    /* Line ends are counted as the CSV reader takes them: "\n", "\r\n" and a bare "\r" (a
     * body of bare CRs once passed the up-front count as one line). */
    const char *const texts[] = { "a\nb\r\nc\rd", "a\r\r\n", "", "a\n", "a\r" };
    const size_t lines[] = { 4, 2, 0, 1, 1 };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        assert_int_equal(kr_csv_lines(texts[i], strlen(texts[i])), lines[i]);
    const char *cr_json = "{\"pred_len\":1,\"candles\":\"timestamps,open,high,low,close\\r"
                          "2024-01-02,1,2,1,1\\r2024-01-03,1,2,1,1\\r2024-01-04,1,2,1,1\\r\"}";
    assert_int_equal(kr_json_body_scan(cr_json, strlen(cr_json), NULL, &scan, &e), KR_OK);
    assert_int_equal(scan.string_lines, 4);
    /* A CSV body past max_rows is refused by the parser itself too, whoever calls it. */
    const char *csv3 = "timestamps,open,high,low,close\r2024-01-02,1,2,1,1\r2024-01-03,1,2,1,1"
                       "\r2024-01-04,1,2,1,1\r";
    assert_int_not_equal(kr_api_candles_parse(csv3, strlen(csv3), 1, &lim, &cs, &e), KR_OK);
    assert_null(cs);
    assert_int_equal(e.status, 413);
    assert_string_equal(e.field, "body");
    if (!strstr(e.message, "body: holds 3 candles, more than 2 (max_rows)"))
        fail_msg("%s", e.message);
    /* Nesting is bounded. */
    char deep[KR_JSON_MAX_DEPTH * 2 + 8];
    memset(deep, '[', KR_JSON_MAX_DEPTH + 1);
    memset(deep + KR_JSON_MAX_DEPTH + 1, ']', KR_JSON_MAX_DEPTH + 1);
    deep[2 * KR_JSON_MAX_DEPTH + 2] = '\0';
    assert_int_not_equal(kr_api_candles_parse(deep, strlen(deep), 0, NULL, &cs, &e), KR_OK);
    assert_non_null(strstr(e.message, "deeper than 64"));
}

/* Defect 1 (request size): an analysis's horizon, paths, lookback, calibration windows and
 * symbols are capped by the server config, and the error names the field and the cap. */
static void test_analysis_caps(void **state) {
    (void)state;
    kr_api_limits lim = kr_api_default_limits();
    static const struct {
        const char *json, *field, *needle;
        int batch;
    } k_defaults[] = {
        /* the heavy analysis of issue 10, refused by the default caps */
        { "{\"symbol\":\"AAPL\",\"horizon\":400,\"paths\":256,\"lookback\":1000,"
          "\"max_context\":1024,\"calibrate\":3}",
          "horizon", "1..256 (max_horizon), got 400", 0 },
        { "{\"symbol\":\"AAPL\",\"paths\":1025}", "paths", "1..1024 (max_analyze_paths), got 1025",
          0 },
        /* a window of 4 cannot hold a horizon of 3 and a 2-row history (it used to fail later,
         * naming no field: "too few rows: 1") */
        { "{\"symbol\":\"AAPL\",\"max_context\":4,\"horizon\":3}", "horizon",
          "3 exceeds max_context - 2 (2)", 0 },
        { "{\"symbol\":\"AAPL\",\"lookback\":4096,\"max_context\":8192}", "lookback",
          "2..2048 (max_lookback), got 4096", 0 },
        { "{\"symbols\":[\"AAPL\"],\"calibrate\":11}", "calibrate", "0..10 (max_calibrate), got 11",
          1 },
    };
    kr_api_analyze_request r;
    kr_api_error e;
    for (size_t i = 0; i < sizeof k_defaults / sizeof k_defaults[0]; i++) {
        const char *j = k_defaults[i].json;
        if (kr_api_analyze_parse(j, strlen(j), k_defaults[i].batch, &lim, &r, &e) == KR_OK)
            fail_msg("accepted %s", j);
        assert_names(&e, k_defaults[i].field, k_defaults[i].needle);
    }
    /* Configured lower. */
    lim.max_horizon = 5;
    lim.max_analyze_paths = 4;
    lim.max_lookback = 50;
    lim.max_calibrate = 1;
    lim.max_symbols = 2;
    const char *j = "{\"symbol\":\"AAPL\",\"horizon\":6}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_names(&e, "horizon", "1..5 (max_horizon), got 6");
    j = "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":5}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_names(&e, "paths", "1..4 (max_analyze_paths)");
    j = "{\"symbol\":\"AAPL\",\"horizon\":5,\"lookback\":51}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_names(&e, "lookback", "2..50 (max_lookback)");
    lim.max_context = 600;
    lim.max_context_key = "max_context_limit";
    j = "{\"symbol\":\"AAPL\",\"horizon\":5,\"max_context\":601}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_names(&e, "max_context", "2..600 (max_context_limit), got 601");
    j = "{\"symbols\":[\"A\",\"B\",\"C\"],\"horizon\":5,\"paths\":4}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 1, &lim, &r, &e), KR_OK);
    assert_names(&e, "symbols", "1..2 symbols (max_symbols), got 3");
    j = "{\"symbols\":[\"A\",\"B\"],\"horizon\":5,\"paths\":4,\"lookback\":50,\"calibrate\":1}";
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 1, &lim, &r, &e), KR_OK);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.params.calibrate, 1);
    kr_api_analyze_request_free(&r);
    /* A default above a configured cap is refused with the cap named. */
    j = "{\"symbol\":\"AAPL\",\"paths\":4}";
    lim.max_horizon = 10;
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_names(&e, "horizon", "the default 20 exceeds max_horizon (10)");
    /* The automatic lookback obeys max_lookback (given as the analyst's upper bound). */
    j = "{\"symbol\":\"AAPL\",\"paths\":4,\"horizon\":5}";
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_int_equal(r.params.lookback, 50);
    kr_api_analyze_request_free(&r);
    lim = kr_api_default_limits();
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, &lim, &r, &e), KR_OK);
    assert_int_equal(r.params.lookback, 0); /* 512 - 5 is within 2048: automatic */
    kr_api_analyze_request_free(&r);
}

/* Whether text is valid UTF-8 throughout. */
static int valid_utf8(const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        size_t n = kr_utf8_seq_len(p);
        if (!n) return 0;
        p += n;
    }
    return 1;
}

/* What a client sends need not be UTF-8; an error body and an access-log line quoting it must
 * still be valid JSON text: valid sequences kept, anything else U+FFFD. */
static void test_client_bytes_stay_valid_utf8(void **state) {
    (void)state;
    static const char *const bad[] = { "}\xff\xfe",        "G\xffT",  "\xc0\xaf", "\xed\xa0\x80",
                                       "\xf4\x90\x80\x80", "caf\xc3", "\xe2\x82" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "market: '%s' is not a calendar", bad[i]);
        char *body = kr_api_error_json(400, msg, bad[i]);
        assert_non_null(body);
        if (!valid_utf8(body)) fail_msg("case %zu: error body is not UTF-8: %s", i, body);
        cJSON *j = cJSON_Parse(body);
        assert_non_null(j);
        const char *m =
            cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message")->valuestring;
        assert_non_null(strstr(m, "\xef\xbf\xbd")); /* U+FFFD where the bad bytes were */
        cJSON_Delete(j);
        free(body);
        kr_access_entry e = { .time = 1.7e9,
                              .request_id = "r",
                              .client = "127.0.0.1",
                              .method = bad[i],
                              .route = "other",
                              .status = 400,
                              .queue_wait_s = -1,
                              .error = msg };
        kr_sb sb = { 0 };
        kr_access_log_format(&e, &sb);
        if (!valid_utf8(sb.data)) fail_msg("case %zu: log line is not UTF-8: %s", i, sb.data);
        assert_non_null(strstr(sb.data, "\\ufffd"));
        cJSON *line = cJSON_Parse(sb.data);
        assert_non_null(line);
        cJSON_Delete(line);
        kr_sb_free(&sb);
    }
    /* Valid text of every length passes unchanged. */
    const char *good = "a \xc3\xa9 \xe2\x82\xac \xf0\x9f\x93\x88";
    char *body = kr_api_error_json(400, good, NULL);
    assert_non_null(strstr(body, good));
    free(body);
    kr_sb sb = { 0 };
    kr_sb_append_json_escaped(&sb, good);
    assert_string_equal(sb.data, good);
    kr_sb_free(&sb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_table),
        cmocka_unit_test(test_single_value),
        cmocka_unit_test(test_routes_share_readers),
        cmocka_unit_test(test_candles_query),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_nul_in_strings),
        cmocka_unit_test(test_value_limit),
        cmocka_unit_test(test_analysis_caps),
        cmocka_unit_test(test_client_bytes_stay_valid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
