/*
 * cli/cmd_store — `kronos store list|export|delete`: what the local store (store/store)
 * holds, getting a series back out as a file `kronos ingest` and `forecast` read, and removing
 * what was ingested by mistake (a wrong symbol, interval or range) — the other half of
 * `kronos ingest`.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kronos/util.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "kronos.h"
#include "kronos/store.h"

#define CMD "store"
/* Exit status of a delete or export that matched no candle (documented in --help and the
 * README). */
#define EXIT_NOTHING_MATCHED 3

static const kr_cli_opt k_opts[] = {
    { "symbol", 's', KR_CLI_TEXT, "SYM", 0, 0, NULL, "the series' symbol (list: only its series)" },
    { "interval", 'i', KR_CLI_TEXT, "I", 0, 0, NULL,
      "the series' bar length (1m, 5m, 1h, 1d, ...)" },
    { "from", 'f', KR_CLI_TEXT, "T", 0, 0, NULL,
      "first stamp to export or delete: YYYY-MM-DD[ HH:MM[:SS]],\nYYYYMMDD or an epoch count, "
      "as in candle files (default: the\nfirst stored)" },
    { "to", 't', KR_CLI_TEXT, "T", 0, 0, NULL,
      "last stamp, the same forms (default: the last stored)" },
    { "limit", 'l', KR_CLI_INT, "N", 1, 2147483647, NULL,
      "export: only the newest N candles of the range" },
    { "format", 'F', KR_CLI_TEXT, "F", 0, 0, NULL, "export: csv (default) or json" },
    { "output", 'o', KR_CLI_FILE, "FILE", 0, 0, NULL, "export: write FILE instead of stdout" },
    { "json", 'J', KR_CLI_FLAG, NULL, 0, 0, NULL, "list: print JSON instead of a table" },
    KR_CLI_OPT_DB("database file, or a PostgreSQL URL postgresql://... (default:\n$KRONOS_DB, else "
                  "$XDG_DATA_HOME/kronos/kronos.db or\n~/.local/share/kronos/kronos.db)"),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos store` (common/options.h): its --help, getopt table, completion and man
 * page. The operands are a subcommand and, for the completion, files (as before the table). */
const kr_cli_command kr_cli_store_spec = {
    "store",
    "list [--symbol SYM] [--json] [--db FILE|URL]\n"
    "       kronos store export --symbol SYM [--interval I] [--from T] [--to T]\n"
    "                           [--limit N] [--format csv|json] [--output FILE]\n"
    "                           [--db FILE|URL]\n"
    "       kronos store delete --symbol SYM --interval I [--from T] [--to T]\n"
    "                           [--db FILE|URL]",
    "list the stored series, or delete one (or a range of its candles)",
    "list: one line per stored series: symbol, interval, market, rows, first and last\n"
    "timestamp, last update (UTC); with --json one JSON array instead, an object per\n"
    "series with GET /v1/symbols' fields (symbol, interval, rows, first_timestamp,\n"
    "last_timestamp, updated_at: Unix seconds) and market (null when none); [] when\n"
    "nothing is stored.\n"
    "export: the candles of one series stamped from T to T (both included; default all;\n"
    "with --limit the newest N of them), oldest first, as CSV that kronos ingest and\n"
    "forecast read back (every number exactly the stored one) or as GET /v1/candles'\n"
    "JSON; to stdout or --output. Without --interval, the symbol's only series.\n"
    "delete: removes the candles of one series stamped from T to T (both included; a\n"
    "date alone as --to takes in that whole day; without --from and --to, the whole\n"
    "series) in one transaction, and prints what it removed and what is left. A series\n"
    "left empty disappears from the list (and /v1/symbols). The symbol matches without\n"
    "case and the interval as ingest's does (5min finds a 5m series).\n"
    "Exit status: 0 done, 1 error, 2 usage error, 3 delete or export matched nothing\n"
    "(no such series, or no candle in the range; nothing was changed or written).\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FILE,
    16,
    NULL,
    NULL,
};

/* Stamps of a series as its interval reads: dates for daily and longer bars at midnight. */
static const char *stamp(int64_t t, const char *interval, char *buf, int cap) {
    const int daily = kr_store_interval_seconds(interval) >= 86400 && t % 86400 == 0;
    return kr_format_timestamp(t, daily, buf, cap);
}

/* The list as kr_store_list_json writes it (GET /v1/symbols' objects, with the market). */
static int print_json(const kr_store_entry *e, int64_t n) {
    kr_error err = { 0 };
    char *text = NULL;
    if (kr_store_list_json(e, n, 1, &text, &err) != KR_OK) return kr_cli_fail(CMD, err.message);
    printf("%s\n", text);
    free(text);
    return 0;
}

static int run_list(const char *path, const char *symbol, int json) {
    kr_error err = { 0 };
    kr_store *store = NULL;
    kr_store_entry *e = NULL;
    int64_t n = 0;
    char shown[PATH_MAX];
    kr_store_display_name(path, shown, sizeof shown);
    /* A missing file is not created just to find it holds nothing. */
    if (!kr_store_is_url(path) && access(path, F_OK) != 0) {
        if (json) return print_json(NULL, 0);
        printf("%s: no such database (nothing stored yet; kronos ingest creates it)\n", shown);
        return 0;
    }
    if (kr_store_open_existing(path, &store, &err) != KR_OK ||
        kr_store_list(store, symbol, &e, &n, &err) != KR_OK) {
        kr_store_close(store);
        return kr_cli_fail(CMD, err.message);
    }
    kr_store_close(store);
    if (json) {
        int rc = print_json(e, n);
        free(e);
        return rc;
    }
    if (n == 0) {
        printf("%s: no series stored%s%s\n", shown, symbol ? " for " : "", symbol ? symbol : "");
        free(e);
        return 0;
    }
    printf("%-14s %-9s %-8s %10s  %-19s  %-19s  %s\n", "SYMBOL", "INTERVAL", "MARKET", "ROWS",
           "FIRST", "LAST", "UPDATED (UTC)");
    char a[32], b[32], u[32];
    for (int64_t i = 0; i < n; i++)
        printf("%-14s %-9s %-8s %10lld  %-19s  %-19s  %s\n", e[i].symbol, e[i].interval,
               e[i].market[0] ? e[i].market : "-", (long long)e[i].rows,
               stamp(e[i].first_ts, e[i].interval, a, sizeof a),
               stamp(e[i].last_ts, e[i].interval, b, sizeof b),
               kr_format_timestamp(e[i].updated_at, 0, u, sizeof u));
    free(e);
    return 0;
}

typedef struct export_opts {
    const char *symbol, *interval, *from, *to, *format, *output;
    int64_t limit;
} export_opts;

/* The interval to export: the one asked for as the store spells it, else the symbol's only
 * series. 0, or an exit status after the message. */
static int export_series(kr_store *store, const char *shown, const export_opts *o, char *symbol,
                         char *interval, size_t cap) {
    kr_error err = { 0 };
    kr_store_entry *e = NULL;
    int64_t n = 0;
    if (kr_store_list(store, o->symbol, &e, &n, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    const kr_store_entry *hit = o->interval ? kr_store_find_entry(e, n, NULL, o->interval)
                                : n == 1    ? &e[0]
                                            : NULL;
    int rc = 0;
    if (hit) {
        snprintf(symbol, cap, "%s", hit->symbol);
        snprintf(interval, cap, "%s", hit->interval);
    } else {
        char list[512] = "";
        for (int64_t i = 0, len = 0; i < n && len + 40 < (int64_t)sizeof list; i++)
            len += snprintf(list + len, sizeof list - (size_t)len, "%s%s", i ? ", " : "",
                            e[i].interval);
        if (n > 1 && !o->interval) {
            char msg[700];
            snprintf(msg, sizeof msg,
                     "export: %s has several series (%s): name one with --interval", e[0].symbol,
                     list);
            rc = kr_cli_usage_error(CMD, "%s", msg);
        } else {
            fprintf(stderr, "kronos %s: nothing exported: %s holds no series %s%s%s%s%s%s\n", CMD,
                    shown, o->symbol, o->interval ? " " : "", o->interval ? o->interval : "",
                    n ? " (it has " : "", n ? list : "", n ? ")" : "");
            rc = EXIT_NOTHING_MATCHED;
        }
    }
    free(e);
    return rc;
}

static int write_text(const char *output, const char *text) {
    FILE *f = output ? fopen(output, "w") : stdout;
    int ok = f && fputs(text, f) >= 0;
    if (output && f)
        ok = fclose(f) == 0 && ok;
    else if (f)
        ok = fflush(f) == 0 && ok;
    if (ok) return 0;
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof msg, "%s: cannot write", output ? output : "stdout");
    return kr_cli_fail(CMD, msg);
}

static int run_export(const char *path, const export_opts *o) {
    kr_error err = { 0 };
    int64_t from_ts, to_ts;
    if (kr_store_parse_range(o->from, o->to, "--from", "--to", &from_ts, &to_ts, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    if (o->output && kr_cli_refuse_same_file(CMD, o->output, path, "the database")) return 2;
    if (o->output && kr_cli_check_writable(CMD, o->output)) return 1;
    char shown[PATH_MAX];
    kr_store_display_name(path, shown, sizeof shown);
    if (!kr_store_is_url(path) && access(path, F_OK) != 0) {
        fprintf(stderr, "kronos %s: nothing exported: %s: no such database\n", CMD, shown);
        return EXIT_NOTHING_MATCHED;
    }
    kr_store *store = NULL;
    if (kr_store_open_existing(path, &store, &err) != KR_OK) return kr_cli_fail(CMD, err.message);
    char symbol[KR_STORE_NAME_MAX + 1], interval[KR_STORE_NAME_MAX + 1];
    int rc = export_series(store, shown, o, symbol, interval, sizeof symbol);
    kr_candles *c = NULL;
    if (rc == 0 &&
        kr_store_read_range(store, symbol, interval, from_ts, to_ts, o->limit, &c, &err) != KR_OK) {
        /* The series exists: what failed is the range, or the store itself. */
        if (err.status == KR_ERR_INVALID_ARG) {
            fprintf(stderr, "kronos %s: nothing exported: %s\n", CMD, err.message);
            rc = EXIT_NOTHING_MATCHED;
        } else {
            rc = kr_cli_fail(CMD, err.message);
        }
    }
    kr_store_close(store);
    if (rc != 0) return rc;
    char *text = NULL;
    kr_status st = !strcmp(o->format, "json") ? kr_candles_to_json(c, symbol, interval, &text, &err)
                                              : kr_candles_to_csv(c, &text, &err);
    if (st == KR_OK)
        rc = write_text(o->output, text);
    else
        rc = kr_cli_fail(CMD, err.message);
    if (rc == 0) {
        char a[32], b[32];
        fprintf(stderr, "kronos %s: exported %lld candle%s of %s %s (%s to %s)%s%s\n", CMD,
                (long long)c->n, c->n == 1 ? "" : "s", symbol, interval,
                stamp(c->timestamps[0], interval, a, sizeof a),
                stamp(c->timestamps[c->n - 1], interval, b, sizeof b), o->output ? " to " : "",
                o->output ? o->output : "");
    }
    free(text);
    kr_candles_free(c);
    return rc;
}

static int run_delete(const char *path, const char *symbol, const char *interval, const char *from,
                      const char *to) {
    kr_error err = { 0 };
    int64_t from_ts, to_ts;
    if (kr_store_parse_range(from, to, "--from", "--to", &from_ts, &to_ts, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "%s", err.message);
    kr_store *store = NULL;
    kr_store_delete_stats d;
    char shown[PATH_MAX];
    kr_store_display_name(path, shown, sizeof shown);
    /* A missing file is not created just to find it holds nothing. */
    if (!kr_store_is_url(path) && access(path, F_OK) != 0) {
        printf("nothing deleted: %s: no such database (no series %s %s)\n", shown, symbol,
               interval);
        return EXIT_NOTHING_MATCHED;
    }
    if (kr_store_open_existing(path, &store, &err) != KR_OK ||
        kr_store_delete(store, symbol, interval, from_ts, to_ts, &d, &err) != KR_OK) {
        kr_store_close(store);
        return kr_cli_fail(CMD, err.message);
    }
    int rc = 0;
    char a[32], b[32];
    if (!d.symbol[0]) {
        kr_store_entry *e = NULL;
        int64_t n = 0;
        char list[512] = "";
        if (kr_store_list(store, symbol, &e, &n, &err) == KR_OK)
            for (int64_t i = 0, len = 0; i < n && len + 40 < (int64_t)sizeof list; i++)
                len += snprintf(list + len, sizeof list - (size_t)len, "%s%s", i ? ", " : "",
                                e[i].interval);
        free(e);
        printf("nothing deleted: %s holds no series %s %s%s%s%s\n", shown, symbol, interval,
               n ? " (it has " : "", list, n ? ")" : "");
        rc = EXIT_NOTHING_MATCHED;
    } else if (d.deleted == 0) {
        printf("nothing deleted: %s %s in %s has no candle from %s to %s (it holds %lld, %s to "
               "%s)\n",
               d.symbol, d.interval, shown, from && *from ? from : "the first",
               to && *to ? to : "the last", (long long)d.rows_left,
               stamp(d.first_left, d.interval, a, sizeof a),
               stamp(d.last_left, d.interval, b, sizeof b));
        rc = EXIT_NOTHING_MATCHED;
    } else {
        printf("%s %s: deleted %lld row%s (%s to %s) from %s; ", d.symbol, d.interval,
               (long long)d.deleted, d.deleted == 1 ? "" : "s",
               stamp(d.first_deleted, d.interval, a, sizeof a),
               stamp(d.last_deleted, d.interval, b, sizeof b), shown);
        if (d.rows_left == 0)
            printf("the series is gone\n");
        else
            printf("%lld row%s left (%s to %s)\n", (long long)d.rows_left,
                   d.rows_left == 1 ? "" : "s", stamp(d.first_left, d.interval, a, sizeof a),
                   stamp(d.last_left, d.interval, b, sizeof b));
    }
    kr_store_close(store);
    return rc;
}

int kr_cmd_store(int argc, char **argv) {
    const char *symbol = NULL, *interval = NULL, *from = NULL, *to = NULL, *db_flag = NULL;
    const char *format = NULL, *output = NULL;
    int64_t limit = 0;
    int json = 0;
    kr_error err = { 0 };
    const kr_cli_forecast_flags shared = { .db = &db_flag };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_store_spec, &shared, argc, argv);
    for (int ch; (ch = kr_cli_parse_next(&ps)) != 0;) {
        switch (ch) {
        case 's': symbol = optarg; break;
        case 'i': interval = optarg; break;
        case 'f': from = optarg; break;
        case 't': to = optarg; break;
        case 'J': json = 1; break;
        case 'l': {
            int v = 0;
            if (!kr_arg_int(optarg, 1, INT_MAX, &v))
                return kr_cli_usage_error(CMD, "--limit must be a positive integer, got '%s'",
                                          optarg);
            limit = v;
            break;
        }
        case 'F':
            if (strcmp(optarg, "csv") && strcmp(optarg, "json"))
                return kr_cli_usage_error(CMD, "--format must be csv or json, got '%s'", optarg);
            format = optarg;
            break;
        case 'o':
            if (!*optarg) return kr_cli_usage_error(CMD, "%s", "--output must not be empty");
            output = optarg;
            break;
        }
    }
    if (ps.status) return ps.status < 0 ? 0 : ps.status;
    if (optind >= argc)
        return kr_cli_usage_error(CMD, "%s", "a subcommand is required: list, export or delete");
    const char *sub = argv[optind];
    if (optind + 1 < argc)
        return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
    const int list = !strcmp(sub, "list"), del = !strcmp(sub, "delete"),
              export = !strcmp(sub, "export");
    if (!list && !del && !export) return kr_cli_usage_error(CMD, "unknown subcommand '%s'", sub);
    if (symbol && kr_store_check_symbol(symbol, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "--%s", err.message);
    if (list && (interval || from || to))
        return kr_cli_usage_error(CMD, "%s", "list takes only --symbol, --json and --db");
    if (!list && json)
        return kr_cli_usage_error(CMD, "%s", "--json goes with list (export takes --format json)");
    if (!export && (limit || format || output))
        return kr_cli_usage_error(CMD, "%s", "--limit, --format and --output go with export");
    if (export && !symbol) return kr_cli_usage_error(CMD, "%s", "export: --symbol is required");
    if (export && interval && kr_store_check_interval(interval, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "--%s", err.message);
    if (del) {
        if (!symbol) return kr_cli_usage_error(CMD, "%s", "delete: --symbol is required");
        if (!interval) return kr_cli_usage_error(CMD, "%s", "delete: --interval is required");
        if (kr_store_check_interval(interval, &err) != KR_OK)
            return kr_cli_usage_error(CMD, "--%s", err.message);
    }
    char path[PATH_MAX];
    if (kr_store_resolve_path(db_flag, path, sizeof path, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    if (export) {
        export_opts o = { symbol, interval, from, to, format ? format : "csv", output, limit };
        return run_export(path, &o);
    }
    return list ? run_list(path, symbol, json) : run_delete(path, symbol, interval, from, to);
}
