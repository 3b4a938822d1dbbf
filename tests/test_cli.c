/*
 * The `kronos` executable end to end: forecasts in CSV and JSON from the bundled demo model,
 * a batch of inputs, gen-random round trip, and every bad-input case exits non-zero with a
 * message naming the file, line and field.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "test_support.h"

static const char *g_tmp; /* kr_test_dir() */

typedef kr_test_run run_result;

/* Runs `kronos ARGS` with stdout/stderr captured. */
static const run_result *kronos(const char *args) { return kr_test_kronos(g_tmp, "", args); }

static const char *write_csv(const char *name, const char *text) {
    static char path[1200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    assert_int_equal(kr_test_write_file(path, text, strlen(text)), 0);
    return path;
}

/* A valid daily CSV body of n rows starting on Monday 2024-01-01, weekends skipped. */
static char *daily_csv(int n) {
    size_t cap = 64 + (size_t)n * 96;
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap, "timestamps,open,high,low,close,volume,amount\n");
    int day = 0;
    for (int i = 0; i < n; i++, day++) {
        if (day % 7 == 5) day += 2;
        int y = 2024, m = 1, d = 1 + day;
        static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        while (d > mdays[m - 1]) d -= mdays[m++ - 1];
        double c = 100 + (i % 13) - (i % 7) * 0.5;
        len += (size_t)snprintf(s + len, cap - len, "%04d-%02d-%02d,%.2f,%.2f,%.2f,%.2f,%d,%.1f\n",
                                y, m, d, c - 0.3, c + 1, c - 1, c, 1000 + i, (1000.0 + i) * c);
    }
    return s;
}

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    return g_tmp ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

static void expect_fail(const char *args, int code, const char *needle1, const char *needle2) {
    const run_result *r = kronos(args);
    if (r->code != code || !strstr(r->err, needle1) || (needle2 && !strstr(r->err, needle2)))
        fail_msg("kronos %s: exit %d (want %d), stderr: %s (want '%s'%s%s)", args, r->code, code,
                 r->err, needle1, needle2 ? " and " : "", needle2 ? needle2 : "");
}

static void test_forecast_csv_and_json(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "forecast --input %s --pred-len 5 --top-k 1",
             kr_test_fixture("regression_input.csv"));
    const run_result *r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    /* The default: the mean of 32 paths with the close's 10 % and 90 % band. */
    assert_true(strncmp(r->out,
                        "timestamps,open,high,low,close,volume,amount,close_q0.1,close_q0.9\n",
                        67) == 0);
    int lines = 0;
    for (const char *c = r->out; *c; c++) lines += *c == '\n';
    assert_int_equal(lines, 6);
    /* 2024-08-29 11:30 is the last bar: the next one is after the lunch break. */
    assert_non_null(strstr(r->out, "\n2024-08-29 13:05:00,"));

    snprintf(
        args, sizeof args,
        "forecast --input %s --pred-len 4 --paths 3 --seed 9 --format json --quantiles 0.25,0.75",
        kr_test_fixture("regression_input.csv"));
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    cJSON *paths = cJSON_GetObjectItem(j, "paths");
    assert_int_equal(cJSON_GetArraySize(paths), 3);
    cJSON *p0 = cJSON_GetArrayItem(paths, 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(p0, "s1")), 4);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(p0, "candles")), 4);
    cJSON *q = cJSON_GetObjectItem(j, "quantiles");
    assert_non_null(cJSON_GetObjectItem(q, "0.25"));
    assert_non_null(cJSON_GetObjectItem(q, "0.75"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "mean")), 4);
    /* Same seed, same paths and mean (timing in "timing" differs). */
    r = kronos(args);
    cJSON *j2 = cJSON_Parse(r->out);
    assert_non_null(j2);
    assert_true(
        cJSON_Compare(cJSON_GetObjectItem(j, "paths"), cJSON_GetObjectItem(j2, "paths"), 1));
    assert_true(cJSON_Compare(cJSON_GetObjectItem(j, "mean"), cJSON_GetObjectItem(j2, "mean"), 1));
    cJSON_Delete(j);
    cJSON_Delete(j2);
}

static void test_batch_and_gen_random(void **state) {
    (void)state;
    char args[4096], dir[1200];
    snprintf(dir, sizeof dir, "%s/rand", g_tmp);
    snprintf(args, sizeof args, "gen-random --shape tiny --seed 3 --out %s", dir);
    const run_result *r = kronos(args);
    if (r->code != 0) fail_msg("gen-random: %s", r->err);
    /* A checkpoint already in --out (the bundled model, given by mistake) is not replaced
     * unless --force says so: the refusal names the file and the way out, and writes nothing. */
    char keep[2600];
    snprintf(keep, sizeof keep, "cp %s/predictor/model.safetensors %s/rand-before", dir, g_tmp);
    assert_int_equal(system(keep), 0);
    snprintf(args, sizeof args, "gen-random --shape tiny --seed 4 --out %s", dir);
    expect_fail(args, 1, "rand/predictor/config.json already exists", "--force");
    snprintf(keep, sizeof keep, "cmp -s %s/predictor/model.safetensors %s/rand-before", dir, g_tmp);
    assert_int_equal(system(keep), 0);
    snprintf(args, sizeof args, "gen-random --shape tiny --seed 4 --out %s --force", dir);
    r = kronos(args);
    if (r->code != 0) fail_msg("gen-random --force: %s", r->err);
    assert_int_not_equal(system(keep), 0);
    /* Any one file of the pair counts: here a tokenizer's weights alone. */
    snprintf(keep, sizeof keep,
             "mkdir -p %s/half/tokenizer && : > %s/half/tokenizer/model.safetensors", g_tmp, g_tmp);
    assert_int_equal(system(keep), 0);
    snprintf(args, sizeof args, "gen-random --shape tiny --out %s/half", g_tmp);
    expect_fail(args, 1, "half/tokenizer/model.safetensors already exists", NULL);
    snprintf(args, sizeof args, "gen-random --shape tiny --seed 3 --out %s --force", dir);
    r = kronos(args);
    if (r->code != 0) fail_msg("gen-random --force: %s", r->err);
    char *a = daily_csv(60), *b = daily_csv(45);
    char pa[1200], pb[1200];
    snprintf(pa, sizeof pa, "%s", write_csv("a.csv", a));
    snprintf(pb, sizeof pb, "%s", write_csv("b.csv", b));
    free(a);
    free(b);
    snprintf(args, sizeof args,
             "forecast --model %s --input %s --input %s --pred-len 3 --paths 1 --output %s/out",
             dir, pa, pb, g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("batch: %s", r->err);
    char path[1300], body[4096];
    snprintf(path, sizeof path, "%s/out/a.forecast.csv", g_tmp);
    kr_test_slurp(path, body, sizeof body);
    assert_non_null(strstr(body, "timestamps,open"));
    /* 60 weekdays from Monday 2024-01-01 end on Friday 2024-03-22: next is Monday 03-25. */
    assert_non_null(strstr(body, "\n2024-03-25,"));
    snprintf(path, sizeof path, "%s/out/b.forecast.csv", g_tmp);
    kr_test_slurp(path, body, sizeof body);
    assert_non_null(strstr(body, "timestamps,open"));
    /* The batch size is reported; static batches give the same forecasts as one batch. */
    assert_non_null(strstr(r->err, "2 series in 1 static batch of up to 2 series (2 rows)"));
    char first[4096];
    snprintf(first, sizeof first, "%s", body);
    snprintf(
        args, sizeof args,
        "forecast --model %s --input %s --input %s --pred-len 3 --paths 1 --batch-size 1 --output "
        "%s/out",
        dir, pa, pb, g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("batch: %s", r->err);
    assert_non_null(strstr(r->err, "2 series in 2 static batches of up to 1 series (1 rows)"));
    /* Random weights say so wherever they are used. */
    assert_non_null(strstr(r->err, "DEMO MODEL"));
    assert_non_null(strstr(r->err, "for testing the software only"));
    kr_test_slurp(path, body, sizeof body);
    assert_string_equal(body, first);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 3 --batch-size -4", pa);
    expect_fail(args, 2, "--batch-size must be an integer in 0..1048576", NULL);

    /* --seed is decimal as everywhere else: 010 is ten, not octal eight. */
    char ten[1200], ten0[1200], eight[1200];
    const char *const seeds[3] = { "10", "010", "8" };
    char *const dirs[3] = { ten, ten0, eight };
    for (int i = 0; i < 3; i++) {
        snprintf(dirs[i], sizeof ten, "%s/seed-%s", g_tmp, seeds[i]);
        snprintf(args, sizeof args, "gen-random --shape tiny --seed %s --out %s", seeds[i],
                 dirs[i]);
        r = kronos(args);
        if (r->code != 0) fail_msg("gen-random: %s", r->err);
        snprintf(dirs[i] + strlen(dirs[i]), sizeof ten - strlen(dirs[i]),
                 "/predictor/model.safetensors");
    }
    snprintf(args, sizeof args, "cmp -s %s %s", ten, ten0);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "cmp -s %s %s", ten0, eight);
    assert_int_not_equal(system(args), 0);
}

/* An amount column without volume is dropped as the reference drops it (both 0), and forecast
 * and ingest say so on stderr, naming the file and the column; with volume nothing is said. */
static void test_amount_without_volume_warns(void **state) {
    (void)state;
    char args[2600];
    char *body = daily_csv(40);
    /* The same rows with the volume column cut out: timestamps..close, amount. */
    char *cut = malloc(strlen(body) + 1), *w = cut;
    for (const char *line = body; *line;) {
        const char *nl = strchr(line, '\n');
        const char *c5 = line;
        for (int k = 0; k < 5; k++) c5 = strchr(c5, ',') + 1;
        const char *c6 = strchr(c5, ',') + 1;
        memcpy(w, line, (size_t)(c5 - line));
        w += c5 - line;
        memcpy(w, c6, (size_t)(nl + 1 - c6));
        w += nl + 1 - c6;
        line = nl + 1;
    }
    *w = 0;
    const char *with = write_csv("with-volume.csv", body);
    char with_path[1200];
    snprintf(with_path, sizeof with_path, "%s", with);
    assert_non_null(strstr(cut, "timestamps,open,high,low,close,amount\n"));
    const char *without = write_csv("amount-only.csv", cut);
    free(body);
    free(cut);

    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1", without);
    const run_result *r = kronos(args);
    if (r->code != 0) fail_msg("forecast: %s", r->err);
    char want[1400];
    snprintf(want, sizeof want,
             "kronos forecast: warning: %s: column 'amount' ignored: without a volume column, "
             "volume and amount are both 0",
             without);
    if (!strstr(r->err, want)) fail_msg("stderr lacks '%s': %s", want, r->err);

    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1", with_path);
    r = kronos(args);
    if (r->code != 0) fail_msg("forecast: %s", r->err);
    assert_null(strstr(r->err, "ignored"));

    snprintf(args, sizeof args, "ingest --symbol AMT --interval 1d --db %s/amount.db %s", g_tmp,
             without);
    r = kronos(args);
    if (r->code != 0) fail_msg("ingest: %s", r->err);
    snprintf(want, sizeof want, "kronos ingest: warning: %s: column 'amount' ignored", without);
    if (!strstr(r->err, want)) fail_msg("stderr lacks '%s': %s", want, r->err);
}

static void test_bad_input(void **state) {
    (void)state;
    char args[2048];
    const char *p;
    p = write_csv(
        "nocol.csv",
        "timestamps,open,high,low,volume\n2024-01-01,1,2,0.5,10\n2024-01-02,1,2,0.5,10\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "nocol.csv", "close");

    p = write_csv("nan.csv",
                  "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1\n2024-01-02,1,2,0.5,nan\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "nan.csv: line 3", "close");

    p = write_csv("inf.csv",
                  "timestamps,open,high,low,close\n2024-01-01,1,inf,0.5,1\n2024-01-02,1,2,0.5,1\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "inf.csv: line 2", "high");

    p = write_csv("order.csv",
                  "timestamps,open,high,low,close\n2024-01-02,1,2,0.5,1\n2024-01-01,1,2,0.5,1\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "order.csv: line 3", "timestamps");

    p = write_csv("hl.csv",
                  "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1\n2024-01-02,1,0.4,0.5,1\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "hl.csv: line 3", "high");

    p = write_csv("neg.csv",
                  "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1\n2024-01-02,-1,2,0.5,1\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "neg.csv: line 3", "open");

    p = write_csv("one.csv", "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", p);
    expect_fail(args, 1, "one.csv", "too few rows");

    snprintf(args, sizeof args, "forecast --input %s/does-not-exist.csv --pred-len 2", g_tmp);
    expect_fail(args, 1, "does-not-exist.csv", "cannot open");

    snprintf(args, sizeof args, "forecast --input %s --pred-len abc",
             kr_test_fixture("regression_input.csv"));
    expect_fail(args, 2, "--pred-len", NULL);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --window sideways",
             kr_test_fixture("regression_input.csv"));
    expect_fail(args, 2, "--window", NULL);
    snprintf(args, sizeof args, "forecast --pred-len 2");
    expect_fail(args, 2, "--input", NULL);
    snprintf(args, sizeof args,
             "forecast --input %s --pred-len 2 --model %s/nowhere --tokenizer %s/nowhere",
             kr_test_fixture("regression_input.csv"), g_tmp, g_tmp);
    expect_fail(args, 1, "nowhere", NULL);

    p = write_csv("fut.csv", "timestamps\n2024-08-29 13:05:00\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --future-timestamps %s",
             kr_test_fixture("regression_input.csv"), p);
    expect_fail(args, 1, "fut.csv", "pred-len");
    expect_fail("frobnicate", 2, "unknown command", NULL);

    /* A FIFO is refused, never waited on (README): also by the JSON sniffing of the input. */
    char fifo[1200];
    snprintf(fifo, sizeof fifo, "%s/candles.fifo", g_tmp);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", fifo);
    const kr_test_run *fr = kr_test_kronos(g_tmp, "timeout 20", args);
    if (fr->code != 1 || !strstr(fr->err, "not a regular file (a FIFO)"))
        fail_msg("forecast --input FIFO: exit %d (124: it waited), stderr: %s", fr->code, fr->err);
    unlink(fifo);
}

/* Overwrites float `index` of tensor `name` in an F32 safetensors file with v. */
static void poison_f32(const char *path, const char *name, int index, float v) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    size_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
    char *h = malloc(hl + 1);
    assert_int_equal(fread(h, 1, hl, f), hl);
    h[hl] = 0;
    cJSON *j = cJSON_Parse(h);
    const cJSON *t = cJSON_GetObjectItem(j, name);
    assert_non_null(t);
    long off = 8 + (long)hl +
               (long)cJSON_GetArrayItem(cJSON_GetObjectItem(t, "data_offsets"), 0)->valuedouble +
               4L * index;
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    assert_int_equal(fwrite(&v, 4, 1, f), 1);
    fclose(f);
    cJSON_Delete(j);
    free(h);
}

/* A NaN weight fails the load (exit 1, naming the tensor) for every command that loads a
 * model; --allow-nonfinite-weights loads it anyway. */
static void test_nonfinite_weights(void **state) {
    (void)state;
    char args[4096], dir[1200], st[1300];
    snprintf(dir, sizeof dir, "%s/nonfinite", g_tmp);
    snprintf(args, sizeof args, "gen-random --shape tiny --seed 5 --out %s", dir);
    const run_result *r = kronos(args);
    if (r->code != 0) fail_msg("gen-random: %s", r->err);
    snprintf(st, sizeof st, "%s/predictor/model.safetensors", dir);
    poison_f32(st, "transformer.0.ffn.w1.weight", 7, NAN);
    snprintf(args, sizeof args, "forecast --model %s --input %s --pred-len 2", dir,
             kr_test_fixture("regression_input.csv"));
    expect_fail(args, 1, "tensor 'transformer.0.ffn.w1.weight' element 7", "is NaN");
    snprintf(args, sizeof args,
             "forecast --model %s --input %s --pred-len 2 "
             "--allow-nonfinite-weights",
             dir, kr_test_fixture("regression_input.csv"));
    r = kronos(args);
    if (r->code != 0) fail_msg("--allow-nonfinite-weights: exit %d: %s", r->code, r->err);
    snprintf(args, sizeof args, "quantize --model %s --quant int8 --out %s/q", dir, g_tmp);
    expect_fail(args, 1, "transformer.0.ffn.w1.weight", "is NaN");
    /* bench and eval-quant load a model too, and take the flag as the README says. */
    char fl[2048];
    snprintf(fl, sizeof fl, "bench --model %s --lookback 16 --pred-len 2 --paths 1 --repeat 1",
             dir);
    expect_fail(fl, 1, "transformer.0.ffn.w1.weight", "is NaN");
    snprintf(args, sizeof args, "%s --allow-nonfinite-weights", fl);
    r = kronos(args);
    if (r->code != 0) fail_msg("bench --allow-nonfinite-weights: exit %d: %s", r->code, r->err);
    snprintf(fl, sizeof fl,
             "eval-quant --model %s --quant f32 --kv-dtype bf16 --windows 1 --paths 2 "
             "--pred-len 2 --lookback 16 --data %s",
             dir, kr_test_fixture("csv/aapl_1d_2019.csv"));
    expect_fail(fl, 1, "transformer.0.ffn.w1.weight", "is NaN");
    snprintf(args, sizeof args, "%s --allow-nonfinite-weights", fl);
    r = kronos(args);
    if (r->code != 0)
        fail_msg("eval-quant --allow-nonfinite-weights: exit %d: %s", r->code, r->err);
}

/* Runs `kronos ARGS < in` and returns its exit status; stdout into out (a file). */
static int kronos_stdin(const char *args, const char *in, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "env -u KRONOS_DB %s/kronos %s <%s >%s 2>/dev/null", KR_BINARY_DIR,
             args, in, out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Inputs people have: pandas JSON frames (records with Date/Open keys, split), standard input,
 * quantile columns in CSV, consistent candles, a named market, and the hints for a semicolon
 * file, swapped model directories and an overflowing window. */
static void test_inputs_people_have(void **state) {
    (void)state;
    char args[4096], out[1300];
    const char *split = write_csv(
        "split.json",
        "{\"columns\":[\"Open\",\"High\",\"Low\",\"Close\",\"Volume\"],"
        "\"index\":[\"2024-06-18 11:15:00\",\"2024-06-18 11:20:00\",\"2024-06-18 11:25:00\"],"
        "\"data\":[[11.27,11.28,11.26,11.27,379],[11.27,11.28,11.27,11.27,277],"
        "[11.27,11.29,11.26,11.28,410]]}");
    /* The docs/api.md example: after 11:30 comes the afternoon session (SSE, inferred). */
    snprintf(args, sizeof args, "forecast --input %s --pred-len 3 --paths 2", split);
    const run_result *r = kronos(args);
    if (r->code) fail_msg("%s", r->err);
    assert_non_null(strstr(r->out, "\n2024-06-18 11:30:00,"));
    assert_non_null(strstr(r->out, "\n2024-06-18 13:05:00,"));
    assert_non_null(strstr(r->err, "DEMO MODEL"));
    /* As NYSE bars: on through the morning. */
    snprintf(args, sizeof args, "forecast --input %s --pred-len 3 --paths 2 --market nyse", split);
    r = kronos(args);
    assert_non_null(strstr(r->out, "\n2024-06-18 11:35:00,"));
    /* Records with pandas' capitalised keys; a DatetimeIndex written as epoch milliseconds. */
    char rec[1300];
    snprintf(rec, sizeof rec, "%s",
             write_csv("records.json", "[{\"Date\":1704153600000,\"Open\":10,\"High\":11,\"Low\":9,"
                                       "\"Close\":10.5,\"Volume\":5},"
                                       "{\"Date\":1704240000000,\"Open\":10.5,\"High\":11,\"Low\":"
                                       "10,\"Close\":10.8,\"Volume\":6},"
                                       "{\"Date\":1704326400000,\"Open\":10.8,\"High\":11.5,"
                                       "\"Low\":10.5,\"Close\":11,\"Volume\":"
                                       "4}]"));
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --quantiles 0.1,0.9", rec);
    r = kronos(args);
    if (r->code) fail_msg("%s", r->err);
    assert_non_null(strstr(r->out, "timestamps,open,high,low,close,volume,amount,open_q0.1,"));
    assert_non_null(strstr(r->out, "close_q0.9,volume_q0.9,amount_q0.9\n2024-01-05 00:00:00,"));
    /* Standard input, consistent candles: every row's high brackets open and close. */
    snprintf(out, sizeof out, "%s/stdin.csv", g_tmp);
    snprintf(args, sizeof args, "forecast --input - --pred-len 6 --paths 8 --ohlc consistent");
    assert_int_equal(kronos_stdin(args, KR_SOURCE_DIR "/data/AAPL_1d.csv", out), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char line[512];
    int rows = 0;
    assert_non_null(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        double o, h, l, c, v, a;
        char ts[32];
        assert_int_equal(
            sscanf(line, "%31[^,],%lf,%lf,%lf,%lf,%lf,%lf", ts, &o, &h, &l, &c, &v, &a), 7);
        assert_true(h >= o && h >= c && l <= o && l <= c && v >= 0 && a >= 0);
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, 6);
    /* Hints. */
    const char *semi =
        write_csv("semi.csv", "timestamps;open;high;low;close\n2024-01-01;1;2;0.5;1\n");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2", semi);
    expect_fail(args, 1, "missing required column", "the header contains ';'");
    snprintf(args, sizeof args,
             "forecast --model %s/models/kronos-demo/tokenizer --tokenizer "
             "%s/models/kronos-demo/predictor --input %s --pred-len 2",
             KR_SOURCE_DIR, KR_SOURCE_DIR, rec);
    expect_fail(args, 1, "are --model and --tokenizer swapped?", NULL);
    /* The default lookback fits the window (no note); a longer one asked for gets the note. */
    snprintf(args, sizeof args, "forecast --input %s/data/AAPL_1d.csv --pred-len 4", KR_SOURCE_DIR);
    r = kronos(args);
    assert_null(strstr(r->err, "max-context"));
    snprintf(args, sizeof args, "forecast --input %s/data/AAPL_1d.csv --pred-len 4 --lookback 512",
             KR_SOURCE_DIR);
    r = kronos(args);
    assert_non_null(strstr(r->err, "lookback 512 + pred-len 4 > max-context 512"));
    assert_non_null(strstr(r->err, "--lookback 508"));
    snprintf(args, sizeof args, "forecast --input %s/data/AAPL_1d.csv --pred-len 4 --lookback 508",
             KR_SOURCE_DIR);
    r = kronos(args);
    assert_null(strstr(r->err, "max-context"));
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --market LSE", rec);
    expect_fail(args, 2, "unknown market 'LSE'", NULL);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --ohlc tidy", rec);
    expect_fail(args, 2, "--ohlc", NULL);
    /* kronos help CMD. */
    r = kronos("help forecast");
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "usage: kronos forecast"));
    expect_fail("help nothing", 2, "unknown command 'nothing'", NULL);
}

/* `kronos bench` states its ISA and the measured FMA peak in every output, and --profile adds
 * each row's step profile, whose GEMM part did the predictor's work. */
static void test_bench_states_isa_peak_and_profile(void **state) {
    (void)state;
    char args[1400];
    snprintf(args, sizeof args,
             "bench --model %s/models/kronos-demo --lookback 16 --pred-len 24 --paths 1,2 "
             "--repeat 1 --threads 2 --profile --json",
             KR_SOURCE_DIR);
    const run_result *r = kronos(args);
    assert_int_equal(r->code, 0);
    cJSON *root = cJSON_Parse(r->out);
    assert_non_null(root);
    const char *isa = cJSON_GetStringValue(cJSON_GetObjectItem(root, "isa"));
    assert_non_null(isa);
    assert_true(!strcmp(isa, "scalar") || !strcmp(isa, "avx2") || !strcmp(isa, "avx512"));
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "fma_peak_gflops")) > 0);
    double bw = cJSON_GetNumberValue(cJSON_GetObjectItem(root, "read_bandwidth_gbs"));
    assert_true(bw > 0);
    double weights = cJSON_GetNumberValue(cJSON_GetObjectItem(root, "weight_bytes"));
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "threads")), 2);
    cJSON *rows = cJSON_GetObjectItem(root, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 2);
    cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        /* f32 weights, one series: the roofline floor, at least every decode step streaming
         * the weights once at the measured bandwidth (a short prefill, so that term rules). */
        double floor_s = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "floor_seconds"));
        double steps = cJSON_GetNumberValue(cJSON_GetObjectItem(row, "decode_tokens")) /
                       cJSON_GetNumberValue(cJSON_GetObjectItem(row, "paths"));
        assert_true(steps == 23);
        if (!(floor_s >= steps * weights / (bw * 1e9)))
            fail_msg("floor %g s below %g steps x %g bytes at %g GB/s", floor_s, steps, weights,
                     bw);
        cJSON *prof = cJSON_GetObjectItem(row, "profile");
        assert_non_null(prof);
        cJSON *gemm = cJSON_GetObjectItem(cJSON_GetObjectItem(prof, "parts"), "gemm");
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(gemm, "gflop")) > 0);
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(prof, "steps_seconds")) > 0);
    }
    cJSON_Delete(root);
    /* Markdown: the header names both, the profile table follows the results. */
    snprintf(args, sizeof args,
             "bench --model %s/models/kronos-demo --lookback 60 --pred-len 4 --paths 1 "
             "--repeat 1 --profile",
             KR_SOURCE_DIR);
    r = kronos(args);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "FMA peak "));
    assert_non_null(strstr(r->out, "read bandwidth "));
    assert_non_null(strstr(r->out, "| floor s (share) |"));
    assert_non_null(strstr(r->out, ", isa "));
    assert_non_null(strstr(r->out, "| gemm | "));
    assert_non_null(strstr(r->out, "| tokenizer_decode | "));
    /* int8 weights run at other peaks than the f32 FMA: no floor claimed. */
    snprintf(args, sizeof args,
             "bench --model %s/models/kronos-demo --lookback 60 --pred-len 4 --paths 1 "
             "--repeat 1 --quant int8 --json",
             KR_SOURCE_DIR);
    r = kronos(args);
    assert_int_equal(r->code, 0);
    root = cJSON_Parse(r->out);
    assert_non_null(root);
    row = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0);
    assert_non_null(row);
    assert_null(cJSON_GetObjectItem(row, "floor_seconds"));
    cJSON_Delete(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forecast_csv_and_json),
        cmocka_unit_test(test_bench_states_isa_peak_and_profile),
        cmocka_unit_test(test_batch_and_gen_random),
        cmocka_unit_test(test_amount_without_volume_warns),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_nonfinite_weights),
        cmocka_unit_test(test_inputs_people_have),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
