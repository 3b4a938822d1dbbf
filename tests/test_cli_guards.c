/*
 * What the `kronos` commands refuse instead of finishing with a wrong or lost result: candle
 * values too large to normalise, forecast stamps before the history, batches whose outputs
 * would overwrite each other or that lose inputs, output files that cannot be written
 * (checked before the work), flags that contradict each other, writes that would drop a
 * stored column or go into a damaged database. And what they accept as people write it:
 * JSON files by their content, decimal seeds with leading zeros.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "test_support.h"

static const char *g_tmp; /* kr_test_dir() */

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    return g_tmp ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

static const kr_test_run *kronos(const char *args) { return kr_test_kronos(g_tmp, "", args); }

/* g_tmp/name (its directory made if needed) holding text; returns the path (static buffer). */
static const char *put(const char *name, const char *text) {
    static char path[1400];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0777);
    *slash = '/';
    assert_int_equal(kr_test_write_file(path, text, strlen(text)), 0);
    return path;
}

/* n daily rows from 2024-01-01 (every day), the amount column's value given as text. */
static char *daily_csv(int n, int with_volume, const char *amount) {
    size_t cap = 128 + (size_t)n * 128;
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap, "timestamps,open,high,low,close%s%s\n",
                                  with_volume ? ",volume" : "", amount ? ",amount" : "");
    for (int i = 0; i < n; i++) {
        int m = 1 + i / 28, d = 1 + i % 28;
        double c = 100 + (i % 13) - (i % 7) * 0.5;
        len += (size_t)snprintf(s + len, cap - len, "2024-%02d-%02d,%.2f,%.2f,%.2f,%.2f", m, d,
                                c - 0.3, c + 1, c - 1, c);
        if (with_volume) len += (size_t)snprintf(s + len, cap - len, ",%d", 1000 + i);
        if (amount) len += (size_t)snprintf(s + len, cap - len, ",%s", i % 2 ? amount : "1e19");
        len += (size_t)snprintf(s + len, cap - len, "\n");
    }
    return s;
}

static void expect(const char *args, int code, const char *needle1, const char *needle2) {
    const kr_test_run *r = kronos(args);
    if (r->code != code || (needle1 && !strstr(r->err, needle1)) ||
        (needle2 && !strstr(r->err, needle2)))
        fail_msg("kronos %s: exit %d (want %d), stderr: %s (want '%s' and '%s')", args, r->code,
                 code, r->err, needle1 ? needle1 : "", needle2 ? needle2 : "");
}

/* Amounts of 1e19..8e19 are float32 values, but their squared spread is not: refused naming
 * the column (it used to forecast -inf with exit 0). */
static void test_values_too_large_to_normalise(void **state) {
    (void)state;
    char *csv = daily_csv(60, 1, "8e19");
    char args[2048];
    snprintf(args, sizeof args, "forecast --input %s --pred-len 3 --top-k 1",
             put("big_amount.csv", csv));
    expect(args, 1, "'amount'", "too large to normalise");
    free(csv);
    /* Past double's range: "out of range", as past float32's (it used to say "not finite"). */
    snprintf(args, sizeof args, "forecast --input %s --pred-len 3",
             put("e400.csv", "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1e400\n"
                             "2024-01-02,1,2,0.5,1\n"));
    expect(args, 1, "line 2, column 'close': '1e400' is out of range", NULL);
}

/* --future-timestamps before the last candle: refused as the HTTP API refuses it. */
static void test_future_stamps_before_history(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --future-timestamps %s",
             kr_test_fixture("regression_input.csv"),
             put("past.csv", "timestamps\n2000-01-01\n2000-01-02\n"));
    expect(args, 1, "future timestamp 1 (2000-01-01", "is not after the last candle");
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --future-timestamps %s",
             kr_test_fixture("regression_input.csv"),
             put("back.csv", "timestamps\n2030-01-02\n2030-01-01\n"));
    expect(args, 1, "back.csv: line 3", "strictly increasing"); /* the file's own check */
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --lookback 1",
             kr_test_fixture("regression_input.csv"));
    expect(args, 2, "--lookback must be an integer in 2..1048576", NULL);
}

/* A batch: outputs that would overwrite each other, an empty directory, more inputs than the
 * batch holds — each refused before any model is loaded. */
static void test_batch_guards(void **state) {
    (void)state;
    char *csv = daily_csv(40, 1, NULL);
    char args[4096], out[1400];
    snprintf(out, sizeof out, "%s/out", g_tmp);
    char a[1400], b[1400];
    snprintf(a, sizeof a, "%s", put("b1/x.csv", csv));
    snprintf(b, sizeof b, "%s", put("b2/x.csv", csv));
    snprintf(args, sizeof args, "forecast --input %s --input %s --pred-len 2 --output %s", a, b,
             out);
    expect(args, 2, "would both be written to", "x.forecast.csv");
    put("b1/x.json", "[]");
    snprintf(args, sizeof args, "forecast --input %s/b1 --pred-len 2 --output %s", g_tmp, out);
    expect(args, 2, "b1/x.csv' and '", "b1/x.json' would both be written");

    snprintf(args, sizeof args, "%s/empty", g_tmp);
    mkdir(args, 0777);
    snprintf(args, sizeof args, "forecast --input %s/empty --pred-len 2", g_tmp);
    expect(args, 2, "holds no .csv or .json file", NULL);

    for (int i = 0; i < 4097; i++) {
        char name[64];
        snprintf(name, sizeof name, "many/s%05d.csv", i);
        put(name, "x\n");
    }
    snprintf(args, sizeof args, "forecast --input %s/many --pred-len 2", g_tmp);
    expect(args, 2, "more than 4096 inputs", NULL);

    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --output %s/nowhere/f.csv", a,
             g_tmp);
    expect(args, 1, "nowhere/f.csv: cannot write", NULL);
    free(csv);
}

/* --quantiles: an empty item is refused naming it (it used to be dropped: "0.1,,0.9" ran as
 * 0.1,0.9), more than 16 says the limit, and a repeated quantile is one CSV column (it used to
 * be two columns of one name), as it is one JSON key. */
static void test_quantile_lists(void **state) {
    (void)state;
    char *csv = daily_csv(40, 1, NULL);
    char in[1400], args[4096];
    snprintf(in, sizeof in, "%s", put("q/in.csv", csv));
    const char *empty[] = { "0.1,,0.9", ",0.5", "0.5,", "" };
    const char *which[] = { "item 2 is empty", "item 1 is empty", "item 2 is empty",
                            "item 1 is empty" };
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --quantiles '%s'", in,
                 empty[i]);
        expect(args, 2, which[i], NULL);
    }
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --quantiles 1.5", in);
    expect(args, 2, "'1.5' is not a number in [0, 1]", NULL);
    snprintf(args, sizeof args,
             "forecast --input %s --pred-len 2 --quantiles "
             "0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08,0.09,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8",
             in);
    expect(args, 2, "at most 16", NULL);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --quantiles 0.9,0.5,0.50,0.9",
             in);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    const char *head = "timestamps,open,high,low,close,volume,amount,open_q0.9,high_q0.9,low_q0.9,"
                       "close_q0.9,volume_q0.9,amount_q0.9,open_q0.5,high_q0.5,low_q0.5,"
                       "close_q0.5,volume_q0.5,amount_q0.5\n";
    assert_memory_equal(r->out, head, strlen(head));
    free(csv);
}

/* --output DIR with one input writes DIR/<name>.forecast.<ext>, as a batch does (it used to
 * be refused as "is a directory"); a name ending in '/' is made as a directory. */
static void test_output_directory(void **state) {
    (void)state;
    char *csv = daily_csv(40, 1, NULL);
    char in[1400], args[4096], path[1500], dir[1400];
    snprintf(in, sizeof in, "%s", put("od/one.csv", csv));
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1", in);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    char *want = strdup(r->out);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1 --output %s/od", in,
             g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    static char got[1 << 16];
    snprintf(path, sizeof path, "%s/od/one.forecast.csv", g_tmp);
    kr_test_slurp(path, got, sizeof got);
    assert_string_equal(got, want);
    snprintf(dir, sizeof dir, "%s/od/new/", g_tmp);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1 --output %s", in, dir);
    r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    snprintf(path, sizeof path, "%sone.forecast.csv", dir);
    kr_test_slurp(path, got, sizeof got);
    assert_string_equal(got, want);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --output ''", in);
    expect(args, 2, "--output must not be empty", NULL);
    free(want);
    free(csv);
}

/* A JSON file is read as JSON whatever its name (a BOM before it too), and the columns layout
 * works at the top level: the same forecast as the CSV. */
static void test_json_by_content(void **state) {
    (void)state;
    const char *json = "\xEF\xBB\xBF {\"timestamps\": [\"2024-01-01\", \"2024-01-02\", "
                       "\"2024-01-03\", \"2024-01-04\"], \"open\": [1, 1.1, 1.2, 1.1], "
                       "\"high\": [2, 2, 2, 2], \"low\": [0.5, 0.5, 0.5, 0.5], "
                       "\"close\": [1.5, 1.2, 1.3, 1.4]}";
    const char *csv = "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1.5\n"
                      "2024-01-02,1.1,2,0.5,1.2\n2024-01-03,1.2,2,0.5,1.3\n"
                      "2024-01-04,1.1,2,0.5,1.4\n";
    char args[2048];
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1", put("cols.csv", csv));
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    char *want = strdup(r->out);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --top-k 1",
             put("cols.txt", json));
    r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    assert_string_equal(r->out, want);
    free(want);
}

/* Seeds are decimal ("010" is ten, not octal eight) or 0x hex. */
static void test_seed_forms(void **state) {
    (void)state;
    char args[2048], *out[4];
    const char *seeds[4] = { "010", "10", "0x10", "16" };
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "forecast --input %s --pred-len 3 --paths 2 --seed %s",
                 kr_test_fixture("regression_input.csv"), seeds[i]);
        const kr_test_run *r = kronos(args);
        if (r->code != 0) fail_msg("--seed %s: %s", seeds[i], r->err);
        out[i] = strdup(r->out);
    }
    assert_string_equal(out[0], out[1]);
    assert_string_equal(out[2], out[3]);
    assert_string_not_equal(out[1], out[3]);
    for (int i = 0; i < 4; i++) free(out[i]);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 3 --seed 0x",
             kr_test_fixture("regression_input.csv"));
    expect(args, 2, "--seed", NULL);
}

/* Contradicting flags are usage errors (exit 2) before any loading, and an unwritable report
 * fails before minutes of evaluation. */
static void test_flags_checked_first(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "eval-quant --quant int8 --json %s/nowhere/r.json", g_tmp);
    expect(args, 1, "error: ", "nowhere/r.json: cannot write");
    snprintf(args, sizeof args, "eval-quant --quant q4 --quant-model %s", g_tmp);
    expect(args, 2, "exclude each other", NULL);
    snprintf(args, sizeof args, "quantize --quant q4 --method smoothquant --out %s/q --calib %s",
             g_tmp, kr_test_fixture("regression_input.csv"));
    expect(args, 2, "--method smoothquant applies to int8", NULL);
    snprintf(args, sizeof args, "eval-quant --quant fp8 --method gptq --calib %s --json %s/r.json",
             kr_test_fixture("regression_input.csv"), g_tmp);
    expect(args, 2, "--method gptq applies to q4 and int8", NULL);
    snprintf(args, sizeof args, "analyze AAPL --out %s/nowhere/r.html", g_tmp);
    expect(args, 1, "nowhere/r.html: cannot write", NULL); /* before any store or model */
    expect("analyze AAPL --max-context 4 --horizon 3", 2, "--horizon must be below --max-context",
           "2-row history");
}

/* forecast, analyze and eval-quant read the sampling flags one way: same ranges, same
 * words. A window too small for the horizon is a usage error before loading, and the re-run
 * note never counts more steps than there are nor suggests a length below 1. */
static void test_sampling_flags_shared(void **state) {
    (void)state;
    const char *cmds[3] = { "forecast --input x.csv --pred-len 3", "analyze AAPL",
                            "eval-quant --quant int8" };
    char args[2048];
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s --seed -1", cmds[i]);
        expect(args, 2, "--seed must be an unsigned 64-bit integer (decimal or 0x hex)", "'-1'");
    }
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s --max-context 1", cmds[i]);
        expect(args, 2, "--max-context must be an integer in 2..65536", NULL);
        snprintf(args, sizeof args, "%s --top-p 1.5", cmds[i]);
        expect(args, 2, "--top-p must be in (0, 1]", NULL);
        snprintf(args, sizeof args, "%s --lookback 1", cmds[i]);
        expect(args, 2, "--lookback must be an integer in 2..1048576", NULL);
        /* Temperature 0 is what people write for greedy: the refusal says what to use. */
        snprintf(args, sizeof args, "%s --temperature 0", cmds[i]);
        expect(args, 2, "--temperature must be a number in [1e-6, 1e6]", "is --top-k 1");
    }
    expect("forecast --input x.csv --pred-len 3 --max-context 2", 2,
           "--pred-len 3 exceeds --max-context 2", NULL);
    const char *input = kr_test_fixture("regression_input.csv");
    snprintf(args, sizeof args,
             "forecast --input %s --pred-len 2 --max-context 2 --lookback 5 --top-k 1", input);
    const kr_test_run *r = kronos(args);
    if (r->code != 0 || !strstr(r->err, "at each of the last 2 steps") ||
        !strstr(r->err, "To avoid it use --window rolling"))
        fail_msg("%s: exit %d, stderr %s", args, r->code, r->err);
    snprintf(args, sizeof args,
             "forecast --input %s --pred-len 2 --max-context 3 --lookback 3 --top-k 1", input);
    r = kronos(args);
    if (r->code != 0 || !strstr(r->err, "pass --lookback 2 and a --pred-len of at most 1"))
        fail_msg("%s: exit %d, stderr %s", args, r->code, r->err);
}

/* Rows without volume would drop the volume of a whole stored series: refused, the series
 * unchanged. A damaged database is refused before anything is written into it. */
static void test_ingest_guards(void **state) {
    (void)state;
    char *with = daily_csv(300, 1, NULL);
    char args[4096], db[1400], bad[1400];
    snprintf(db, sizeof db, "%s/store.db", g_tmp);
    snprintf(args, sizeof args, "ingest --symbol AAA --interval 1d --db %s %s", db,
             put("with.csv", with));
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    snprintf(args, sizeof args, "ingest --symbol AAA --interval 1d --db %s %s", db,
             put("without.csv", "timestamps,open,high,low,close\n2030-01-01,1,2,0.5,1\n"
                                "2030-01-02,1,2,0.5,1\n"));
    expect(args, 1, "these candles have no volume, but 300 stored rows do", NULL);
    snprintf(args, sizeof args, "ingest --symbol AAA --interval 1d --db %s %s", db,
             put("with.csv", with));
    r = kronos(args);
    if (r->code != 0 || !strstr(r->out, "now 300 rows")) fail_msg("%s%s", r->out, r->err);

    /* Damage a page in the middle of the file (a copy, its -wal checkpointed by the close). */
    snprintf(bad, sizeof bad, "%s/bad.db", g_tmp);
    FILE *in = fopen(db, "rb"), *outf = fopen(bad, "wb");
    assert_non_null(in);
    assert_non_null(outf);
    char buf[4096];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (total == 8192) memset(buf, 0xA5, n);
        fwrite(buf, 1, n, outf);
        total += n;
    }
    fclose(in);
    fclose(outf);
    assert_true(total > 12288);
    snprintf(args, sizeof args, "ingest --symbol BBB --interval 1d --db %s %s", bad,
             put("with.csv", with));
    expect(args, 1, "the database is damaged", NULL);
    free(with);
}

/* Exit status of `kronos args` with stdout sent to `redirect` (e.g. ">/dev/full", ">&-"). */
static int exit_with_stdout(const char *args, const char *redirect) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env -u KRONOS_DB %s/kronos %s %s 2>%s/stderr </dev/null",
             KR_BINARY_DIR, args, redirect, g_tmp);
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A result lost on the way out is a failure: stdout on a full disk or closed (a CSV forecast
 * small enough for stdio's buffer, a store listing, once exited 0 having written nothing). */
static void test_lost_stdout_fails(void **state) {
    (void)state;
    char args[2048], db[1400];
    snprintf(db, sizeof db, "%s/out.db", g_tmp);
    char *csv = daily_csv(60, 1, NULL);
    const char *in = put("lost.csv", csv);
    snprintf(args, sizeof args, "ingest --symbol OUT --interval 1d --db %s %s", db, in);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    const char *cmds[] = { "forecast --pred-len 3 --input", "store list --db", "--version" };
    const char *what[] = { in, db, "" };
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s %s", cmds[i], what[i]);
        assert_int_equal(exit_with_stdout(args, ">/dev/null"), 0);
        if (exit_with_stdout(args, ">/dev/full") != 1) fail_msg("%s >/dev/full: exit 0", args);
        if (exit_with_stdout(args, ">&-") != 1) fail_msg("%s >&-: exit 0", args);
    }
    free(csv);
}

/* Inputs past 1 GiB are refused by their size, before parsing: standard input one byte over
 * (read to the limit, never doubled past it), and CSV and JSON files (sparse, so the test
 * writes nothing to disk and the refusal comes before reading). */
static void test_inputs_past_one_gib(void **state) {
    (void)state;
    char cmd[4096], path[1400];
    snprintf(cmd, sizeof cmd,
             "head -c 1073741825 /dev/zero | env -u KRONOS_DB %s/kronos forecast --input - "
             "--pred-len 2 >/dev/null 2>%s/stderr",
             KR_BINARY_DIR, g_tmp);
    const int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    snprintf(path, sizeof path, "%s/stderr", g_tmp);
    char err[4096];
    kr_test_slurp(path, err, sizeof err);
    if (!strstr(err, "standard input is larger than 1073741824 bytes")) fail_msg("%s", err);
    const char *names[] = { "big.csv", "big.json" };
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", g_tmp, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(ftruncate(fileno(f), ((off_t)1 << 30) + 1), 0);
        fclose(f);
        char args[1500];
        snprintf(args, sizeof args, "forecast --input %s --pred-len 2", path);
        expect(args, 1, names[i], "larger than a candle file can be");
        unlink(path);
    }
}

/* Empty values that would widen what a command touches: "--db $DB" with DB unset is not the
 * default store, and "--from $F" with F unset is not "from the first row" (a delete took the
 * whole series). */
static void test_empty_values_refused(void **state) {
    (void)state;
    char args[2048], db[1400];
    snprintf(db, sizeof db, "%s/empty.db", g_tmp);
    char *csv = daily_csv(30, 1, NULL);
    snprintf(args, sizeof args, "ingest --symbol EMP --interval 1d --db %s %s", db,
             put("empty.csv", csv));
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    expect("ingest --symbol EMP --interval 1d --db '' x.csv", 2, "--db is empty", NULL);
    expect("store list --db ''", 2, "--db is empty", NULL);
    expect("analyze --db '' EMP", 2, "--db is empty", NULL);
    expect("serve --check-config --db ''", 2, "--db is empty", NULL);
    snprintf(args, sizeof args, "store delete --db %s --symbol EMP --interval 1d --from '' --to ''",
             db);
    expect(args, 2, "--from: empty", NULL);
    snprintf(args, sizeof args, "store delete --db %s --symbol EMP --interval 1d --to ''", db);
    expect(args, 2, "--to: empty", NULL);
    snprintf(args, sizeof args, "store list --db %s", db);
    r = kronos(args);
    if (r->code != 0 || !strstr(r->out, "EMP"))
        fail_msg("the series is gone: %s%s", r->out, r->err);
    free(csv);

    /* An empty file named as the store is not made one by a command that only reads. */
    const char *blank = put("blank.db", "");
    snprintf(args, sizeof args, "store list --db %s", blank);
    expect(args, 1, "an empty file, not a kronos store", NULL);
    snprintf(args, sizeof args, "analyze --db %s EMP --paths 2 --horizon 2", blank);
    expect(args, 1, "an empty file, not a kronos store", NULL);
    snprintf(args, sizeof args, "store delete --db %s --symbol EMP --interval 1d", blank);
    expect(args, 1, "an empty file, not a kronos store", NULL);
    struct stat sb;
    assert_int_equal(stat(blank, &sb), 0);
    assert_int_equal(sb.st_size, 0);
}

/* An output that names what the command reads is refused before anything is written: one
 * slip between --db and --output once replaced the whole store with an export. */
static void test_output_is_not_the_input(void **state) {
    (void)state;
    char args[4096], db[1400];
    snprintf(db, sizeof db, "%s/same.db", g_tmp);
    char *csv = daily_csv(60, 1, NULL);
    const char *in = put("same.csv", csv);
    snprintf(args, sizeof args, "ingest --symbol SAME --interval 1d --db %s %s", db, in);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    snprintf(args, sizeof args, "store export --db %s --symbol SAME --output %s", db, db);
    expect(args, 2, "is the database", NULL);
    snprintf(args, sizeof args, "analyze --db %s SAME --paths 2 --horizon 2 --out %s/./same.db", db,
             g_tmp);
    expect(args, 2, "is the database", NULL);
    snprintf(args, sizeof args, "forecast --input %s --pred-len 2 --output %s", in, in);
    expect(args, 2, "is an input", NULL);
    snprintf(args, sizeof args, "store list --db %s", db);
    r = kronos(args);
    if (r->code != 0 || !strstr(r->out, "SAME")) fail_msg("the store is damaged: %s", r->err);
    free(csv);
}

/* Smaller promises kept: a watch-list saved with a BOM reads as its symbols; --paths past
 * --max-paths is refused (it ran them all, against "up to N"); a batch of JSON forecasts on
 * stdout is one JSON array; an interval's error says what an interval looks like; a JSON
 * file's row limit is explained as a file's, not a server setting's. */
static void test_small_contracts(void **state) {
    (void)state;
    char args[4096];
    const char *wl = put("bom.txt", "\xEF\xBB\xBF"
                                    "BOMSYM\n");
    snprintf(args, sizeof args, "analyze --db %s/none.db --watchlist %s", g_tmp, wl);
    expect(args, 1, "no database", NULL); /* past the watch-list: BOMSYM was read */
    expect("analyze --db /nonexistent/x.db AAPL --paths 200 --max-paths 100", 2,
           "--paths 200 is more than --max-paths 100", NULL);
    expect("analyze --db /nonexistent/x.db AAPL --interval ' 5m'", 2, "expected a count and a unit",
           NULL);
    char *csv = daily_csv(40, 1, NULL);
    const char *in = put("arr.csv", csv);
    snprintf(args, sizeof args, "forecast --input %s --input %s --pred-len 2 --format json", in,
             in);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    cJSON *doc = cJSON_Parse(r->out);
    if (!cJSON_IsArray(doc) || cJSON_GetArraySize(doc) != 2)
        fail_msg("not an array: %.200s", r->out);
    cJSON_Delete(doc);
    snprintf(args, sizeof args, "ingest --db %s/one.db --symbol ONE --interval 1d %s", g_tmp,
             put("one.json", "[[\"2024-01-02\",1,2,0.5,1.5]]"));
    expect(args, 1, "JSON candles need at least 2 rows; give a single candle as CSV", NULL);
    free(csv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_too_large_to_normalise),
        cmocka_unit_test(test_future_stamps_before_history),
        cmocka_unit_test(test_batch_guards),
        cmocka_unit_test(test_quantile_lists),
        cmocka_unit_test(test_output_directory),
        cmocka_unit_test(test_json_by_content),
        cmocka_unit_test(test_seed_forms),
        cmocka_unit_test(test_flags_checked_first),
        cmocka_unit_test(test_ingest_guards),
        cmocka_unit_test(test_sampling_flags_shared),
        cmocka_unit_test(test_lost_stdout_fails),
        cmocka_unit_test(test_empty_values_refused),
        cmocka_unit_test(test_output_is_not_the_input),
        cmocka_unit_test(test_small_contracts),
        cmocka_unit_test(test_inputs_past_one_gib),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
