/*
 * cli/cmd_analyze — `kronos analyze SYMBOL...`: reads the symbols' candles from the local
 * store, runs the analyst pipeline (one batch forecast for all symbols, optional walk-forward
 * calibration) and writes the report as JSON, Markdown or HTML. With --llm-url, a language
 * model is then asked for a prose narrative of each report (analyst/narrative); its failure
 * is a warning, never a failed analysis.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kronos/analyst.h"
#include "kronos/util.h"
#include "common/analyze_stored.h"
#include "common/candles_input.h"
#include "common/limits.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "cli/engine_open.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "cli/store_pick.h"
#include "kronos.h"
#include "kronos/store.h"

#define CMD "analyze"
#define MAX_SYMBOLS 256
/* Rows read per symbol: indicators and calibration need far fewer; this only bounds memory
 * for a very long 1-minute history. */

/* getopt codes of the flags without a short letter. */
enum {
    OPT_LLM_URL = 256,
    OPT_LLM_MODEL,
    OPT_LLM_TIMEOUT,
    OPT_MAX_PATHS,
    OPT_TARGET_PROB,
    OPT_TARGET_VAR,
    OPT_WATCHLIST,
    OPT_ALL,
    OPT_AS_OF
};

typedef struct opts {
    const char *db, *interval, *model, *tokenizer, *out;
    const char *llm_url, *llm_model;
    float llm_timeout; /* seconds; 0: not given */
    const char *symbols[MAX_SYMBOLS];
    const char *sym_interval[MAX_SYMBOLS]; /* from a watch-list line, else NULL */
    int sym_line[MAX_SYMBOLS]; /* its watch-list line, else 0 */
    int n_symbols, threads, allow_nonfinite;
    int paths_given, max_paths_given, all;
    const char *watchlist, *market;
    char *watch_text; /* the watch-list file, owned; symbols point into it */
    kr_report_format format;
    kr_analyze_params p;
} opts;

/* Adds a symbol (and its watch-list interval); duplicates are refused whatever their case. */
static int add_symbol(opts *o, const char *sym, const char *interval, const char *file, int line) {
    kr_error err;
    char where[1200] = "";
    if (file) snprintf(where, sizeof where, "%s: line %d: ", file, line);
    if (o->n_symbols >= MAX_SYMBOLS) return kr_cli_usage_error(CMD, "more than %s symbols", "256");
    if (kr_store_check_symbol(sym, &err) != KR_OK) {
        char m[1600];
        snprintf(m, sizeof m, "%s%s", where, err.message);
        return kr_cli_usage_error(CMD, "%s", m);
    }
    if (interval && kr_store_check_interval(interval, &err) != KR_OK) {
        char m[1600];
        snprintf(m, sizeof m, "%s%s", where, err.message);
        return kr_cli_usage_error(CMD, "%s", m);
    }
    for (int j = 0; j < o->n_symbols; j++)
        if (!strcasecmp(o->symbols[j], sym) &&
            !strcmp(o->sym_interval[j] ? o->sym_interval[j] : "", interval ? interval : "")) {
            char m[1600];
            snprintf(m, sizeof m, "%ssymbol '%s' given twice", where, sym);
            if (o->sym_line[j])
                snprintf(m + strlen(m), sizeof m - strlen(m), " (first on line %d)",
                         o->sym_line[j]);
            return kr_cli_usage_error(CMD, "%s", m);
        }
    o->sym_line[o->n_symbols] = file ? line : 0;
    o->sym_interval[o->n_symbols] = interval;
    o->symbols[o->n_symbols++] = sym;
    return 0;
}

/* --watchlist FILE: "SYMBOL [INTERVAL]" per line, blank lines and '#' comments skipped. A
 * file that cannot be read is an I/O error (1), as for every other input file; contents that
 * do not parse are a usage error (2). */
static int read_watchlist(opts *o) {
    kr_error err = { 0 };
    size_t len = 0;
    if (kr_input_read_file(o->watchlist, 1 << 20, "watch-list", &o->watch_text, &len, &err) !=
        KR_OK) {
        fprintf(stderr, "kronos %s: error: --watchlist: %s\n", CMD, err.message);
        return 1;
    }
    int line = 0, added = 0;
    char *start = o->watch_text;
    if (start && !strncmp(start, "\xEF\xBB\xBF", 3)) start += 3; /* a UTF-8 BOM, as editors write */
    for (char *p = start; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        line++;
        char *hash = strchr(p, '#');
        if (hash) *hash = 0;
        char *save = NULL, *sym = strtok_r(p, " \t\r,;", &save);
        char *iv = sym ? strtok_r(NULL, " \t\r,;", &save) : NULL;
        char *extra = iv ? strtok_r(NULL, " \t\r,;", &save) : NULL;
        if (extra) {
            char m[1400];
            snprintf(m, sizeof m, "%s: line %d: expected 'SYMBOL [INTERVAL]', got more",
                     o->watchlist, line);
            return kr_cli_usage_error(CMD, "%s", m);
        }
        if (sym) {
            int rc = add_symbol(o, sym, iv, o->watchlist, line);
            if (rc) return rc;
            added++;
        }
        p = nl ? nl + 1 : NULL;
    }
    if (!added) {
        char m[1200];
        snprintf(m, sizeof m, "%s: no symbols in the watch-list", o->watchlist);
        return kr_cli_usage_error(CMD, "%s", m);
    }
    return 0;
}

static const kr_cli_opt k_opts[] = {
    { "watchlist", OPT_WATCHLIST, KR_CLI_FILE, "FILE", 0, 0, NULL,
      "analyse the symbols listed in FILE: one per line, optionally\nfollowed by an interval "
      "('AAPL 1d'); '#' starts a comment" },
    { "all", OPT_ALL, KR_CLI_FLAG, NULL, 0, 0, NULL,
      "analyse every stored series (each symbol and interval)" },
    KR_CLI_OPT_DB(
        "database written by 'kronos ingest', a file or a PostgreSQL\nURL postgresql://... "
        "(default: "
        "$KRONOS_DB, else\n$XDG_DATA_HOME/kronos/kronos.db or ~/.local/share/kronos/kronos.db)"),
    { "interval", 'i', KR_CLI_TEXT, "I", 0, 0, NULL,
      "which stored interval (default: the symbol's only one, else the\nmost recently updated)" },
    KR_CLI_OPT_MODEL(
        "predictor directory, or a directory with predictor/ and\ntokenizer/ (default: the bundled "
        "demo model)"),
    KR_CLI_OPT_TOKENIZER(KR_CLI_HELP_TOKENIZER),
    { "horizon", 'n', KR_CLI_INT, "N", 0, 0, NULL, "bars to forecast (default 20)" },
    KR_CLI_OPT_PATHS("exactly N sample paths (default: adaptive, below)"),
    { "max-paths", OPT_MAX_PATHS, KR_CLI_INT, "N", 0, 0, NULL,
      "adaptive paths: start with --paths (default 128) and add\npaths in rounds until the error "
      "targets are met, up to N\n(default 1024)" },
    { "target-prob-se", OPT_TARGET_PROB, KR_CLI_TEXT, "X", 0, 0, NULL,
      "P(up) standard error to reach (default 0.02 = 2 pp)" },
    { "target-var-rel", OPT_TARGET_VAR, KR_CLI_TEXT, "X", 0, 0, NULL,
      "VaR95 standard error relative to its size (default 0.2)" },
    { "as-of", OPT_AS_OF, KR_CLI_TEXT, "TIME", 0, 0, NULL,
      "judge staleness against TIME (YYYY-MM-DD[ HH:MM]) instead of\nthe clock: a history is stale "
      "when more than two bars' worth\nof its market's trading sessions passed since its last "
      "bar" },
    KR_CLI_OPT_MARKET(
        "exchange calendar of the forecast bars for every symbol: NYSE,\nSSE, HKEX, CRYPTO, ... "
        "(default: the market stored with\n'kronos ingest --market', else the symbol's suffix, "
        "else\ninferred from the history; data/calendars/README.md)"),
    { "ohlc", KR_OPT_OHLC, KR_CLI_TEXT, "MODE", 0, 0, NULL,
      "consistent (default: high >= max(open, close), low <=\nmin(open, close), volume >= 0 on "
      "every path before the\nstatistics) or raw (the model's numbers)" },
    KR_CLI_OPT_LOOKBACK("history rows the model sees (default: all, up to\nmax-context - horizon)"),
    KR_CLI_OPT_MAX_CONTEXT("predictor window (default 512)"),
    KR_CLI_OPT_SEED("random seed, decimal or 0x hex (default 0)"),
    KR_CLI_OPT_TEMPERATURE("sampling temperature (default 1.0)"),
    KR_CLI_OPT_TOP_P("nucleus sampling threshold (default 0.9)"),
    KR_CLI_OPT_TOP_K("keep the K most likely tokens (default 0 = off)"),
    { "calibrate", 'K', KR_CLI_INT, "K", 0, 0, NULL,
      "also score the last K walk-forward windows against the naive\nno-change forecast (default 0 "
      "= off)" },
    { "llm-url", OPT_LLM_URL, KR_CLI_TEXT, "URL", 0, 0, NULL,
      "also ask a language model behind an Ollama-compatible server\n(e.g. http://127.0.0.1:11434) "
      "to rewrite each symbol's summary\nas prose, shown beside it; the numbers never come from "
      "the\nmodel, and a failure only warns (default: off)" },
    { "llm-model", OPT_LLM_MODEL, KR_CLI_TEXT, "NAME", 0, 0, NULL,
      "model to ask (default gemma3)" },
    { "llm-timeout", OPT_LLM_TIMEOUT, KR_CLI_TEXT, "S", 0, 0, NULL,
      "seconds to wait for each answer (default 60)" },
    { "format", 'F', KR_CLI_CHOICE, "json|md|html", 0, 0, NULL, "report format (default json)" },
    { "out", 'o', KR_CLI_FILE, "FILE", 0, 0, NULL, "write the report there instead of stdout" },
    KR_CLI_OPT_THREADS,
    KR_CLI_OPT_BATCH_SIZE(
        "forecasts run in static batches of N series x paths rows\n(default 64; 0 = all at once); "
        "the report's\nengine.static_batch_rows says which"),
    KR_CLI_OPT_ALLOW_NONFINITE(KR_CLI_HELP_ALLOW_NONFINITE),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos analyze` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_analyze_spec = {
    "analyze",
    "SYMBOL... | --watchlist FILE | --all [flags]",
    "report on stored symbols: forecast statistics, risk, technicals",
    "Forecasts each stored symbol with many sample paths and reports the probability of\n"
    "finishing up, expected return and volatility, VaR / expected shortfall, drawdowns, a\n"
    "technical snapshot and a plain-language summary. Several symbols run as one batch\n"
    "and the report ranks them within each interval; a symbol that fails is listed beside\n"
    "the others' reports. Symbols match the stored ones without regard to case. Not\n"
    "investment advice.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    21,
    NULL,
    NULL,
};

static int parse_opts(int argc, char **argv, opts *o) {
    o->p = kr_analyze_default_params();
    o->p.static_batch_rows = KR_STATIC_BATCH_ROWS_DEFAULT;
    o->format = KR_FORMAT_JSON;
    const kr_cli_forecast_flags shared = {
        KR_CLI_SAMPLING_OF(o->p),
        .model = &o->model,
        .tokenizer = &o->tokenizer,
        .threads = &o->threads,
        .batch_rows = &o->p.static_batch_rows,
        .allow_nonfinite = &o->allow_nonfinite,
        .ohlc = &o->p.ohlc,
        .db = &o->db,
        .market = &o->market,
    };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_analyze_spec, &shared, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        switch (c) {
        case 'i': o->interval = optarg; break;
        case 'n':
            if (!kr_arg_int(optarg, 1, KR_LIMIT_PRED_LEN_CAP, &o->p.horizon))
                return kr_cli_usage_error(CMD, "--horizon must be an integer in 1..65536, got '%s'",
                                          optarg);
            break;
        case OPT_MAX_PATHS:
            if (!kr_arg_int(optarg, 1, 65536, &o->p.max_paths))
                return kr_cli_usage_error(
                    CMD, "--max-paths must be an integer in 1..65536, got '%s'", optarg);
            break;
        case OPT_TARGET_PROB: {
            float x;
            if (!kr_arg_float(optarg, 0.0, 0.5, &x))
                return kr_cli_usage_error(
                    CMD, "--target-prob-se must be a number in [0, 0.5], got '%s'", optarg);
            o->p.target_prob_se = x;
            break;
        }
        case OPT_TARGET_VAR: {
            float x;
            if (!kr_arg_float(optarg, 0.0, 10.0, &x))
                return kr_cli_usage_error(
                    CMD, "--target-var-rel must be a number in [0, 10], got '%s'", optarg);
            o->p.target_var_rel_se = x;
            break;
        }
        case OPT_WATCHLIST: o->watchlist = optarg; break;
        case OPT_ALL: o->all = 1; break;
        case OPT_AS_OF: {
            int64_t from = 0, to = 0;
            kr_error err = { 0 };
            if (kr_store_parse_range(optarg, NULL, "--as-of", "--to", &from, &to, &err) != KR_OK)
                return kr_cli_usage_error(CMD, "%s", err.message);
            o->p.now = from;
            break;
        }
        case 'K':
            if (!kr_arg_int(optarg, 0, 1000, &o->p.calibrate))
                return kr_cli_usage_error(
                    CMD, "--calibrate must be an integer in 0..1000, got '%s'", optarg);
            break;
        case 'F':
            if (kr_report_format_parse(optarg, &o->format) != 0)
                return kr_cli_usage_error(CMD, "--format must be json, md or html, got '%s'",
                                          optarg);
            break;
        case 'o': o->out = optarg; break;
        case OPT_LLM_URL: {
            char endpoint[1024];
            kr_error err;
            if (kr_narrative_endpoint(optarg, endpoint, sizeof endpoint, &err) != KR_OK)
                return kr_cli_usage_error(CMD, "--llm-url: %s", err.message);
            o->llm_url = optarg;
            break;
        }
        case OPT_LLM_MODEL:
            if (!*optarg) return kr_cli_usage_error(CMD, "%s", "--llm-model must not be empty");
            o->llm_model = optarg;
            break;
        case OPT_LLM_TIMEOUT:
            if (!kr_arg_float(optarg, 1e-3, 86400.0, &o->llm_timeout))
                return kr_cli_usage_error(
                    CMD, "--llm-timeout must be a number of seconds in (0, 86400], got '%s'",
                    optarg);
            break;
        }
    }
    if (ps.status) return ps.status;
    o->paths_given = kr_cli_parse_given(&ps, KR_OPT_PATHS);
    o->max_paths_given = kr_cli_parse_given(&ps, OPT_MAX_PATHS);
    for (int i = optind; i < argc; i++) {
        int rc = add_symbol(o, argv[i], NULL, NULL, 0);
        if (rc) return rc;
    }
    if (o->watchlist) {
        int rc = read_watchlist(o);
        if (rc) return rc;
    }
    if (o->all && o->n_symbols)
        return kr_cli_usage_error(CMD, "%s", "--all analyses every stored series; give no SYMBOL");
    if (o->n_symbols == 0 && !o->all)
        return kr_cli_usage_error(CMD, "%s",
                                  "give at least one SYMBOL (or --watchlist FILE, --all)");
    /* --paths alone asks for exactly that many paths; with --max-paths it is the first round. */
    if (o->paths_given && !o->max_paths_given) o->p.max_paths = o->p.paths;
    /* The default first round (128) shrinks to a smaller cap; a --paths past it is refused
     * (it ran all of them, against "up to N"). */
    if (o->max_paths_given && !o->paths_given && o->p.paths > o->p.max_paths)
        o->p.paths = o->p.max_paths;
    if (o->max_paths_given && o->p.paths > o->p.max_paths) {
        char m[128];
        snprintf(m, sizeof m, "--paths %d is more than --max-paths %d (the first round's paths)",
                 o->p.paths, o->p.max_paths);
        return kr_cli_usage_error(CMD, "%s", m);
    }
    if (!o->llm_url && (o->llm_model || o->llm_timeout > 0))
        return kr_cli_usage_error(CMD, "%s", "--llm-model and --llm-timeout need --llm-url");
    if (o->interval) {
        kr_error err;
        if (kr_store_check_interval(o->interval, &err) != KR_OK)
            return kr_cli_usage_error(CMD, "--%s", err.message);
    }
    if (o->p.horizon > o->p.max_context - 2) {
        char b[32];
        snprintf(b, sizeof b, "%d", o->p.max_context - 1);
        return kr_cli_usage_error(
            CMD,
            "--horizon must be below --max-context - 1 (%s): the window also holds a 2-row history",
            b);
    }
    if (o->p.lookback > o->p.max_context) {
        char b[32];
        snprintf(b, sizeof b, "%d", o->p.max_context);
        return kr_cli_usage_error(CMD, "--lookback must not exceed --max-context (%s)", b);
    }
    kr_error err;
    if (kr_analyze_check_params(&o->p, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    return 0;
}

/* Progress on stderr, one line rewritten in place; only when stderr is a terminal. The
 * forecasts of a phase run in one engine call, so the bar moves per phase, not per path. */
static void progress(void *user, int step, int n_steps, const char *what) {
    (void)user;
    const int width = 24;
    int fill = n_steps > 0 ? step * width / n_steps : width;
    if (step >= n_steps) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        return;
    }
    fprintf(stderr, "\r\033[K[");
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %d/%d %s ...", step + 1, n_steps, what);
    fflush(stderr);
}

/* The CLI's words for a symbol that cannot be analysed (common/analyze_stored.h), into
 * msg[cap]. db names the store as messages show it. */
static void describe_fault(const opts *o, const kr_stored_series *e, const kr_store_entry *all,
                           int64_t n_all, const char *db, char *msg, size_t cap) {
    char list[1400], suggested[40];
    switch (e->fault) {
    case KR_STORED_UNKNOWN_SYMBOL:
        if (kr_symbol_suggest_exchange(e->asked, suggested, sizeof suggested)) {
            snprintf(msg, cap,
                     "unknown symbol '%s' in %s: an A-share code names its exchange, did you "
                     "mean '%s'? (6xxxxx: .SH, 0/3xxxxx: .SZ, 8/4xxxxx: .BJ)",
                     e->asked, db, suggested);
            break;
        }
        kr_cli_stored_list(all, n_all, list, sizeof list);
        snprintf(msg, cap, "unknown symbol '%s' in %s; stored: %s (add one with 'kronos ingest')",
                 e->asked, db, list);
        break;
    case KR_STORED_NO_INTERVAL:
        kr_cli_stored_list(e->series, e->n_series, list, sizeof list);
        snprintf(msg, cap, "%s has no '%s' candles in %s; stored: %s", e->symbol, e->want, db,
                 list);
        break;
    case KR_STORED_READ_FAILED: snprintf(msg, cap, "%s", e->read_error.message); break;
    case KR_STORED_TOO_FEW_ROWS:
        snprintf(msg, cap,
                 "%s %s: too few rows: %lld stored, need at least %lld for --horizon %d%s",
                 e->symbol, e->interval, (long long)e->rows, (long long)e->need, o->p.horizon,
                 o->p.calibrate ? " and --calibrate" : "");
        break;
    case KR_STORED_OK: msg[0] = '\0'; break;
    }
}

/* Asks for the narratives (see --llm-url) and says on stderr what went wrong with any. Only
 * running out of memory fails the command. Returns 0, or an exit code. */
static int add_narratives(const opts *o, kr_report_set *set, kr_narrative ***narr) {
    kr_narrative_params np = kr_narrative_default_params();
    np.url = o->llm_url;
    if (o->llm_model) np.model = o->llm_model;
    if (o->llm_timeout > 0) np.timeout_s = o->llm_timeout;
    if (isatty(STDERR_FILENO)) np.progress = progress;
    kr_error err = { 0 };
    if (kr_narrative_attach_all(set, &np, narr, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    for (int i = 0; i < set->n; i++) {
        const kr_narrative *n = (*narr)[i];
        if (!n->text)
            fprintf(stderr, "kronos %s: warning: no narrative for %s: %s\n", CMD,
                    kr_report_symbol(set->reports[i]), n->error);
        else if (n->warning[0])
            fprintf(
                stderr,
                "kronos %s: warning: %s: %s (e.g. '%s'); it is kept, marked with that warning\n",
                CMD, kr_report_symbol(set->reports[i]), n->warning, n->unsupported);
    }
    return 0;
}

int kr_cmd_analyze(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_opts(argc, argv, &o);
    if (rc == 0 && o.out && kr_cli_check_writable(CMD, o.out)) rc = 1;
    if (rc != 0) {
        free(o.watch_text);
        return rc < 0 ? 0 : rc;
    }

    char db[PATH_MAX], pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[2048];
    kr_error err = { 0 };
    kr_store *store = NULL;
    kr_store_entry *all = NULL;
    int64_t n_all = 0;
    static kr_stored_series series[MAX_SYMBOLS];
    static kr_analyze_item items[MAX_SYMBOLS];
    static char errors[MAX_SYMBOLS][1024];
    memset(series, 0, sizeof series);
    memset(items, 0, sizeof items);
    kr_cli_engine eng = { 0 };
    kr_report_set *set = NULL;
    kr_narrative **narr = NULL;
    int n_narr = 0;
    char *text = NULL;
    rc = 1;

    int resolved = kr_resolve_model_dirs(o.model, o.tokenizer, pred_dir, tok_dir, msg, sizeof msg);
    if (resolved != 0) {
        rc = resolved == -2 ? kr_cli_fail(CMD, msg) : kr_cli_usage_error(CMD, "%s", msg);
        goto done;
    }
    if (kr_store_resolve_path(o.db, db, sizeof db, &err) != KR_OK) {
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    if (o.out && (rc = kr_cli_refuse_same_file(CMD, o.out, db, "the database")) != 0) goto done;
    rc = 1;
    /* Messages name a URL without its password. */
    char shown[PATH_MAX];
    kr_store_display_name(db, shown, sizeof shown);
    struct stat sb;
    if (!kr_store_is_url(db) && stat(db, &sb) != 0) {
        snprintf(msg, sizeof msg,
                 "%s: no database (store candles first with 'kronos ingest --symbol SYM "
                 "--interval I FILE.csv')",
                 shown);
        rc = kr_cli_fail(CMD, msg);
        goto done;
    }
    if (kr_store_open_existing(db, &store, &err) != KR_OK ||
        kr_store_list(store, NULL, &all, &n_all, &err) != KR_OK) {
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    if (o.all) {
        if (kr_stored_all(all, n_all, series, MAX_SYMBOLS, &o.n_symbols, &err) != KR_OK) {
            snprintf(msg, sizeof msg, "%s: %s", shown, err.message);
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
        if (o.n_symbols == 0) {
            snprintf(msg, sizeof msg, "%s: nothing stored (add candles with 'kronos ingest')",
                     shown);
            rc = kr_cli_fail(CMD, msg);
            goto done;
        }
    } else {
        for (int i = 0; i < o.n_symbols; i++) {
            series[i].asked = o.symbols[i];
            series[i].want = o.sym_interval[i] ? o.sym_interval[i] : o.interval;
        }
    }
    for (int i = 0; i < o.n_symbols; i++) kr_stored_pick(all, n_all, &series[i]);
    /* "AAPL" and "AAPL 1d" name one series once the interval is resolved. */
    int first, second;
    if (kr_stored_duplicate(series, o.n_symbols, &first, &second)) {
        char where[PATH_MAX + 64] = "";
        if (o.sym_line[first] && o.sym_line[second])
            snprintf(where, sizeof where, "%s: lines %d and %d: ", o.watchlist, o.sym_line[first],
                     o.sym_line[second]);
        snprintf(msg, sizeof msg, "%ssymbol '%s' given twice (both name the %s %s series)", where,
                 series[second].asked, series[second].symbol, series[second].interval);
        rc = kr_cli_usage_error(CMD, "%s", msg);
        goto done;
    }
    /* A symbol that cannot be loaded is a failure of the report set, beside the others. */
    const int64_t need = kr_analyze_min_rows(&o.p);
    for (int i = 0; i < o.n_symbols; i++) {
        kr_stored_read(store, need, &series[i]);
        describe_fault(&o, &series[i], all, n_all, shown, errors[i], sizeof errors[i]);
        items[i] = kr_stored_item(&series[i], o.market, errors[i]);
    }

    if ((rc = kr_cli_engine_open(CMD, pred_dir, tok_dir, NULL, o.allow_nonfinite, o.threads, NULL,
                                 &eng)) != 0)
        goto done;
    rc = 1;
    o.p.predictor_dir = pred_dir;
    o.p.tokenizer_dir = tok_dir;
    if (isatty(STDERR_FILENO) && (o.n_symbols > 1 || o.p.calibrate > 0)) o.p.progress = progress;
    if (kr_analyze(eng.ctx, items, o.n_symbols, &o.p, &set, &err) != KR_OK) {
        if (o.p.progress) fprintf(stderr, "\r\033[K");
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    for (int i = 0; i < set->n_failures; i++)
        fprintf(stderr, "kronos %s: warning: %s not analysed: %s\n", CMD, set->failures[i].symbol,
                set->failures[i].message);
    kr_model_info mi;
    kr_model_get_info(eng.model, &mi);
    if (mi.demo) /* the same note as forecast's */
        fprintf(stderr, "kronos %s: note: DEMO MODEL \xe2\x80\x94 not a forecast (%s)\n", CMD,
                mi.source[0] ? mi.source : "the model declares itself a demo/test checkpoint");
    if (o.llm_url) {
        n_narr = set->n;
        if ((rc = add_narratives(&o, set, &narr)) != 0) goto done;
        rc = 1;
    }
    if (kr_render(set, o.format, &text, &err) != KR_OK) {
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    rc = kr_cli_write_text(CMD, o.out, text);
done:
    free(text);
    kr_report_set_free(set);
    kr_narrative_free_all(narr, n_narr); /* after the set: its reports borrow them */
    kr_cli_engine_close(&eng);
    kr_stored_series_free(series, o.n_symbols);
    free(all);
    kr_store_close(store);
    free(o.watch_text);
    return rc;
}
