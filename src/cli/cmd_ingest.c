/*
 * cli/cmd_ingest — `kronos ingest`: reads a candle CSV (series/candles) and upserts it into
 * the local store (store/store) under a symbol and an interval, for `kronos analyze`.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kronos/util.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/progress.h"
#include "kronos.h"
#include "kronos/store.h"
#include "common/candles_input.h"

#define CMD "ingest"

static const kr_cli_opt k_opts[] = {
    { "symbol", 's', KR_CLI_TEXT, "SYM", 0, 0, NULL,
      "up to 32 characters of A-Z a-z 0-9 . _ - ^ = (e.g. AAPL, 600977.SH)" },
    { "interval", 'i', KR_CLI_TEXT, "I", 0, 0, NULL,
      "bar length: a count and a unit s, m, min, h, d, w, mo (1m, 5m, 1h,\n4h, 1d, 1w); "
      "default: the bars' most common spacing (said on\nstderr)" },
    { "market", KR_OPT_MARKET, KR_CLI_TEXT, "NAME", 0, 0, NULL,
      "the symbol's exchange calendar (NYSE, SSE, HKEX, CRYPTO, ...),\nused by 'kronos "
      "analyze' for the forecast bars' timestamps\n(default: the symbol's suffix, else "
      "inferred from the history)" },
    KR_CLI_OPT_DB("database file, or a PostgreSQL URL postgresql://... (default:\n$KRONOS_DB, else "
                  "$XDG_DATA_HOME/kronos/kronos.db or\n~/.local/share/kronos/kronos.db)"),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

const kr_cli_command kr_cli_ingest_spec = {
    "ingest",
    "--symbol SYM [--interval I] [--market NAME] [--db FILE|URL] FILE",
    "store a candle CSV under a symbol and interval in the local database",
    "Stores the candles of FILE under SYM and I in the local database, replacing stored\n"
    "candles with the same timestamps, and says how many rows were new, replaced with\n"
    "other values or repeated. A bad row rejects the whole file, and so does a second\n"
    "bar on a day of a daily series (the file stamps its days otherwise than the store).\n"
    "'kronos store list' shows what is stored, 'kronos store delete' removes a mistake.\n"
    "FILE is a CSV file (timestamps,open,high,low,close[,volume,amount]), JSON candles (a\n"
    ".json name, or text starting with { or [) or - for standard input, as for forecast.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FILE,
    16,
    NULL,
    NULL,
};

/* A warning (not an error) when the bars' spacing disagrees with the interval named: the
 * usual slip is ingesting a 5-minute file as 1m, which analyze would then mislabel. The
 * interval alone is needed, not the calendar kr_calendar_future would infer for it (a fifth of
 * a 2M-row ingest). */
static void check_spacing(const kr_candles *c, const char *interval, const char *file) {
    if (c->n < 3) return;
    const int64_t want = kr_store_interval_seconds(interval);
    const int64_t got = kr_calendar_interval(c->timestamps, c->n);
    /* Daily and longer labels are nominal (a "1mo" bar is 28-31 days): allow 20%. */
    if (want > 0 && got > 0 && (got * 10 < want * 8 || got * 10 > want * 12))
        fprintf(stderr,
                "kronos %s: warning: %s: bars are %lld s apart (most common gap) but the "
                "interval is '%s' (%lld s)\n",
                CMD, file, (long long)got, interval, (long long)want);
}

/* A warning for rows whose open or close lies outside their [low, high]: stored as they are
 * (vendors print them: an auction open, a settlement close), but the user should know. */
static void check_ranges(const kr_candles *c, const char *file) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < c->n; i++) {
        const double *v = c->values + i * KR_N_FEATURES;
        const int out = v[KR_OPEN] > v[KR_HIGH] || v[KR_OPEN] < v[KR_LOW] ||
                        v[KR_CLOSE] > v[KR_HIGH] || v[KR_CLOSE] < v[KR_LOW];
        if (out && first < 0) first = i;
        bad += out;
    }
    if (!bad) return;
    char t[32];
    fprintf(stderr,
            "kronos %s: warning: %s: %lld of %lld rows have an open or close outside their "
            "low-high range (the first at %s); stored as they are\n",
            CMD, file, (long long)bad, (long long)c->n,
            kr_format_timestamp(c->timestamps[first], c->date_only, t, sizeof t));
}

int kr_cmd_ingest(int argc, char **argv) {
    const char *symbol = NULL, *interval = NULL, *db_flag = NULL, *market = NULL;
    kr_error err = { 0 };
    const kr_cli_forecast_flags shared = { .db = &db_flag };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_ingest_spec, &shared, argc, argv);
    for (int ch; (ch = kr_cli_parse_next(&ps)) != 0;) {
        switch (ch) {
        case 's': symbol = optarg; break;
        case 'i': interval = optarg; break;
        case KR_OPT_MARKET: {
            const kr_calendar *cal;
            if (kr_calendar_find(optarg, &cal, &err) != KR_OK)
                return kr_cli_usage_error(CMD, "--market: %s", err.message);
            /* As the user spelled it (SZSE stays SZSE; its calendar is SSE's). */
            market = kr_calendar_spelling(cal, optarg);
            break;
        }
        }
    }
    if (ps.status) return ps.status < 0 ? 0 : ps.status;
    if (!symbol) return kr_cli_usage_error(CMD, "%s", "--symbol is required");
    if (kr_store_check_symbol(symbol, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "--%s", err.message);
    if (interval && kr_store_check_interval(interval, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "--%s", err.message);
    if (optind >= argc) return kr_cli_usage_error(CMD, "%s", "a candle file is required");
    if (optind + 1 < argc)
        return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
    const char *file = argv[optind];

    kr_candles *c = NULL;
    kr_store *store = NULL;
    kr_store_entry *list = NULL;
    int rc = 1;
    char path[PATH_MAX];
    /* The database first: an unwritable one fails before a large file is parsed. */
    if (kr_store_resolve_path(db_flag, path, sizeof path, &err) != KR_OK ||
        kr_store_check_writable(path, &err) != KR_OK) {
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    char msg[sizeof err.message + PATH_MAX + 8];
    if (kr_candles_load(file, &c, &err) != KR_OK) {
        rc = kr_cli_fail(CMD, err.message);
        goto done;
    }
    if (!strcmp(file, "-")) file = "stdin";
    kr_cli_warn_dropped_columns(CMD, file, c);
    char inferred[16];
    if (!interval) {
        /* The bars' own spacing names the series' interval when none is given. */
        if (kr_interval_infer(c->timestamps, c->n, inferred, sizeof inferred) != 0) {
            rc = kr_cli_usage_error(CMD, "%s",
                                    "one bar tells no interval: give --interval (1m, 5m, 1h, 1d, "
                                    "...)");
            goto done;
        }
        interval = inferred;
        fprintf(stderr,
                "kronos %s: %s: interval %s inferred from the bars' most common spacing (give "
                "--interval to name another)\n",
                CMD, file, interval);
    }
    check_spacing(c, interval, file);
    check_ranges(c, file);
    kr_store_upsert_stats stats;
    if (kr_store_open(path, &store, &err) != KR_OK ||
        kr_store_upsert_ex(store, symbol, interval, c, &stats, &err) != KR_OK ||
        (market && kr_store_set_market(store, symbol, market, &err) != KR_OK)) {
        /* The store's message names the database and the series; the file too. */
        snprintf(msg, sizeof msg, "%s: %s", file, err.message);
        rc = kr_cli_fail(CMD, msg);
        goto done;
    }
    int64_t n = 0;
    if (kr_store_list(store, symbol, &list, &n, &err) != KR_OK) {
        snprintf(msg, sizeof msg,
                 "the %lld rows were written, but reading the store back failed: %s",
                 (long long)c->n, err.message);
        rc = kr_cli_fail(CMD, msg);
        goto done;
    }
    const kr_store_entry *e = kr_store_find_entry(list, n, symbol, interval);
    if (e) { /* under the interval spelling the series already had ("5m" for "5min") */
        char a[32], b[32];
        char shown[sizeof path];
        kr_store_display_name(path, shown, sizeof shown);
        printf("%s %s: %lld rows written to %s: %lld new, %lld replaced with other values, "
               "%lld unchanged (now %lld rows, %s to %s%s%s)\n",
               e->symbol, e->interval, (long long)c->n, shown, (long long)stats.added,
               (long long)stats.replaced, (long long)stats.unchanged, (long long)e->rows,
               kr_format_timestamp(e->first_ts, c->date_only, a, sizeof a),
               kr_format_timestamp(e->last_ts, c->date_only, b, sizeof b),
               e->market[0] ? ", market " : "", e->market);
    }
    rc = 0;
done:
    free(list);
    kr_store_close(store);
    kr_candles_free(c);
    return rc;
}
