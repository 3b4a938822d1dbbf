/* cli/store_pick — see store_pick.h. */
#include "cli/store_pick.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

void kr_cli_stored_list(const kr_store_entry *e, int64_t n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int64_t i = 0; i < n && len + 64 < cap; i++) {
        int same = i > 0 && !strcmp(e[i].symbol, e[i - 1].symbol);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s%s",
                                same ? ", "
                                : i  ? "), "
                                     : "",
                                same ? "" : e[i].symbol, same ? "" : " (");
        len += (size_t)snprintf(buf + len, cap - len, "%s", e[i].interval);
    }
    if (n > 0 && len + 2 < cap) snprintf(buf + len, cap - len, ")");
    if (n == 0) snprintf(buf, cap, "none");
}

int kr_cli_pick_interval(const char *sym, const char *want, const char *db,
                         const kr_store_entry *all, int64_t n_all, const kr_store_entry **out,
                         char *msg, size_t cap) {
    char list[1400];
    const kr_store_entry *first = NULL;
    for (int64_t i = 0; i < n_all && !first; i++)
        if (!strcasecmp(all[i].symbol, sym)) first = &all[i]; /* most recently updated */
    const kr_store_entry *hit = want ? kr_store_find_entry(all, n_all, sym, want) : NULL;
    if (hit) {
        *out = hit;
        return 0;
    }
    char suggested[40];
    if (!first && kr_symbol_suggest_exchange(sym, suggested, sizeof suggested)) {
        snprintf(msg, cap,
                 "unknown symbol '%s' in %s: an A-share code names its exchange, did you mean "
                 "'%s'? (6xxxxx: .SH, 0/3xxxxx: .SZ, 8/4xxxxx: .BJ)",
                 sym, db, suggested);
        return 1;
    }
    if (!first) {
        kr_cli_stored_list(all, n_all, list, sizeof list);
        snprintf(msg, cap, "unknown symbol '%s' in %s; stored: %s (add one with 'kronos ingest')",
                 sym, db, list);
        return 1;
    }
    if (want) {
        int64_t m = 0;
        for (int64_t i = 0; i < n_all; i++) m += !strcasecmp(all[i].symbol, sym);
        kr_cli_stored_list(first, m, list, sizeof list);
        snprintf(msg, cap, "%s has no '%s' candles in %s; stored: %s", first->symbol, want, db,
                 list);
        return 1;
    }
    *out = first;
    return 0;
}
