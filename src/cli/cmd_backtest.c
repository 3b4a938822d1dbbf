/*
 * cli/cmd_backtest — `kronos backtest SYMBOL... | --all | --input FILE...`: rolling-origin
 * evaluation of the model on stored symbols or candle files against baselines, with intervals,
 * Diebold-Mariano tests and a top-K strategy (kronos/backtest.h does the work; docs/backtest.md
 * defines every figure). A progress bar with an ETA on a terminal.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_open.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/progress.h"
#include "cli/store_pick.h"
#include "common/candles_input.h"
#include "kronos.h"
#include "kronos/backtest.h"
#include "kronos/store.h"
#include "kronos/util.h"

#define CMD "backtest"
#define MAX_SYMBOLS 256
#define MAX_ORIGIN_DATES 100000
/* Rows read per stored symbol: bounds memory for a very long 1-minute history. */
#define READ_LIMIT 1000000

enum {
    OPT_EVERY = 256,
    OPT_FROM,
    OPT_TO,
    OPT_ORIGINS,
    OPT_MIN_HISTORY,
    OPT_MAX_ORIGINS,
    OPT_QUANT,
    OPT_KV_DTYPE,
    OPT_COMPARE_MODEL,
    OPT_COMPARE_TOKENIZER,
    OPT_COMPARE_QUANT,
    OPT_SEASON,
    OPT_BOOTSTRAP,
    OPT_BLOCK,
    OPT_CI,
    OPT_ALPHA,
    OPT_SCORE_SEED,
    OPT_TOP,
    OPT_SHORT,
    OPT_RANK_BY,
    OPT_COST,
    OPT_HOLD,
    OPT_ASHARE,
    OPT_CSV,
    OPT_ALL,
    OPT_INPUT,
};

/* An entry of the table below (no default shown: the help says it). */
#define OPT(name, key, type, arg, min, max, help) \
    { name, key, type, arg, min, max, NULL, help }

/* The groups of --help: each opened before its first flag. */
static const char *const k_groups[] = {
    "all",
    "what to evaluate:\n  SYMBOL...             stored symbols (matched without regard to case)",
    "horizon",
    "origins:",
    "model",
    "forecasts (as kronos forecast):",
    "compare-model",
    "a second model, scored as one more forecaster:",
    "season",
    "scores:",
    "top",
    "strategy (several symbols):",
    "format",
    "output:",
    NULL,
};

static const kr_cli_opt k_opts[] = {
    { "all", OPT_ALL, KR_CLI_FLAG, NULL, 0, 0, NULL, "every stored series" },
    KR_CLI_OPT_DB("database written by 'kronos ingest' (default: $KRONOS_DB,\nelse "
                  "$XDG_DATA_HOME/kronos/kronos.db)"),
    { "interval", 'i', KR_CLI_TEXT, "I", 0, 0, NULL,
      "which stored interval (default: the symbol's most recent)" },
    { "input", OPT_INPUT, KR_CLI_FILE, "[NAME=]FILE", 0, 0, NULL,
      "a candle CSV or JSON file instead of the store (repeatable;\nNAME: the symbol, default "
      "the file name without extension)" },
    KR_CLI_OPT_MARKET(
        "exchange calendar of every symbol: NYSE, SSE, HKEX, CRYPTO\n(default: the stored "
        "market, else the symbol's suffix, else\ninferred from the history before each origin)"),
    { "horizon", 'n', KR_CLI_INT, "N", 1, 65535, NULL,
      "bars forecast and scored from each origin (default 20)" },
    { "every", OPT_EVERY, KR_CLI_INT, "N", 1, 1000000, NULL,
      "an origin every N bars, counted back from the latest\n(default: the horizon, so windows "
      "do not overlap)" },
    { "from", OPT_FROM, KR_CLI_TEXT, "DATE", 0, 0, NULL, "only origins stamped at or after DATE" },
    { "to", OPT_TO, KR_CLI_TEXT, "DATE", 0, 0, NULL,
      "only origins stamped at or before DATE (a date alone takes in\nits whole day)" },
    { "origins", OPT_ORIGINS, KR_CLI_TEXT, "D1,D2,...", 0, 0, NULL,
      "origins at these dates instead (each symbol's last bar at or\nbefore the end of each "
      "date)" },
    { "min-history", OPT_MIN_HISTORY, KR_CLI_INT, "N", 2, 10000000, NULL,
      "rows at or before the first origin (default 64)" },
    { "max-origins", OPT_MAX_ORIGINS, KR_CLI_INT, "N", 1, 10000000, NULL,
      "only the last N origins of each symbol" },
    KR_CLI_OPT_MODEL("predictor directory, or one with predictor/ and tokenizer/\n(default: the "
                     "bundled demo model)"),
    KR_CLI_OPT_TOKENIZER(KR_CLI_HELP_TOKENIZER),
    KR_CLI_OPT_PATHS("sample paths per forecast (default 32, at least 2)"),
    KR_CLI_OPT_LOOKBACK("history rows the model sees (default: all, up to\nmax-context - horizon)"),
    KR_CLI_OPT_MAX_CONTEXT("predictor window (default 512)"),
    KR_CLI_OPT_SEED("random seed of every forecast (default 0)"),
    KR_CLI_OPT_TEMPERATURE("sampling temperature (default 1.0)"),
    KR_CLI_OPT_TOP_P("nucleus sampling threshold (default 0.9)"),
    KR_CLI_OPT_TOP_K("keep the K most likely tokens (default 0 = off)"),
    KR_CLI_OPT_WINDOW("past max-context: re-run the window (default) or slide"),
    KR_CLI_OPT_OHLC("candles repaired before scoring (default consistent)"),
    { "quant", OPT_QUANT, KR_CLI_TEXT, "FMT", 0, 0, NULL,
      "quantise the model at load: f32, bf16, int8, fp8, q4" },
    { "kv-dtype", OPT_KV_DTYPE, KR_CLI_TEXT, "T", 0, 0, NULL,
      "KV cache precision: f32, bf16, int8" },
    KR_CLI_OPT_THREADS,
    KR_CLI_OPT_BATCH_SIZE("series x paths rows per static batch (default 1024; 0 = all\nat once)"),
    { "compare-model", OPT_COMPARE_MODEL, KR_CLI_DIR, "DIR", 0, 0, NULL,
      "another checkpoint (e.g. before / after fine-tuning)" },
    { "compare-tokenizer", OPT_COMPARE_TOKENIZER, KR_CLI_DIR, "DIR", 0, 0, NULL,
      "its tokenizer (default: as for --model)" },
    { "compare-quant", OPT_COMPARE_QUANT, KR_CLI_TEXT, "FMT", 0, 0, NULL,
      "the second model quantised (alone: the same model, e.g. f32\nagainst --compare-quant "
      "q4)" },
    { "season", OPT_SEASON, KR_CLI_INT, "N", 0, 100000, NULL,
      "seasonal naive period in bars (default: from the interval:\n5 for daily "
      "equities, 24 for hourly crypto, a trading day of\nintraday bars; 0: none)" },
    { "bootstrap", OPT_BOOTSTRAP, KR_CLI_INT, "N", 0, 100000, NULL,
      "bootstrap resamples for the intervals (default 1000; 0: none)" },
    { "block-length", OPT_BLOCK, KR_CLI_INT, "N", 1, 1000000, NULL,
      "bootstrap block in origins (default: max(horizon / every,\norigins^(1/3)))" },
    { "ci-level", OPT_CI, KR_CLI_NUM, "X", 0.5, 0.999, NULL, "interval level (default 0.95)" },
    { "alpha", OPT_ALPHA, KR_CLI_NUM, "X", 1e-6, 0.5, NULL,
      "significance level of the tests (default 0.05)" },
    { "score-seed", OPT_SCORE_SEED, KR_CLI_NUM, "S", 0, 0, NULL,
      "seed of the bootstrap, random-walk baseline, PIT (default 0)" },
    { "top", OPT_TOP, KR_CLI_INT, "K", 0, 10000, NULL,
      "hold the top K symbols (default 1; 0: no strategy)" },
    { "short", OPT_SHORT, KR_CLI_FLAG, NULL, 0, 0, NULL, "also short the bottom K" },
    { "rank-by", OPT_RANK_BY, KR_CLI_CHOICE, "return|prob-up", 0, 0, NULL,
      "what ranks them (default return: expected return)" },
    { "cost-bps", OPT_COST, KR_CLI_NUM, "X", 0, 10000, NULL,
      "cost per unit of weight traded, basis points (default 10)" },
    { "hold", OPT_HOLD, KR_CLI_INT, "N", 1, 1000000, NULL,
      "bars between rebalances, a multiple of --every (default every)" },
    { "ashare", OPT_ASHARE, KR_CLI_CHOICE, "auto|on|off", 0, 0, NULL,
      "T+1 and the +-10 % / +-20 % limit days (default auto: A-share\nsymbols)" },
    { "format", 'F', KR_CLI_CHOICE, "json|md|html|csv", 0, 0, NULL,
      "report format (default json; csv: one row per forecast)" },
    { "out", 'o', KR_CLI_FILE, "FILE", 0, 0, NULL, "write the report there instead of stdout" },
    { "csv", OPT_CSV, KR_CLI_FILE, "FILE", 0, 0, NULL, "also write the per-origin CSV there" },
    KR_CLI_OPT_ALLOW_NONFINITE("load a checkpoint even if a weight is NaN or infinite"),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos backtest` (common/options.h): its --help, getopt table, completion and
 * man page. */
const kr_cli_command kr_cli_backtest_spec = {
    "backtest",
    "SYMBOL... | --all | --input [NAME=]FILE... [flags]",
    "does the model beat a naive forecast? rolling-origin scores, tests, a strategy",
    "Does the model beat a naive forecast on these candles? Forecasts every symbol from\n"
    "many past origins, using only the rows up to each origin (as a live forecast then\n"
    "would have), scores each forecast against what followed (CRPS, weighted quantile\n"
    "loss, band coverage, PIT, P(up) reliability, MAE / MAPE / MASE, direction, IC,\n"
    "volatility), scores the naive, seasonal naive, drift and bootstrap random-walk\n"
    "baselines the same way, and tests the differences (Diebold-Mariano); every figure\n"
    "has a block bootstrap interval. With several symbols, a top-K strategy is run on the\n"
    "forecasts. docs/backtest.md defines every figure. Not investment advice.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FILE,
    21,
    k_groups,
    NULL,
};

typedef struct opts {
    const char *db, *interval, *model, *tokenizer, *out, *csv, *market;
    const char *compare_model, *compare_tokenizer, *compare_quant, *quant, *kv_dtype;
    const char *from, *to, *origins;
    const char *symbols[MAX_SYMBOLS];
    int n_symbols;
    const char *inputs[MAX_SYMBOLS];
    int n_inputs;
    int all, threads, allow_nonfinite;
    kr_backtest_format format;
    kr_backtest_params p;
    int64_t *origin_ts;
} opts;

static int parse_origins(opts *o) {
    char *copy = strdup(o->origins);
    int n = 0, rc = 0;
    o->origin_ts = malloc(MAX_ORIGIN_DATES * sizeof *o->origin_ts);
    if (!copy || !o->origin_ts) {
        free(copy);
        return kr_cli_fail(CMD, "out of memory");
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        if (!*t) continue;
        int64_t a, b;
        kr_error err;
        /* A date alone is the end of its day: the last bar of that date. */
        if (kr_store_parse_range(t, t, "--origins", "--origins", &a, &b, &err) != KR_OK) {
            rc = kr_cli_usage_error(CMD, "%s", err.message);
            break;
        }
        if (n >= MAX_ORIGIN_DATES) {
            rc = kr_cli_usage_error(CMD, "--origins: more than %s dates", "100000");
            break;
        }
        if (n > 0 && b <= o->origin_ts[n - 1]) {
            rc = kr_cli_usage_error(CMD, "--origins: dates must increase ('%s' does not)", t);
            break;
        }
        o->origin_ts[n++] = b;
    }
    free(copy);
    if (rc == 0 && n == 0) rc = kr_cli_usage_error(CMD, "%s", "--origins: no date given");
    o->p.origin_ts = o->origin_ts;
    o->p.n_origin_ts = n;
    return rc;
}

static int parse_opts(int argc, char **argv, opts *o) {
    o->p = kr_backtest_default_params();
    o->format = KR_BACKTEST_JSON;
    const kr_cli_forecast_flags shared = {
        KR_CLI_SAMPLING_OF(o->p),
        .model = &o->model,
        .tokenizer = &o->tokenizer,
        .threads = &o->threads,
        .batch_rows = &o->p.static_batch_rows,
        .allow_nonfinite = &o->allow_nonfinite,
        .window = &o->p.window,
        .ohlc = &o->p.ohlc,
        .db = &o->db,
        .market = &o->market,
    };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_backtest_spec, &shared, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        /* The integer flags of the table, checked against its ranges. */
        int *counted = c == 'n'               ? &o->p.horizon
                       : c == OPT_EVERY       ? &o->p.every
                       : c == OPT_MIN_HISTORY ? &o->p.min_history
                       : c == OPT_MAX_ORIGINS ? &o->p.max_origins
                       : c == OPT_SEASON      ? &o->p.season
                       : c == OPT_BOOTSTRAP   ? &o->p.bootstrap
                       : c == OPT_BLOCK       ? &o->p.block_length
                       : c == OPT_TOP         ? &o->p.strategy_k
                       : c == OPT_HOLD        ? &o->p.hold
                                              : NULL;
        if (counted) {
            if (!kr_cli_opts_int(&kr_cli_backtest_spec, kr_cli_opts_find(&kr_cli_backtest_spec, c),
                                 optarg, counted))
                return 2;
            if (c == OPT_SEASON && o->p.season == 0) o->p.season = -1; /* none */
            continue;
        }
        switch (c) {
        case 'i': {
            kr_error err;
            if (kr_store_check_interval(optarg, &err) != KR_OK)
                return kr_cli_usage_error(CMD, "--%s", err.message);
            o->interval = optarg;
            break;
        }
        case OPT_INPUT:
            if (o->n_inputs >= MAX_SYMBOLS)
                return kr_cli_usage_error(CMD, "more than %s --input files", "256");
            o->inputs[o->n_inputs++] = optarg;
            break;
        case OPT_ALL: o->all = 1; break;
        case OPT_FROM: o->from = optarg; break;
        case OPT_TO: o->to = optarg; break;
        case OPT_ORIGINS: o->origins = optarg; break;
        case OPT_QUANT:
        case OPT_COMPARE_QUANT:
            if (!kr_arg_quant(optarg))
                return kr_cli_usage_error(
                    CMD, "--quant / --compare-quant must be f32, bf16, int8, fp8 or q4, got '%s'",
                    optarg);
            if (c == OPT_QUANT)
                o->quant = optarg;
            else
                o->compare_quant = optarg;
            break;
        case OPT_KV_DTYPE:
            if (!kr_arg_kv_dtype(optarg))
                return kr_cli_usage_error(CMD, "--kv-dtype must be f32, bf16 or int8, got '%s'",
                                          optarg);
            o->kv_dtype = optarg;
            break;
        case OPT_COMPARE_MODEL: o->compare_model = optarg; break;
        case OPT_COMPARE_TOKENIZER: o->compare_tokenizer = optarg; break;
        case OPT_CI:
            if (!kr_arg_double(optarg, 0.5, 0.999, &o->p.ci_level))
                return kr_cli_usage_error(CMD, "--ci-level must be in [0.5, 0.999], got '%s'",
                                          optarg);
            break;
        case OPT_ALPHA:
            if (!kr_arg_double(optarg, 1e-6, 0.5, &o->p.alpha))
                return kr_cli_usage_error(CMD, "--alpha must be in (0, 0.5], got '%s'", optarg);
            break;
        case OPT_SCORE_SEED:
            if (!kr_arg_u64(optarg, &o->p.score_seed))
                return kr_cli_usage_error(CMD, "--score-seed must be an unsigned integer, got '%s'",
                                          optarg);
            break;
        case OPT_SHORT: o->p.strategy_short = 1; break;
        case OPT_RANK_BY:
            if (!strcmp(optarg, "return"))
                o->p.strategy_rank = KR_BACKTEST_RANK_RETURN;
            else if (!strcmp(optarg, "prob-up") || !strcmp(optarg, "prob_up"))
                o->p.strategy_rank = KR_BACKTEST_RANK_PROB_UP;
            else
                return kr_cli_usage_error(CMD, "--rank-by must be return or prob-up, got '%s'",
                                          optarg);
            break;
        case OPT_COST:
            if (!kr_arg_double(optarg, 0, 10000, &o->p.cost_bps))
                return kr_cli_usage_error(
                    CMD, "--cost-bps must be a number in [0, 10000], got '%s'", optarg);
            break;
        case OPT_ASHARE:
            if (!strcmp(optarg, "auto"))
                o->p.ashare_rules = -1;
            else if (!strcmp(optarg, "on"))
                o->p.ashare_rules = 1;
            else if (!strcmp(optarg, "off"))
                o->p.ashare_rules = 0;
            else
                return kr_cli_usage_error(CMD, "--ashare must be auto, on or off, got '%s'",
                                          optarg);
            break;
        case 'F':
            if (kr_backtest_format_parse(optarg, &o->format) != 0)
                return kr_cli_usage_error(CMD, "--format must be json, md, html or csv, got '%s'",
                                          optarg);
            break;
        case 'o': o->out = optarg; break;
        case OPT_CSV: o->csv = optarg; break;
        }
    }
    if (ps.status) return ps.status;
    if (kr_cli_parse_given(&ps, KR_OPT_BATCH_SIZE) && o->p.static_batch_rows == 0)
        o->p.static_batch_rows = -1; /* all at once */
    for (int i = optind; i < argc; i++) {
        kr_error err;
        if (o->n_symbols >= MAX_SYMBOLS)
            return kr_cli_usage_error(CMD, "more than %s symbols", "256");
        if (kr_store_check_symbol(argv[i], &err) != KR_OK)
            return kr_cli_usage_error(CMD, "%s", err.message);
        for (int j = 0; j < o->n_symbols; j++)
            if (!strcasecmp(o->symbols[j], argv[i]))
                return kr_cli_usage_error(CMD, "symbol '%s' given twice", argv[i]);
        o->symbols[o->n_symbols++] = argv[i];
    }
    const int sources = (o->n_symbols > 0) + o->all + (o->n_inputs > 0);
    if (sources == 0)
        return kr_cli_usage_error(CMD, "%s", "give at least one SYMBOL (or --all, --input FILE)");
    if (sources > 1)
        return kr_cli_usage_error(CMD, "%s", "give SYMBOLs, --all or --input files, one of them");
    if (o->n_inputs && (o->db || o->interval))
        return kr_cli_usage_error(CMD, "%s",
                                  "--db and --interval read the store; --input does not");
    if (!o->compare_model && o->compare_tokenizer)
        return kr_cli_usage_error(CMD, "%s", "--compare-tokenizer needs --compare-model");
    if (o->from || o->to) {
        kr_error err;
        if (kr_store_parse_range(o->from, o->to, "--from", "--to", &o->p.from_ts, &o->p.to_ts,
                                 &err) != KR_OK)
            return kr_cli_usage_error(CMD, "%s", err.message);
    }
    if (o->origins) {
        if (o->p.every > 0)
            return kr_cli_usage_error(CMD, "%s", "--origins and --every: give one of them");
        int rc = parse_origins(o);
        if (rc) return rc;
    }
    if (o->out && o->csv && kr_cli_same_file(o->out, o->csv))
        return kr_cli_usage_error(CMD, "%s", "--out and --csv name the same file");
    kr_error err;
    if (kr_backtest_check_params(&o->p, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    return 0;
}

/* The progress bar: "[########......] 412/1000 forecasts  31.0 s, ETA 44 s", on stderr, on a
 * terminal only. */
static void progress(void *user, const kr_backtest_progress *pr) {
    (void)user;
    const int width = 28;
    if (!strcmp(pr->phase, "done")) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        return;
    }
    if (strcmp(pr->phase, "forecast") && strcmp(pr->phase, "compare")) {
        fprintf(stderr, "\r\033[K%s ... %.1f s", pr->phase, pr->elapsed_seconds);
        fflush(stderr);
        return;
    }
    const int fill = pr->total > 0 ? (int)(pr->done * width / pr->total) : 0;
    fprintf(stderr, "\r\033[K[");
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %lld/%lld %s  %.1f s", (long long)pr->done, (long long)pr->total,
            !strcmp(pr->phase, "compare") ? "forecasts (second model)" : "forecasts",
            pr->elapsed_seconds);
    if (isfinite(pr->eta_seconds) && pr->done < pr->total)
        fprintf(stderr, ", ETA %.0f s", pr->eta_seconds);
    fflush(stderr);
}

/* The symbol of --input [NAME=]FILE: NAME, else the file name without directory and
 * extension. */
static void input_name(const char *arg, char *name, size_t cap, const char **path) {
    const char *eq = strchr(arg, '=');
    struct stat sb;
    if (eq && eq > arg && stat(arg, &sb) != 0) { /* a file may have '=' in its name */
        snprintf(name, cap, "%.*s", (int)(eq - arg), arg);
        *path = eq + 1;
        return;
    }
    *path = arg;
    const char *base = strrchr(arg, '/');
    base = base ? base + 1 : arg;
    snprintf(name, cap, "%s", base);
    char *dot = strrchr(name, '.');
    if (dot && dot != name) *dot = 0;
}

int kr_cmd_backtest(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_opts(argc, argv, &o);
    if (rc == 0 && o.out && kr_cli_check_writable(CMD, o.out)) rc = 1;
    if (rc == 0 && o.csv && kr_cli_check_writable(CMD, o.csv)) rc = 1;
    if (rc != 0) {
        free(o.origin_ts);
        return rc < 0 ? 0 : rc;
    }
    char db[PATH_MAX], shown[PATH_MAX], pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[2048];
    char cpred[PATH_MAX], ctok[PATH_MAX];
    static char names[MAX_SYMBOLS][72];
    static kr_candles *cs[MAX_SYMBOLS];
    static kr_backtest_series series[MAX_SYMBOLS];
    memset(cs, 0, sizeof cs);
    memset(series, 0, sizeof series);
    kr_error err = { 0 };
    kr_store *store = NULL;
    kr_store_entry *all = NULL;
    int64_t n_all = 0;
    int n = 0;
    kr_cli_engine eng = { 0 }, cmp = { 0 };
    kr_backtest_report *report = NULL;
    char *text = NULL, *csv = NULL;
    rc = 1;

    int resolved = kr_resolve_model_dirs(o.model, o.tokenizer, pred_dir, tok_dir, msg, sizeof msg);
    if (resolved == 0 && o.compare_model)
        resolved = kr_resolve_model_dirs(o.compare_model, o.compare_tokenizer, cpred, ctok, msg,
                                         sizeof msg);
    if (resolved != 0) {
        rc = resolved == -2 ? kr_cli_fail(CMD, msg) : kr_cli_usage_error(CMD, "%s", msg);
        goto done;
    }
    if (o.n_inputs) {
        for (int i = 0; i < o.n_inputs; i++, n++) {
            const char *path = NULL;
            input_name(o.inputs[i], names[i], sizeof names[i], &path);
            for (int j = 0; j < i; j++)
                if (!strcmp(names[j], names[i])) {
                    rc = kr_cli_usage_error(CMD, "two --input files are named '%s' (use NAME=FILE)",
                                            names[i]);
                    goto done;
                }
            kr_error lerr = { 0 };
            if (kr_candles_load(path, &cs[i], &lerr) != KR_OK) {
                rc = kr_cli_fail(CMD, lerr.message);
                goto done;
            }
            kr_cli_warn_dropped_columns(CMD, path, cs[i]);
            series[i] = (kr_backtest_series){ names[i], o.interval, cs[i], o.market };
        }
    } else {
        if (kr_store_resolve_path(o.db, db, sizeof db, &err) != KR_OK) {
            rc = kr_cli_fail(CMD, err.message);
            goto done;
        }
        kr_store_display_name(db, shown, sizeof shown);
        struct stat sb;
        if (!kr_store_is_url(db) && stat(db, &sb) != 0) {
            snprintf(msg, sizeof msg,
                     "%s: no database (store candles first with 'kronos ingest', or give --input "
                     "FILE)",
                     shown);
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
        if ((o.out && (rc = kr_cli_refuse_same_file(CMD, o.out, db, "the database")) != 0) ||
            (o.csv && (rc = kr_cli_refuse_same_file(CMD, o.csv, db, "the database")) != 0))
            goto done;
        rc = 1;
        if (kr_store_open_existing(db, &store, &err) != KR_OK ||
            kr_store_list(store, NULL, &all, &n_all, &err) != KR_OK) {
            rc = kr_cli_fail(CMD, err.message);
            goto done;
        }
        const int want = o.all ? (int)(n_all < MAX_SYMBOLS ? n_all : MAX_SYMBOLS) : o.n_symbols;
        if (o.all && n_all > MAX_SYMBOLS)
            fprintf(stderr, "kronos %s: warning: %lld series stored, the first %d evaluated\n", CMD,
                    (long long)n_all, MAX_SYMBOLS);
        if (want == 0) {
            snprintf(msg, sizeof msg, "%s: nothing stored (add candles with 'kronos ingest')",
                     shown);
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
        for (int i = 0; i < want; i++, n++) {
            const kr_store_entry *e = o.all ? &all[i] : NULL;
            if (!e && kr_cli_pick_interval(o.symbols[i], o.interval, shown, all, n_all, &e, msg,
                                           sizeof msg)) {
                rc = kr_cli_fail(CMD, msg);
                goto done;
            }
            if (kr_store_read(store, e->symbol, e->interval, READ_LIMIT, &cs[i], &err) != KR_OK) {
                rc = kr_cli_fail(CMD, err.message);
                goto done;
            }
            series[i] = (kr_backtest_series){ e->symbol, e->interval, cs[i],
                                              o.market ? o.market : e->market };
        }
    }

    /* No prefix cache: every origin's window differs from the others', so it would only fill
     * the KV budget with windows nothing asks for again. */
    kr_context_params cp = kr_context_default_params();
    cp.prefix_cache = 0;
    if ((rc = kr_cli_engine_open_with(CMD, pred_dir, tok_dir, o.quant, o.allow_nonfinite, o.threads,
                                      o.kv_dtype, &cp, &eng)) != 0)
        goto done;
    char cname[PATH_MAX + 32] = "";
    if (o.compare_model || o.compare_quant) {
        const char *cpd = o.compare_model ? cpred : pred_dir,
                   *ct = o.compare_model ? ctok : tok_dir;
        if ((rc = kr_cli_engine_open_with(CMD, cpd, ct, o.compare_quant, o.allow_nonfinite,
                                          o.threads, o.kv_dtype, &cp, &cmp)) != 0)
            goto done;
        const char *base = o.compare_model ? o.compare_model : "the same model";
        snprintf(cname, sizeof cname, "%s%s%s", base, o.compare_quant ? " " : "",
                 o.compare_quant ? o.compare_quant : "");
        o.p.compare = cmp.ctx;
        o.p.compare_name = cname;
    }
    rc = 1;
    o.p.predictor_dir = pred_dir;
    o.p.tokenizer_dir = tok_dir;
    if (isatty(STDERR_FILENO)) o.p.progress = progress;
    kr_model_info mi;
    kr_model_get_info(eng.model, &mi);
    if (mi.demo)
        fprintf(stderr, "kronos %s: note: DEMO MODEL \xe2\x80\x94 not a forecast (%s)\n", CMD,
                mi.source[0] ? mi.source : "the model declares itself a demo/test checkpoint");
    if (kr_backtest_run(eng.ctx, series, n, &o.p, &report, &err) != KR_OK) {
        if (o.p.progress) fprintf(stderr, "\r\033[K");
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    if (kr_backtest_report_failures(report) > 0)
        fprintf(stderr, "kronos %s: warning: %d symbol%s not evaluated (the report says why)\n",
                CMD, kr_backtest_report_failures(report),
                kr_backtest_report_failures(report) == 1 ? "" : "s");
    if (kr_backtest_render(report, o.format, &text, &err) != KR_OK ||
        (o.csv && kr_backtest_render(report, KR_BACKTEST_CSV, &csv, &err) != KR_OK)) {
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    rc = kr_cli_write_text(CMD, o.out, text);
    if (rc == 0 && o.csv) rc = kr_cli_write_text(CMD, o.csv, csv);
done:
    free(text);
    free(csv);
    kr_backtest_report_free(report);
    kr_cli_engine_close(&cmp);
    kr_cli_engine_close(&eng);
    for (int i = 0; i < MAX_SYMBOLS; i++) kr_candles_free(cs[i]);
    free(all);
    kr_store_close(store);
    free(o.origin_ts);
    return rc;
}
