/*
 * cli/store_pick — which stored series a symbol on the command line names (analyze,
 * backtest): the interval asked for, else the symbol's most recently updated one; unknown
 * symbols and intervals get a message listing what is stored.
 */
#ifndef KR_CLI_STORE_PICK_H
#define KR_CLI_STORE_PICK_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/store.h"

/* "AAPL (1d), MSFT (1d, 1h), ..." of e[n] into buf ("none" when n is 0). */
void kr_cli_stored_list(const kr_store_entry *e, int64_t n, char *buf, size_t cap);

/* The entry of all[n_all] (kr_store_list's order: by symbol, most recently updated first) for
 * sym and the interval `want` (NULL: the symbol's most recently updated series). Returns 0
 * with *out set, or 1 with msg saying what is stored (db: the database as messages show it). */
int kr_cli_pick_interval(const char *sym, const char *want, const char *db,
                         const kr_store_entry *all, int64_t n_all, const kr_store_entry **out,
                         char *msg, size_t cap);

#endif
