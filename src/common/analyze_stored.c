/*
 * common/analyze_stored — the stored series of an analysis (see analyze_stored.h).
 */
#include "common/analyze_stored.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "common/limits.h"

kr_status kr_stored_all(const kr_store_entry *list, int64_t n_list, kr_stored_series *out, int cap,
                        int *n, kr_error *err) {
    if (n_list > cap) {
        *n = n_list > 0x7fffffff ? 0x7fffffff : (int)n_list;
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%lld series are stored, more than the %d one analysis takes",
                            (long long)n_list, cap);
    }
    *n = (int)n_list;
    for (int i = 0; i < *n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].asked = list[i].symbol;
        out[i].want = list[i].interval;
    }
    return KR_OK;
}

void kr_stored_pick(const kr_store_entry *list, int64_t n_list, kr_stored_series *s) {
    s->series = NULL;
    s->n_series = 0;
    s->entry = NULL;
    s->candles = NULL;
    snprintf(s->symbol, sizeof s->symbol, "%s", s->asked);
    s->interval[0] = s->market[0] = '\0';
    /* The symbol's series stand together in kr_store_list's order (by symbol, the most
     * recently updated first). */
    for (int64_t i = 0; i < n_list; i++)
        if (!strcasecmp(list[i].symbol, s->asked)) {
            if (!s->series) s->series = &list[i];
            s->n_series++;
        } else if (s->series) {
            break;
        }
    if (!s->series) {
        s->fault = KR_STORED_UNKNOWN_SYMBOL;
        return;
    }
    snprintf(s->symbol, sizeof s->symbol, "%s", s->series->symbol);
    snprintf(s->market, sizeof s->market, "%s", s->series->market);
    const int want = s->want && s->want[0];
    s->entry = want ? kr_store_find_entry(s->series, s->n_series, NULL, s->want) : s->series;
    if (!s->entry) {
        s->fault = KR_STORED_NO_INTERVAL;
        return;
    }
    snprintf(s->interval, sizeof s->interval, "%s", s->entry->interval);
    s->fault = KR_STORED_OK;
}

kr_stored_fault kr_stored_read(kr_store *store, int64_t min_rows, kr_stored_series *s) {
    if (s->fault != KR_STORED_OK) return s->fault;
    memset(&s->read_error, 0, sizeof s->read_error);
    if (kr_store_read(store, s->symbol, s->interval, KR_LIMIT_ANALYZE_ROWS, &s->candles,
                      &s->read_error) != KR_OK)
        return s->fault = KR_STORED_READ_FAILED;
    s->rows = s->candles->n;
    s->need = min_rows;
    if (s->rows < min_rows) {
        kr_candles_free(s->candles);
        s->candles = NULL;
        return s->fault = KR_STORED_TOO_FEW_ROWS;
    }
    return KR_STORED_OK;
}

kr_analyze_item kr_stored_item(const kr_stored_series *s, const char *market, const char *error) {
    kr_analyze_item it = { 0 };
    it.symbol = s->entry ? s->symbol : s->asked;
    it.interval = s->entry ? s->interval : s->want ? s->want : "";
    if (s->fault != KR_STORED_OK) {
        it.error = error;
        return it;
    }
    it.candles = s->candles;
    it.market = market && market[0] ? market : s->market[0] ? s->market : NULL;
    return it;
}

int kr_stored_duplicate(const kr_stored_series *s, int n, int *first, int *second) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (s[i].entry && s[i].entry == s[j].entry) {
                *first = j;
                *second = i;
                return 1;
            }
    return 0;
}

void kr_stored_series_free(kr_stored_series *s, int n) {
    for (int i = 0; i < n; i++) {
        kr_candles_free(s[i].candles);
        s[i].candles = NULL;
    }
}
