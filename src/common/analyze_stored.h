/*
 * common/analyze_stored — the stored series an analysis reads, the same for `kronos analyze`
 * and POST /v1/analyze[/batch]: which series "all" means, which interval of a symbol is used
 * when none is named (the most recently updated), the candles read (the most recent
 * KR_LIMIT_ANALYZE_ROWS), and whether they are enough for the analysis (kr_analyze_min_rows).
 * What went wrong with a symbol comes back as a fault with its figures, never as text: each
 * front end words it for its user (a flag, a JSON field) and decides whether it fails the
 * request (one symbol) or becomes a failure of the report set (a batch).
 */
#ifndef KR_COMMON_ANALYZE_STORED_H
#define KR_COMMON_ANALYZE_STORED_H

#include <stdint.h>

#include "kronos.h"
#include "kronos/analyst.h"
#include "kronos/store.h"

typedef enum kr_stored_fault {
    KR_STORED_OK = 0,
    KR_STORED_UNKNOWN_SYMBOL, /* nothing is stored under the symbol */
    KR_STORED_NO_INTERVAL, /* the symbol is stored, not at the interval asked */
    KR_STORED_READ_FAILED, /* the store failed reading it: read_error */
    KR_STORED_TOO_FEW_ROWS /* fewer rows than the analysis needs: rows < need */
} kr_stored_fault;

/* One symbol of an analysis and what was found for it. */
typedef struct kr_stored_series {
    const char *asked; /* the symbol as the request named it (borrowed) */
    const char *want; /* the interval it asked for; NULL or "": the most recently updated */
    /* found (when the symbol is stored) */
    char symbol[KR_STORE_NAME_MAX + 1]; /* the stored spelling ("aapl" is stored as AAPL) */
    char interval[KR_STORE_NAME_MAX + 1]; /* the stored spelling of the interval used */
    char market[KR_STORE_MARKET_MAX]; /* the symbol's market, "" when none */
    const kr_store_entry *series; /* the symbol's stored series (into the list), the most
                                     recently updated first; NULL when none */
    int64_t n_series;
    const kr_store_entry *entry; /* the one used; NULL when none fits */
    /* outcome */
    kr_stored_fault fault;
    kr_candles *candles; /* owned when fault is KR_STORED_OK (kr_stored_series_free) */
    kr_error read_error; /* KR_STORED_READ_FAILED: the store's error */
    int64_t rows, need; /* KR_STORED_TOO_FEW_ROWS: rows stored, rows needed */
} kr_stored_series;

/* Every stored series of list[0 .. n_list) (kr_store_list's order) as a symbol of the analysis
 * ("all"): out[i].asked / .want borrow the list. More than cap series is KR_ERR_INVALID_ARG
 * with *n set to the count (a request is refused, never cut to the first ones); none is KR_OK
 * with *n 0. */
KR_PRIVATE kr_status kr_stored_all(const kr_store_entry *list, int64_t n_list,
                                   kr_stored_series *out, int cap, int *n, kr_error *err);

/* Finds s->asked at s->want in list[0 .. n_list) (every stored series, kr_store_list's order):
 * fills the found fields, or sets KR_STORED_UNKNOWN_SYMBOL / KR_STORED_NO_INTERVAL. */
KR_PRIVATE void kr_stored_pick(const kr_store_entry *list, int64_t n_list, kr_stored_series *s);

/* For a picked series (fault KR_STORED_OK): reads its most recent KR_LIMIT_ANALYZE_ROWS candles
 * and checks there are at least min_rows. Returns the fault. */
KR_PRIVATE kr_stored_fault kr_stored_read(kr_store *store, int64_t min_rows, kr_stored_series *s);

/* The analyst's item for a series: its candles when it is usable, else error (the front end's
 * words for the fault). market overrides the symbol's own when non-empty. Borrows s. */
KR_PRIVATE kr_analyze_item kr_stored_item(const kr_stored_series *s, const char *market,
                                          const char *error);

/* Two series of out[0 .. n) that resolved to the same stored series ("AAPL" and "AAPL 1d"):
 * 1 with *first < *second set, else 0. */
KR_PRIVATE int kr_stored_duplicate(const kr_stored_series *s, int n, int *first, int *second);

/* Frees the candles of s[0 .. n). */
KR_PRIVATE void kr_stored_series_free(kr_stored_series *s, int n);

#endif
