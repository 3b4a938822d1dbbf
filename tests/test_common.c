/*
 * common/: what the front ends share without a store — one candle input read the same way
 * whichever command asks (CSV or JSON, file or stdin), the request limits, the notes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/candles_input.h"
#include "common/candles_json.h"
#include "common/limits.h"
#include "common/notes.h"
#include "test_support.h"

static const char k_csv[] = "timestamps,open,high,low,close,volume\n"
                            "2024-01-02,10,11,9,10.5,100\n"
                            "2024-01-03,10.5,12,10,11,120\n"
                            "2024-01-04,11,11.5,10.2,10.8,90\n";
static const char k_json[] = "[[\"2024-01-02\",10,11,9,10.5,100],"
                             "[\"2024-01-03\",10.5,12,10,11,120],"
                             "[\"2024-01-04\",11,11.5,10.2,10.8,90]]";

static void assert_same_candles(const kr_candles *a, const kr_candles *b) {
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->has_volume, b->has_volume);
    assert_int_equal(a->has_amount, b->has_amount);
    assert_int_equal(a->date_only, b->date_only);
    assert_memory_equal(a->timestamps, b->timestamps, (size_t)a->n * sizeof *a->timestamps);
    assert_memory_equal(a->values, b->values, (size_t)a->n * 6 * sizeof *a->values);
}

/* The same rows as a CSV file, a .json file and a JSON file without the extension give the same
 * candles, the amount derived alike (volume x mean price). */
static void test_candles_load_csv_and_json_agree(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char csv[512], json[512], sniffed[512];
    snprintf(csv, sizeof csv, "%s/a.csv", dir);
    snprintf(json, sizeof json, "%s/a.json", dir);
    snprintf(sniffed, sizeof sniffed, "%s/a.txt", dir);
    assert_int_equal(kr_test_write_file(csv, k_csv, strlen(k_csv)), 0);
    assert_int_equal(kr_test_write_file(json, k_json, strlen(k_json)), 0);
    assert_int_equal(kr_test_write_file(sniffed, k_json, strlen(k_json)), 0);
    kr_candles *a = NULL, *b = NULL, *c = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_load(csv, &a, &err), KR_OK);
    assert_int_equal(kr_candles_load(json, &b, &err), KR_OK);
    assert_int_equal(kr_candles_load(sniffed, &c, &err), KR_OK);
    assert_same_candles(a, b);
    assert_same_candles(a, c);
    assert_true(a->has_amount == 0 && a->values[5] == 100 * ((10 + 11 + 9 + 10.5) / 4.0));
    kr_candles_free(a);
    kr_candles_free(b);
    kr_candles_free(c);
}

/* A bad row of a JSON file is named by file and JSON field, with the CSV reader's rule. */
static void test_candles_load_json_error_names_file_and_field(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    const char bad[] = "[[\"2024-01-02\",10,11,9,10.5],[\"2024-01-03\",10.5,9,10,11]]";
    assert_int_equal(kr_test_write_file(path, bad, strlen(bad)), 0);
    kr_candles *c = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_load(path, &c, &err), KR_ERR_FORMAT);
    assert_null(c);
    assert_non_null(strstr(err.message, "bad.json"));
    assert_non_null(strstr(err.message, "candles[1].high"));
    assert_non_null(strstr(err.message, "below low"));
}

/* The text reader tells JSON from CSV by its first character past a BOM and blanks. */
static void test_parse_text_sniffs(void **state) {
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "\xEF\xBB\xBF \n%s", k_json);
    kr_candles *a = NULL, *b = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_parse_text(text, strlen(text), "t", &a, &err), KR_OK);
    assert_int_equal(kr_candles_parse_text(k_csv, strlen(k_csv), "t", &b, &err), KR_OK);
    assert_same_candles(a, b);
    kr_candles_free(a);
    kr_candles_free(b);
}

/* The server's default limits are the named ones of common/limits.h. */
static void test_default_limits(void **state) {
    (void)state;
    kr_api_limits l = kr_api_default_limits();
    assert_int_equal(l.max_pred_len, KR_LIMIT_PRED_LEN);
    assert_int_equal(l.max_paths, KR_LIMIT_PATHS);
    assert_int_equal(l.max_rows, KR_LIMIT_ROWS);
    assert_int_equal(l.max_symbols, KR_LIMIT_SYMBOLS);
    assert_true(KR_LIMIT_PRED_LEN <= KR_LIMIT_PRED_LEN_CAP);
}

/* Quantising at load earns a note past 5 % of the forecast, naming the command that avoids it;
 * a checkpoint quantised beforehand (quant_seconds 0) never does. */
static void test_quantize_at_load_note(void **state) {
    (void)state;
    kr_model_info mi;
    memset(&mi, 0, sizeof mi);
    snprintf(mi.quant, sizeof mi.quant, "int8");
    char buf[512] = "untouched";
    mi.quant_seconds = 0.17;
    assert_int_equal(kr_quantize_at_load_note(&mi, 1.0, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "kronos quantize --quant int8 --out DIR"));
    assert_non_null(strstr(buf, "17 %"));
    snprintf(buf, sizeof buf, "untouched");
    mi.quant_seconds = 0.04;
    assert_int_equal(kr_quantize_at_load_note(&mi, 1.0, buf, sizeof buf), 0);
    mi.quant_seconds = 0;
    assert_int_equal(kr_quantize_at_load_note(&mi, 0.001, buf, sizeof buf), 0);
    assert_string_equal(buf, "untouched");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_candles_load_csv_and_json_agree),
        cmocka_unit_test(test_candles_load_json_error_names_file_and_field),
        cmocka_unit_test(test_parse_text_sniffs),
        cmocka_unit_test(test_default_limits),
        cmocka_unit_test(test_quantize_at_load_note),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
