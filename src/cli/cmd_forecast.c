/*
 * cli/cmd_forecast — `kronos forecast`: reads candle CSVs, runs the forecast (one series or a
 * batch of any lengths in one engine call) and writes the mean path as CSV or everything
 * (paths, tokens, quantiles, timing) as JSON.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kronos/analyst.h"
#include "kronos/util.h"
#include "common/limits.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "cli/engine_open.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "cli/progress.h"
#include "kronos.h"
#include "kronos/forecast_json.h"
#include "kronos/series.h"
#include "common/candles_input.h"
#include "common/notes.h"

#define CMD "forecast"
#define MAX_INPUTS 4096
#define KR_CLI_MAX_QUANTILES 16 /* as the HTTP API's (KR_API_MAX_QUANTILES) */
/* Default sample paths: the mean of 32 has a standard error of std / 5.7, and the 10 % and
 * 90 % quantiles rest on 3 paths each side — a band, not just a line — at ~32x the decode cost
 * of one path batched together (one prefill; analyze adds paths until its targets are met,
 * starting from as many). */
#define KR_CLI_FORECAST_PATHS 32

static const kr_cli_opt k_opts[] = {
    KR_CLI_OPT_MODEL(
        "predictor directory (config.json + model.safetensors), or a\ndirectory holding predictor/ "
        "and tokenizer/ (default: the\nbundled demo model)"),
    KR_CLI_OPT_TOKENIZER(KR_CLI_HELP_TOKENIZER),
    { "input", 'i', KR_CLI_FILE, "FILE|DIR|-", 0, 0, NULL,
      "candle CSV (timestamps,open,high,low,close[,volume,amount])\nor JSON (rows, columns, or a "
      "pandas to_json frame:\nrecords, split, columns, index; keys like Date, Open);\n'-' reads "
      "standard input; repeat it, or give a directory,\nto forecast a batch; the files may also "
      "follow the flags\nas operands (kronos forecast a.csv b.csv --pred-len 5)" },
    { "pred-len", 'n', KR_CLI_INT, "N", 0, 0, NULL, "candles to forecast (required)" },
    KR_CLI_OPT_LOOKBACK("history rows used (default: all, up to max-context minus\npred-len, so "
                        "the window is never "
                        "re-run: as analyze)"),
    KR_CLI_OPT_MAX_CONTEXT("predictor window (default 512)"),
    KR_CLI_OPT_PATHS(
        "sample paths (default 32); the mean path is the forecast\n(1 is the reference's single "
        "sample)"),
    KR_CLI_OPT_TEMPERATURE("sampling temperature (default 1.0)"),
    KR_CLI_OPT_TOP_K("keep the K most likely tokens (default 0 = off; 1 = greedy)"),
    KR_CLI_OPT_TOP_P("nucleus sampling threshold (default 0.9)"),
    KR_CLI_OPT_SEED("random seed, decimal or 0x hex (default 0); each path has\nits own stream"),
    KR_CLI_OPT_WINDOW(
        "past max-context: re-run the window like the reference\n(exact, default) or slide the KV "
        "cache (rolling, faster,\napproximate)"),
    { "future-timestamps", 'f', KR_CLI_FILE, "FILE", 0, 0, NULL,
      "CSV with a timestamps column (pred-len rows); default:\nthe market's calendar (holidays, "
      "sessions)" },
    KR_CLI_OPT_MARKET(
        "exchange calendar of the forecast bars: NYSE, SSE, HKEX,\nCRYPTO, ... (default: inferred "
        "from the history;\ndata/calendars/README.md)"),
    KR_CLI_OPT_OHLC(
        "consistent (default): every path's high >= max(open,\nclose), low <= min(open, close), "
        "prices, volume and amount\n>= 0, before the mean and quantiles; raw: the model's\ncandles "
        "as the reference writes them (volumes may be < 0)"),
    { "quantiles", 'q', KR_CLI_TEXT, "LIST|none", 0, 0, NULL,
      "quantiles for --format json (default 0.1,0.5,0.9); given\nwith csv, adds columns <col>_q<q> "
      "(close_q0.1, ...) for\nevery column; the csv default is close_q0.1 and close_q0.9\n(none: "
      "the mean's seven columns only)" },
    { "format", 'F', KR_CLI_CHOICE, "csv|json", 0, 0, NULL,
      "csv: the mean path, prices with the input's decimals, whole\nvolumes when the input's are; "
      "json: mean, quantiles, every\npath with its tokens, timing, exact doubles (default csv)" },
    { "output", 'o', KR_CLI_FILE, "FILE|DIR", 0, 0, NULL,
      "write there instead of stdout; a directory (existing, or\na name ending in '/'; a batch "
      "needs one) receives\n<name>.forecast.<csv|json> per input" },
    KR_CLI_OPT_THREADS,
    KR_CLI_OPT_BATCH_SIZE(
        "a batch of inputs runs in static batches of N series x\npaths rows, each finished before "
        "the next (default 64;\n0 = every series at once)"),
    KR_CLI_OPT_QUANT(
        "weights: f32 (default), bf16, int8, fp8, q4 (quantised at\nload; a kronos quantize "
        "checkpoint keeps its own format)"),
    KR_CLI_OPT_KV_DTYPE("KV-cache precision: f32 (default), bf16, int8"),
    KR_CLI_OPT_ALLOW_NONFINITE(KR_CLI_HELP_ALLOW_NONFINITE),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos forecast` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_forecast_spec = {
    "forecast",
    "CANDLES.csv --pred-len N [flags]\n       kronos forecast --input CANDLES.csv --pred-len N "
    "[flags]",
    "forecast candles from CSV or JSON files (mean path, paths, quantiles)",
    "Forecasts the next N candles of each input series with a Kronos model: the mean of\n"
    "32 sample paths with the 10 % and 90 % quantiles of the close, consistent candles\n"
    "(high >= max(open, close), low <= min(open, close), volume and amount >= 0), prices\n"
    "with the input's own decimals. A history under 32 rows is warned about: the model\n"
    "normalises each series by its own mean and spread, which so few rows do not pin down.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FILE,
    0,
    NULL,
    NULL,
};

typedef struct opts {
    const char *model, *tokenizer, *future_file, *output, *format, *quant, *kv_dtype, *market;
    kr_ohlc_mode ohlc;
    int quantiles_given, quantiles_none; /* --quantiles LIST / --quantiles none */
    int lookback_given;
    const char *inputs[MAX_INPUTS];
    int n_inputs, threads, allow_nonfinite;
    int batch_rows; /* --batch-size */
    double quantiles[KR_CLI_MAX_QUANTILES];
    int n_quantiles;
    kr_forecast_params p;
} opts;

/* --quantiles "0.1,0.5,0.9": each item a number in [0, 1] (a double, as HTTP clients send
 * them, so both ask the engine the same quantile), in the order given. An empty item is
 * refused rather than dropped; one given twice (as the output names it: %g) is kept once, as
 * the JSON writer and the HTTP API do, so the CSV never gets two columns of one name.
 * Returns 0, or 2 after the usage message. */
static int parse_quantiles(const char *s, opts *o) {
    o->n_quantiles = 0;
    int item = 0;
    for (const char *p = s;; item++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char tok[64], key[32], prev[32], msg[160];
        if (len == 0 || len >= sizeof tok) {
            snprintf(msg, sizeof msg, "--quantiles item %d is %s", item + 1,
                     len ? "too long" : "empty");
            return kr_cli_usage_error(
                CMD, "%s (a comma list of numbers in [0, 1], e.g. 0.1,0.5,0.9)", msg);
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (o->n_quantiles >= KR_CLI_MAX_QUANTILES) {
            snprintf(msg, sizeof msg, "--quantiles takes at most %d numbers", KR_CLI_MAX_QUANTILES);
            return kr_cli_usage_error(CMD, "%s", msg);
        }
        double *q = &o->quantiles[o->n_quantiles];
        if (!kr_arg_double(tok, 0.0, 1.0, q))
            return kr_cli_usage_error(CMD, "--quantiles: '%s' is not a number in [0, 1]", tok);
        snprintf(key, sizeof key, "%g", *q);
        int repeat = 0;
        for (int j = 0; j < o->n_quantiles && !repeat; j++) {
            snprintf(prev, sizeof prev, "%g", o->quantiles[j]);
            repeat = !strcmp(prev, key);
        }
        o->n_quantiles += !repeat;
        if (!comma) return 0;
        p = comma + 1;
    }
}

/* Adds one --input: a file, '-', or every .csv/.json file of a directory (sorted). Returns 0,
 * or -1 with msg set. */
static int add_input(opts *o, const char *path, char ***owned, int *n_owned, char *msg,
                     size_t cap) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        if (o->n_inputs >= MAX_INPUTS) {
            snprintf(msg, cap, "more than %d inputs ('%s' is one too many)", MAX_INPUTS, path);
            return -1;
        }
        o->inputs[o->n_inputs++] = path;
        return 0;
    }
    struct dirent **list;
    int n = scandir(path, &list, NULL, alphasort), found = 0, rc = 0;
    if (n < 0) {
        snprintf(msg, cap, "cannot read input directory '%s': %s", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(list[i]->d_name);
        int csv = len > 4 && !strcmp(list[i]->d_name + len - 4, ".csv");
        int json = len > 5 && !strcmp(list[i]->d_name + len - 5, ".json");
        if ((csv || json) && rc == 0) {
            found++;
            char *full = malloc(strlen(path) + len + 2);
            char **grown = full ? realloc(*owned, (size_t)(*n_owned + 1) * sizeof(char *)) : NULL;
            if (!grown) {
                free(full);
                snprintf(msg, cap, "%s: out of memory", path);
                rc = -1;
            } else if (o->n_inputs >= MAX_INPUTS) {
                free(full);
                *owned = grown;
                snprintf(msg, cap, "%s: more than %d inputs in all; split the batch", path,
                         MAX_INPUTS);
                rc = -1;
            } else {
                sprintf(full, "%s/%s", path, list[i]->d_name);
                *owned = grown;
                (*owned)[(*n_owned)++] = full;
                o->inputs[o->n_inputs++] = full;
            }
        }
        free(list[i]);
    }
    free(list);
    if (rc == 0 && !found) {
        snprintf(msg, cap, "input directory '%s' holds no .csv or .json file", path);
        rc = -1;
    }
    return rc;
}

static void fmt_ts(int64_t t, int date_only, char *buf) {
    kr_format_timestamp(t, date_only, buf, 32);
}

static const char *const k_cols[6] = { "open", "high", "low", "close", "volume", "amount" };

/* Decimals to print column c with: the input's own (kr_candles_decimals), else enough for
 * nine significant digits of its largest value. Never an exponent: a spreadsheet or a trader
 * reads 1215296640, not 1.21529664e+09. */
static int column_decimals(const kr_candles *cs, int c) {
    int d = kr_candles_decimals(cs, c);
    if (d >= 0) return d;
    double most = 0;
    for (int64_t i = 0; i < cs->n; i++) {
        const double v = fabs(cs->values[i * KR_N_FEATURES + c]);
        if (v > most) most = v;
    }
    d = most >= 1 ? 8 - (int)floor(log10(most)) : 8 + (int)ceil(-log10(most > 0 ? most : 1));
    return d < 0 ? 0 : d > 12 ? 12 : d;
}

/* The mean path; with --quantiles, one more column per quantile and candle field,
 * <field>_q<q> ("close_q0.1"), after the reference's seven; by default (more than one path)
 * the close's 10 % and 90 % quantiles, the band a trader reads beside the mean. */
static int write_csv(FILE *f, const kr_path_set *ps, const opts *o, const kr_candles *cs) {
    static const double k_band[2] = { 0.1, 0.9 };
    const int band = !o->quantiles_given && !o->quantiles_none && ps->paths > 1;
    const int P = ps->pred_len, nq = o->quantiles_given ? o->n_quantiles : band ? 2 : 0;
    const double *qs = o->quantiles_given ? o->quantiles : k_band;
    double *qv = nq ? malloc((size_t)nq * P * 6 * sizeof *qv) : NULL;
    if (nq && !qv) return -1;
    for (int k = 0; k < nq; k++) {
        kr_error e;
        if (kr_path_set_quantile(ps, qs[k], qv + (size_t)k * P * 6, &e) != KR_OK) {
            free(qv);
            return -1;
        }
    }
    int dec[6];
    for (int c = 0; c < 6; c++) dec[c] = column_decimals(cs, c);
    const int c_first = band ? KR_CLOSE : 0, c_last = band ? KR_CLOSE : 5;
    fprintf(f, "timestamps,open,high,low,close,volume,amount");
    for (int k = 0; k < nq; k++)
        for (int c = c_first; c <= c_last; c++) fprintf(f, ",%s_q%g", k_cols[c], qs[k]);
    fprintf(f, "\n");
    for (int i = 0; i < P; i++) {
        char b[32];
        fmt_ts(ps->timestamps[i], cs->date_only, b);
        fprintf(f, "%s", b);
        for (int c = 0; c < 6; c++) fprintf(f, ",%.*f", dec[c], ps->mean[i * 6 + c] + 0.0);
        for (int k = 0; k < nq; k++)
            for (int c = c_first; c <= c_last; c++)
                fprintf(f, ",%.*f", dec[c], qv[((size_t)k * P + i) * 6 + c] + 0.0);
        fprintf(f, "\n");
    }
    free(qv);
    return ferror(f) ? -1 : 0;
}

static kr_status path_set_quantile(void *user, double q, double *out, kr_error *err) {
    return kr_path_set_quantile(user, q, out, err);
}

/* The library's forecast JSON (kronos/forecast_json.h, the HTTP answer's writer too) with
 * the input file and the model's shape in front. */
static int write_json(FILE *f, const kr_forecast *fc, const kr_path_set *ps, const opts *o,
                      const char *input, const kr_candles *cs, int64_t rows_used,
                      const kr_calendar_coverage *cov, const kr_model_info *mi) {
    cJSON *head = cJSON_CreateObject();
    cJSON_AddStringToObject(head, "input", input);
    cJSON_AddStringToObject(head, "ohlc", kr_ohlc_mode_name(o->ohlc));
    cJSON *model = cJSON_AddObjectToObject(head, "model");
    cJSON_AddNumberToObject(model, "d_model", mi->d_model);
    cJSON_AddNumberToObject(model, "n_layers", mi->n_layers);
    cJSON_AddNumberToObject(model, "n_heads", mi->n_heads);
    cJSON_AddNumberToObject(model, "n_params", (double)mi->n_params);
    char *members = cJSON_PrintUnformatted(head);
    cJSON_Delete(head);
    if (!members) return -1;
    members[strlen(members) - 1] = '\0'; /* the object's members, without its braces */
    kr_forecast_json_params jp = kr_forecast_json_default_params();
    jp.params = &o->p;
    jp.history_rows = rows_used;
    jp.date_only = cs->date_only;
    jp.calendar = cov;
    jp.volume_absent = !cs->has_volume;
    const char *warnings[2];
    char thin[160];
    if (cov->past_last_year) warnings[jp.n_warnings++] = cov->message;
    if (cs->n < KR_FORECAST_MIN_ROWS) {
        snprintf(thin, sizeof thin,
                 "%lld rows of history: a forecast needs at least %d (the normalisation's mean "
                 "and spread rest on them)",
                 (long long)cs->n, KR_FORECAST_MIN_ROWS);
        warnings[jp.n_warnings++] = thin;
    }
    jp.warnings = warnings;
    jp.quantiles = o->quantiles;
    jp.n_quantiles = o->n_quantiles;
    jp.include_paths = 1;
    jp.head = members + 1;
    /* Repaired candles (consistent mode, or a zero-volume history's volumes); in raw mode the
     * engine's own numbers, untouched. */
    if (o->ohlc == KR_OHLC_CONSISTENT || ps->zero_volume) {
        jp.mean = ps->mean;
        jp.values = ps->values;
        jp.quantile = path_set_quantile;
        jp.quantile_user = (void *)ps;
    }
    char *text = NULL;
    kr_error err = { 0 };
    kr_status st = kr_forecast_json(fc, &jp, &text, NULL, &err);
    free(members);
    if (st != KR_OK) {
        fprintf(stderr, "kronos %s: %s\n", CMD, err.message);
        return -1;
    }
    fprintf(f, "%s\n", text);
    free(text);
    return ferror(f) ? -1 : 0;
}

/* Output path for input i of a batch: DIR/<stem>.forecast.<ext>. */
static void batch_output_path(const char *dir, const char *input, const char *ext, char *out) {
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    if (!strcmp(base, "-")) base = "stdin";
    size_t len = strlen(base);
    if (len > 4 && !strcmp(base + len - 4, ".csv")) len -= 4;
    if (len > 5 && !strcmp(base + len - 5, ".json")) len -= 5;
    size_t dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/') dir_len--;
    snprintf(out, PATH_MAX, "%.*s/%.*s.forecast.%s", (int)dir_len, dir, (int)len, base, ext);
}

/* 0 when every input of a batch writes its own file under --output; else -1 with msg naming
 * the first two inputs that would write the same one (x.csv and x.json, or two dirs' x.csv). */
static int check_batch_outputs(const opts *o, char *msg, size_t cap) {
    if (!o->output || o->n_inputs < 2) return 0;
    char(*paths)[PATH_MAX] = malloc((size_t)o->n_inputs * sizeof *paths);
    if (!paths) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < o->n_inputs && rc == 0; i++) {
        batch_output_path(o->output, o->inputs[i], o->format, paths[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(paths[i], paths[j])) {
                snprintf(msg, cap,
                         "inputs '%s' and '%s' would both be written to %s; rename one of them",
                         o->inputs[j], o->inputs[i], paths[i]);
                rc = -1;
                break;
            }
    }
    free(paths);
    return rc;
}

static int parse_opts(int argc, char **argv, opts *o, char ***owned, int *n_owned) {
    o->p = kr_forecast_default_params();
    o->p.paths = KR_CLI_FORECAST_PATHS;
    o->ohlc = KR_OHLC_CONSISTENT;
    o->format = "csv";
    o->batch_rows = KR_STATIC_BATCH_ROWS_DEFAULT;
    o->quantiles[0] = 0.1;
    o->quantiles[1] = 0.5;
    o->quantiles[2] = 0.9;
    o->n_quantiles = 3;
    char msg[256 + 2 * PATH_MAX];
    const kr_cli_forecast_flags shared = {
        .model = &o->model,
        .tokenizer = &o->tokenizer,
        .quant = &o->quant,
        .kv_dtype = &o->kv_dtype,
        .threads = &o->threads,
        .batch_rows = &o->batch_rows,
        .allow_nonfinite = &o->allow_nonfinite,
        .window = &o->p.window,
        .ohlc = &o->ohlc,
        .market = &o->market,
        KR_CLI_SAMPLING_OF(o->p),
    };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_forecast_spec, &shared, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        switch (c) {
        case 'i':
            if (add_input(o, optarg, owned, n_owned, msg, sizeof msg) != 0)
                return kr_cli_usage_error(CMD, "%s", msg);
            break;
        case 'n':
            if (!kr_arg_int(optarg, 1, KR_LIMIT_PRED_LEN_CAP, &o->p.pred_len))
                return kr_cli_usage_error(
                    CMD, "--pred-len must be an integer in 1..65536, got '%s'", optarg);
            break;
        case 'f': o->future_file = optarg; break;
        case 'F':
            if (strcmp(optarg, "csv") && strcmp(optarg, "json"))
                return kr_cli_usage_error(CMD, "--format must be csv or json, got '%s'", optarg);
            o->format = optarg;
            break;
        case 'o':
            if (!*optarg) return kr_cli_usage_error(CMD, "%s", "--output must not be empty");
            o->output = optarg;
            break;
        case 'q':
            if (!strcmp(optarg, "none")) {
                o->quantiles_none = 1;
                o->quantiles_given = 0;
                break;
            }
            if (parse_quantiles(optarg, o) != 0) return 2;
            o->quantiles_given = 1;
            o->quantiles_none = 0;
            break;
        }
    }
    if (ps.status) return ps.status;
    o->lookback_given = kr_cli_parse_given(&ps, KR_OPT_LOOKBACK);
    /* Operands are inputs too, as ingest takes its file (kronos forecast a.csv --pred-len 5). */
    for (; optind < argc; optind++)
        if (add_input(o, argv[optind], owned, n_owned, msg, sizeof msg) != 0)
            return kr_cli_usage_error(CMD, "%s", msg);
    if (o->n_inputs == 0)
        return kr_cli_usage_error(CMD, "%s",
                                  "no input: give a candle file (kronos forecast FILE "
                                  "--pred-len N, or --input FILE)");
    if (o->p.pred_len == 0) return kr_cli_usage_error(CMD, "%s", "--pred-len is required");
    if (o->p.pred_len > o->p.max_context) {
        snprintf(msg, sizeof msg, "--pred-len %d exceeds --max-context %d", o->p.pred_len,
                 o->p.max_context);
        return kr_cli_usage_error(CMD, "%s", msg);
    }
    if (o->future_file && o->n_inputs > 1)
        return kr_cli_usage_error(CMD, "%s", "--future-timestamps applies to a single --input");
    if (o->future_file && o->market)
        return kr_cli_usage_error(CMD, "%s", "--future-timestamps and --market exclude each other");
    int stdin_inputs = 0;
    for (int i = 0; i < o->n_inputs; i++) stdin_inputs += !strcmp(o->inputs[i], "-");
    if (stdin_inputs > 1) return kr_cli_usage_error(CMD, "%s", "--input - can be given once");
    if (check_batch_outputs(o, msg, sizeof msg) != 0) return kr_cli_usage_error(CMD, "%s", msg);
    return 0;
}

int kr_cmd_forecast(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    char **owned = NULL;
    int n_owned = 0, rc = parse_opts(argc, argv, &o, &owned, &n_owned);
    kr_candles **cs = NULL;
    kr_series *series = NULL;
    kr_forecast **res = NULL;
    kr_model *model = NULL; /* eng's */
    kr_cli_engine eng = { 0 };
    int64_t *future = NULL;
    kr_path_set **sets = NULL;
    int64_t **futures = NULL;
    int hinted = 0;
    char msg[1024 + 2 * PATH_MAX];
    kr_error err = { 0 };
    if (rc != 0) {
        rc = rc < 0 ? 0 : rc;
        goto done;
    }
    /* Where the forecasts go is checked before any work: a batch's directory is made now. An
     * existing directory (or a name ending in '/') receives <name>.forecast.<ext> for one input
     * too, as for a batch, instead of being refused as "not a file". */
    struct stat out_sb;
    size_t out_len = o.output ? strlen(o.output) : 0;
    int out_dir = o.output && (o.n_inputs > 1 || o.output[out_len - 1] == '/' ||
                               (stat(o.output, &out_sb) == 0 && S_ISDIR(out_sb.st_mode)));
    if (out_dir) {
        struct stat sb;
        if ((mkdir(o.output, 0777) != 0 && errno != EEXIST) || stat(o.output, &sb) != 0 ||
            !S_ISDIR(sb.st_mode)) {
            snprintf(msg, sizeof msg, "%s: cannot make the output directory: %s", o.output,
                     errno == EEXIST ? "a file of that name exists" : strerror(errno));
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
        if (access(o.output, W_OK | X_OK) != 0) {
            snprintf(msg, sizeof msg, "%s: cannot write into the output directory: %s", o.output,
                     strerror(errno));
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
    } else if (o.output) {
        for (int i = 0; i < o.n_inputs; i++)
            if ((rc = kr_cli_refuse_same_file(CMD, o.output, o.inputs[i], "an input")) != 0)
                goto done;
        if (kr_cli_check_writable(CMD, o.output)) {
            rc = 1;
            goto done;
        }
    }
    char pred_dir[PATH_MAX], tok_dir[PATH_MAX];
    int resolved = kr_resolve_model_dirs(o.model, o.tokenizer, pred_dir, tok_dir, msg, sizeof msg);
    if (resolved != 0) {
        rc = resolved == -2 ? kr_cli_fail(CMD, msg) : kr_cli_usage_error(CMD, "%s", msg);
        goto done;
    }
    cs = calloc((size_t)o.n_inputs, sizeof *cs);
    series = calloc((size_t)o.n_inputs, sizeof *series);
    res = calloc((size_t)o.n_inputs, sizeof *res);
    if (!cs || !series || !res) {
        rc = kr_cli_fail(CMD, "out of memory");
        goto done;
    }
    sets = calloc((size_t)o.n_inputs, sizeof *sets);
    futures = calloc((size_t)o.n_inputs, sizeof *futures);
    if (!sets || !futures) {
        rc = kr_cli_fail(CMD, "out of memory");
        goto done;
    }
    for (int i = 0; i < o.n_inputs; i++) {
        kr_error lerr = { 0 };
        if (kr_candles_load(o.inputs[i], &cs[i], &lerr) != KR_OK) {
            rc = kr_cli_fail(CMD, lerr.message);
            goto done;
        }
        kr_cli_warn_dropped_columns(CMD, o.inputs[i], cs[i]);
        kr_cli_warn_thin_history(CMD, o.inputs[i], cs[i]);
        series[i] = kr_candles_series(cs[i]);
        /* Without --lookback, the trailing max_context - pred_len rows: the window then holds
         * the whole forecast and is never re-run (slow), as analyze chooses. */
        const int64_t fit = (int64_t)o.p.max_context - o.p.pred_len;
        if (!o.lookback_given && cs[i]->n > fit && fit >= 2)
            series[i] = kr_candles_slice(cs[i], cs[i]->n - fit, fit);
        /* A named market: its calendar gives the forecast bars' stamps (the engine infers
         * one from the history otherwise). */
        if (o.market && cs[i]->n >= 2) {
            const kr_calendar *cal = NULL;
            futures[i] = malloc((size_t)o.p.pred_len * sizeof *futures[i]);
            if (!futures[i] || kr_calendar_find(o.market, &cal, &err) != KR_OK ||
                kr_calendar_future_in(cal, cs[i]->timestamps, cs[i]->n, o.p.pred_len, futures[i],
                                      NULL, &err) != KR_OK) {
                snprintf(msg, sizeof msg, "%s: %s", o.inputs[i],
                         futures[i] ? err.message : "out of memory");
                rc = kr_cli_fail(CMD, msg);
                goto done;
            }
            series[i].future_timestamps = futures[i];
        }
        /* Past max_context the exact window re-runs the whole window at every later step. */
        int64_t L = o.p.lookback > 0 ? o.p.lookback
                                     : (cs[i]->n < o.p.max_context ? cs[i]->n : o.p.max_context);
        if (o.lookback_given && o.p.window == KR_WINDOW_EXACT &&
            L + o.p.pred_len > o.p.max_context && !hinted) {
            /* A lookback below 2 rows is refused, so past that only the rolling window helps. */
            char fix[96] = "use";
            if (o.p.max_context - o.p.pred_len >= 2)
                snprintf(fix, sizeof fix, "pass --lookback %d (or less), or",
                         o.p.max_context - o.p.pred_len);
            else if (o.p.max_context > 2)
                snprintf(fix, sizeof fix, "pass --lookback 2 and a --pred-len of at most %d, or",
                         o.p.max_context - 2);
            fprintf(stderr,
                    "kronos %s: note: lookback %lld + pred-len %d > max-context %d: the window "
                    "is re-run from scratch at each of the last %lld steps (as the reference does; "
                    "slow). To avoid it %s --window rolling (a sliding KV cache, approximate).\n",
                    CMD, (long long)L, o.p.pred_len, o.p.max_context,
                    (long long)(L >= o.p.max_context ? o.p.pred_len
                                                     : L + o.p.pred_len - o.p.max_context),
                    fix);
            hinted = 1;
        }
    }
    if (o.future_file) {
        int64_t n = 0;
        if (kr_timestamps_read_csv(o.future_file, &future, &n, &err) != KR_OK) {
            rc = kr_cli_fail(CMD, err.message);
            goto done;
        }
        if (n != o.p.pred_len) {
            snprintf(msg, sizeof msg, "%s: has %lld timestamps, --pred-len is %d", o.future_file,
                     (long long)n, o.p.pred_len);
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
        series[0].future_timestamps = future;
    }
    if ((rc = kr_cli_engine_open(CMD, pred_dir, tok_dir, o.quant, o.allow_nonfinite, o.threads,
                                 o.kv_dtype, &eng)) != 0)
        goto done;
    model = eng.model;
    rc = 1;
    o.p.keep_paths = 1;
    char what[160];
    snprintf(what, sizeof what, "forecasting %d series (%d paths x %d bars)", o.n_inputs, o.p.paths,
             o.p.pred_len);
    kr_ticker *ticker = kr_ticker_start(what);
    kr_request_params rq = kr_request_default_params();
    rq.static_batch_rows = o.batch_rows;
    kr_status fst = kr_forecast_run_batch(eng.ctx, series, o.n_inputs, &o.p, &rq, res, &err);
    kr_ticker_stop(ticker);
    int per = kr_static_batch_series(o.batch_rows, o.p.paths, o.n_inputs);
    if (o.n_inputs > 1)
        fprintf(stderr, "kronos %s: %d series in %d static batch%s of up to %d series (%d rows)\n",
                CMD, o.n_inputs, (o.n_inputs + per - 1) / per, per < o.n_inputs ? "es" : "", per,
                per * o.p.paths);
    if (fst != KR_OK) {
        if (o.n_inputs == 1)
            snprintf(msg, sizeof msg, "%s: %s", o.inputs[0], err.message);
        else
            snprintf(msg, sizeof msg, "%s", err.message);
        rc = kr_cli_fail(CMD, msg);
        goto done;
    }
    for (int i = 0; i < o.n_inputs; i++) {
        const kr_forecast *one[1] = { res[i] };
        if (kr_path_set_create(one, 1, o.ohlc, kr_series_zero_volume(&series[i]), &sets[i], &err) !=
            KR_OK) {
            rc = kr_cli_fail(CMD, err.message);
            goto done;
        }
    }
    kr_model_info mi;
    kr_model_get_info(model, &mi);
    if (mi.demo)
        fprintf(stderr, "kronos %s: note: DEMO MODEL \xe2\x80\x94 not a forecast (%s)\n", CMD,
                mi.source[0] ? mi.source : "the model declares itself a demo/test checkpoint");
    double forecast_s = 0;
    for (int i = 0; i < o.n_inputs; i++) {
        kr_forecast_stats st;
        kr_forecast_get_stats(res[i], &st);
        if (st.seconds_total > forecast_s) forecast_s = st.seconds_total; /* one batch */
    }
    if (kr_quantize_at_load_note(&mi, forecast_s, msg, sizeof msg))
        fprintf(stderr, "kronos %s: note: %s\n", CMD, msg);
    int json = !strcmp(o.format, "json");
    for (int i = 0; i < o.n_inputs; i++) {
        /* Stamps past the last year whose holidays the calendar lists are weekdays only:
         * said on stderr and in the JSON, not left for a user to find on a holiday. */
        kr_calendar_coverage cov = { 0 };
        if (!o.future_file && kr_calendar_coverage_of(o.market, NULL, series[i].timestamps,
                                                      series[i].n, kr_forecast_timestamps(res[i]),
                                                      o.p.pred_len, &cov, &err) != KR_OK)
            memset(&cov, 0, sizeof cov);
        if (cov.past_last_year)
            fprintf(stderr, "kronos %s: warning: %s: %s\n", CMD,
                    strcmp(o.inputs[i], "-") ? o.inputs[i] : "stdin", cov.message);
        FILE *f = stdout;
        char path[PATH_MAX];
        if (o.output) {
            if (out_dir)
                batch_output_path(o.output, o.inputs[i], o.format, path);
            else
                snprintf(path, sizeof path, "%s", o.output);
            f = fopen(path, "w");
            if (!f) {
                snprintf(msg, sizeof msg, "%s: cannot write: %s", path, strerror(errno));
                rc = kr_cli_fail(CMD, msg);
                goto done;
            }
        } else if (o.n_inputs > 1 && json) {
            /* Several documents on stdout: one JSON array of them (each names its "input"),
             * so the stream parses as JSON; CSV gets a "# name" line before each table. */
            fputs(i ? ",\n" : "[\n", f);
        } else if (o.n_inputs > 1) {
            fprintf(f, "%s# %s\n", i ? "\n" : "", o.inputs[i]);
        }
        int wr =
            json ? write_json(f, res[i], sets[i], &o, o.inputs[i], cs[i], series[i].n, &cov, &mi)
                 : write_csv(f, sets[i], &o, cs[i]);
        if (f != stdout && fclose(f) != 0) wr = -1;
        if (wr != 0) {
            snprintf(msg, sizeof msg, "%s: write failed", o.output ? path : "stdout");
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
    }
    if (json && !o.output && o.n_inputs > 1) fputs("]\n", stdout);
    rc = 0;
done:
    for (int i = 0; sets && i < o.n_inputs; i++) kr_path_set_free(sets[i]);
    for (int i = 0; futures && i < o.n_inputs; i++) free(futures[i]);
    free(sets);
    free(futures);
    if (res)
        for (int i = 0; i < o.n_inputs; i++) kr_forecast_free(res[i]);
    if (cs)
        for (int i = 0; i < o.n_inputs; i++) kr_candles_free(cs[i]);
    free(res);
    free(cs);
    free(series);
    free(future);
    kr_cli_engine_close(&eng);
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    free(owned);
    return rc;
}
