/*
 * cli/cmd_store — `kronos store list|delete`: what the local store (market/store) holds, and
 * removing what was ingested by mistake (a wrong symbol, interval or range) — the other half
 * of `kronos ingest`.
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
#include "kronos.h"
#include "kronos/market.h"

#define CMD "store"
/* Exit status of a delete that matched no candle (documented in --help and the README). */
#define EXIT_NOTHING_DELETED 3

static void usage(FILE *f) {
    fputs("usage: kronos store list [--symbol SYM] [--json] [--db FILE|URL]\n"
          "       kronos store delete --symbol SYM --interval I [--from T] [--to T]\n"
          "                           [--db FILE|URL]\n"
          "\n"
          "list: one line per stored series: symbol, interval, market, rows, first and last\n"
          "timestamp, last update (UTC); with --json one JSON array instead, an object per\n"
          "series with GET /v1/symbols' fields (symbol, interval, rows, first_timestamp,\n"
          "last_timestamp, updated_at: Unix seconds) and market (null when none); [] when\n"
          "nothing is stored.\n"
          "delete: removes the candles of one series stamped from T to T (both included; a\n"
          "date alone as --to takes in that whole day; without --from and --to, the whole\n"
          "series) in one transaction, and prints what it removed and what is left. A series\n"
          "left empty disappears from the list (and /v1/symbols). The symbol matches without\n"
          "case and the interval as ingest's does (5min finds a 5m series).\n"
          "Exit status: 0 done, 1 error, 2 usage error, 3 delete matched nothing (no such\n"
          "series, or no candle in the range; nothing was changed).\n"
          "\n"
          "  --symbol SYM     the series' symbol (list: only its series)\n"
          "  --interval I     the series' bar length (1m, 5m, 1h, 1d, ...)\n"
          "  --from T         first stamp to delete: YYYY-MM-DD[ HH:MM[:SS]], YYYYMMDD or an\n"
          "                   epoch count, as in candle files (default: the first stored)\n"
          "  --to T           last stamp to delete, the same forms (default: the last stored)\n"
          "  --json           list: print JSON instead of a table\n"
          "  --db FILE|URL    database file, or a PostgreSQL URL postgresql://... (default:\n"
          "                   $KRONOS_DB, else $XDG_DATA_HOME/kronos/kronos.db or\n"
          "                   ~/.local/share/kronos/kronos.db)\n"
          "  -h, --help       this text\n",
          f);
}

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
    if (kr_store_open(path, &store, &err) != KR_OK ||
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
        return EXIT_NOTHING_DELETED;
    }
    if (kr_store_open(path, &store, &err) != KR_OK ||
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
        rc = EXIT_NOTHING_DELETED;
    } else if (d.deleted == 0) {
        printf("nothing deleted: %s %s in %s has no candle from %s to %s (it holds %lld, %s to "
               "%s)\n",
               d.symbol, d.interval, shown, from && *from ? from : "the first",
               to && *to ? to : "the last", (long long)d.rows_left,
               stamp(d.first_left, d.interval, a, sizeof a),
               stamp(d.last_left, d.interval, b, sizeof b));
        rc = EXIT_NOTHING_DELETED;
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
    static const struct option longopts[] = {
        { "symbol", required_argument, NULL, 's' },
        { "interval", required_argument, NULL, 'i' },
        { "from", required_argument, NULL, 'f' },
        { "to", required_argument, NULL, 't' },
        { "db", required_argument, NULL, 'd' },
        { "json", no_argument, NULL, 'J' }, /* list only */
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *symbol = NULL, *interval = NULL, *from = NULL, *to = NULL, *db_flag = NULL;
    int json = 0;
    kr_error err = { 0 };
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': symbol = optarg; break;
        case 'i': interval = optarg; break;
        case 'f': from = optarg; break;
        case 't': to = optarg; break;
        case 'd': db_flag = optarg; break;
        case 'J': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return kr_cli_usage_error(CMD, "%s", "unknown flag");
        }
    }
    if (optind >= argc)
        return kr_cli_usage_error(CMD, "%s", "a subcommand is required: list or delete");
    const char *sub = argv[optind];
    if (optind + 1 < argc)
        return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
    const int list = !strcmp(sub, "list"), del = !strcmp(sub, "delete");
    if (!list && !del) return kr_cli_usage_error(CMD, "unknown subcommand '%s'", sub);
    if (symbol && kr_store_check_symbol(symbol, &err) != KR_OK)
        return kr_cli_usage_error(CMD, "--%s", err.message);
    if (list && (interval || from || to))
        return kr_cli_usage_error(CMD, "%s", "list takes only --symbol, --json and --db");
    if (del && json) return kr_cli_usage_error(CMD, "%s", "--json goes with list, not delete");
    if (del) {
        if (!symbol) return kr_cli_usage_error(CMD, "%s", "delete: --symbol is required");
        if (!interval) return kr_cli_usage_error(CMD, "%s", "delete: --interval is required");
        if (kr_store_check_interval(interval, &err) != KR_OK)
            return kr_cli_usage_error(CMD, "--%s", err.message);
    }
    char path[PATH_MAX];
    if (kr_store_resolve_path(db_flag, path, sizeof path, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    return list ? run_list(path, symbol, json) : run_delete(path, symbol, interval, from, to);
}
