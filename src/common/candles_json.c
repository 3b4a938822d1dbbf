/*
 * common/candles_json — candles from JSON bodies and files (see candles_json.h): the layouts are
 * mapped to the same per-row cells, and each row is checked by the CSV reader's own rules
 * (kr_candle_row_check), then the timestamps' order.
 */
#include "common/candles_json.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "common/json_body.h"
#include "series/candles.h"

/* A timestamp cell: a string in the CSV formats or an epoch number. Numbers go through the
 * same parser as CSV text (9-10 digits: seconds, 12-13: milliseconds, 8: YYYYMMDD) so the two
 * inputs can never disagree about what a stamp means; microseconds and nanoseconds, past what
 * a JSON number holds exactly, come as strings. */
kr_status kr_api_timestamp(const cJSON *v, const char *field, int64_t *ts, int *has_time,
                           kr_api_error *err) {
    char buf[64], ex[48];
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        int rc = kr_parse_timestamp(s, strlen(s), ts, has_time);
        if (rc == 0) return KR_OK;
        if (rc == KR_TS_OUT_OF_RANGE)
            return kr_api_error_set(err, 400, field, "'%s' is outside the years %d-%d",
                                    kr_json_sanitize(s, ex, sizeof ex), KR_CANDLE_YEAR_MIN,
                                    KR_CANDLE_YEAR_MAX);
        char why[200];
        kr_timestamp_refusal(s, strlen(s), why, sizeof why);
        return kr_api_error_set(err, 400, field, "cannot parse '%s' as a timestamp (%s)",
                                kr_json_sanitize(s, ex, sizeof ex), why);
    }
    if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        /* A number with a fraction is epoch seconds when its whole part has 9-10 digits (the
         * text's rule; JSON parsers keep only the value, so an exponent is judged by it), the
         * fraction truncated as a string's fractional seconds are. */
        if (isfinite(x) && x != floor(x) && x >= 1e8 && x < 1e10) x = floor(x);
        if (isfinite(x) && x == floor(x) && x >= 0 && x < 1e13) {
            snprintf(buf, sizeof buf, "%.0f", x);
            int rc = kr_parse_timestamp(buf, strlen(buf), ts, has_time);
            if (rc == 0) return KR_OK;
            if (rc == KR_TS_OUT_OF_RANGE)
                return kr_api_error_set(err, 400, field, "%.10g is outside the years %d-%d", x,
                                        KR_CANDLE_YEAR_MIN, KR_CANDLE_YEAR_MAX);
        }
        /* %.17g: "%.10g" would show 1704067200.5 as a valid-looking 1704067200. */
        return kr_api_error_set(err, 400, field,
                                "%.17g is not an epoch timestamp (seconds of 9-10 digits, a "
                                "fraction allowed; whole milliseconds of 12-13; micro- and "
                                "nanoseconds as strings) or a YYYYMMDD date",
                                x);
    }
    return kr_api_error_set(err, 400, field, "must be a timestamp string or epoch number, got %s",
                            kr_json_type_name(v));
}

/* ------------------------------------------------------------------ candles */

enum { ROLE_TS = KR_N_FEATURES, N_ROLES };

static const char *const k_role_names[N_ROLES] = { "open",   "high",   "low",       "close",
                                                   "volume", "amount", "timestamps" };
static const char *const k_ts_aliases[] = { "timestamps", "timestamp", "datetime", "date", "time" };

/* Role of a column/key name, or -1 when it has none (ignored, as the CSV reader does). Case
 * does not matter, as in CSV headers: pandas frames say "Date", "Open", "Volume". */
static int role_of(const char *name) {
    for (size_t k = 0; k < sizeof k_ts_aliases / sizeof k_ts_aliases[0]; k++)
        if (!strcasecmp(name, k_ts_aliases[k])) return ROLE_TS;
    for (int k = 0; k < KR_N_FEATURES; k++)
        if (!strcasecmp(name, k_role_names[k])) return k;
    return -1;
}

typedef enum layout { LAYOUT_ROWS, LAYOUT_COLUMNS } layout;

/* The cells of one row, whatever the layout, and how to name them in errors. */
typedef struct row_cells {
    const cJSON *cell[N_ROLES];
    const char *name[N_ROLES]; /* key/column name as the client spelled it */
    layout lay;
    int64_t row;
} row_cells;

static void field_name(const row_cells *rc, int role, char *out, size_t cap) {
    const char *nm = rc->name[role] ? rc->name[role] : k_role_names[role];
    if (rc->lay == LAYOUT_ROWS)
        snprintf(out, cap, "candles[%lld].%s", (long long)rc->row, nm);
    else
        snprintf(out, cap, "candles.%s[%lld]", nm, (long long)rc->row);
}

/* Growable table being built. */
typedef struct table {
    int64_t n, cap;
    int64_t *ts;
    double *values;
    int has_volume, has_amount, any_time;
    char amount_dropped[64]; /* kr_candles.amount_dropped */
} table;

static int table_push(table *t) {
    if (t->n < t->cap) return 0;
    int64_t cap = t->cap ? t->cap * 2 : 256;
    int64_t *nts = realloc(t->ts, (size_t)cap * sizeof *nts);
    if (!nts) return -1;
    t->ts = nts;
    double *nv = realloc(t->values, (size_t)cap * KR_N_FEATURES * sizeof *nv);
    if (!nv) return -1;
    t->values = nv;
    t->cap = cap;
    return 0;
}

/* Validates one row and appends it: the candle rules of series/candles.h (kr_candle_value_check,
 * kr_candle_row_finish, which the CSV reader applies too) plus the strictly-increasing
 * timestamp check. */
static kr_status add_row(table *t, const row_cells *rc, kr_api_error *err) {
    char f[160], f2[160], a[32], b[32];
    if (table_push(t) != 0) return kr_api_error_set(err, 400, "candles", "out of memory");
    int64_t ts = 0;
    int has_time = 0;
    field_name(rc, ROLE_TS, f, sizeof f);
    if (!rc->cell[ROLE_TS]) return kr_api_error_set(err, 400, f, "required");
    kr_status st = kr_api_timestamp(rc->cell[ROLE_TS], f, &ts, &has_time, err);
    if (st != KR_OK) return st;
    if (t->n > 0 && ts <= t->ts[t->n - 1])
        return kr_api_error_set(err, 400, f,
                                "%s %s the previous row's %s; timestamps must be strictly "
                                "increasing",
                                kr_format_timestamp(ts, 0, a, sizeof a),
                                ts == t->ts[t->n - 1] ? "repeats" : "is before",
                                kr_format_timestamp(t->ts[t->n - 1], 0, b, sizeof b));
    double *v = t->values + t->n * KR_N_FEATURES;
    for (int k = 0; k < KR_N_FEATURES; k++) {
        v[k] = 0.0;
        field_name(rc, k, f, sizeof f);
        const cJSON *c = rc->cell[k];
        int wanted =
            k <= KR_CLOSE || (k == KR_VOLUME && t->has_volume) || (k == KR_AMOUNT && t->has_amount);
        if (!c) {
            if (wanted) return kr_api_error_set(err, 400, f, "required");
            continue;
        }
        if (!wanted)
            return kr_api_error_set(err, 400, f,
                                    "the first row has no %s; every row needs the same fields",
                                    k_role_names[k]);
        if (!cJSON_IsNumber(c))
            return kr_api_error_set(err, 400, f, "must be a number, got %s", kr_json_type_name(c));
        if (!isfinite(c->valuedouble)) return kr_api_error_set(err, 400, f, "is not finite");
        v[k] = c->valuedouble;
        switch (kr_candle_value_check(k, v[k])) {
        case KR_ROW_OUT_OF_RANGE:
            return kr_api_error_set(err, 400, f,
                                    "%.10g is out of range (the model reads float32, max %.3g)",
                                    v[k], (double)FLT_MAX);
        case KR_ROW_NOT_POSITIVE:
        case KR_ROW_NEGATIVE:
            return kr_api_error_set(err, 400, f, "%s must be %s, got %.10g", k_role_names[k],
                                    k <= KR_CLOSE ? "positive (in float32, as the model reads it)"
                                                  : "non-negative",
                                    v[k]);
        default: break;
        }
    }
    switch (kr_candle_row_finish(v, t->has_volume, t->has_amount)) {
    case KR_ROW_HIGH_BELOW_LOW:
        field_name(rc, KR_HIGH, f, sizeof f);
        return kr_api_error_set(err, 400, f, "%.10g is below low %.10g", v[KR_HIGH], v[KR_LOW]);
    case KR_ROW_AMOUNT_OUT_OF_RANGE:
        field_name(rc, KR_VOLUME, f2, sizeof f2);
        return kr_api_error_set(err, 400, f2,
                                "volume x mean price = %.3g is out of range for the derived "
                                "amount (the model reads float32)",
                                v[KR_AMOUNT]);
    default: break;
    }
    t->any_time |= has_time;
    t->ts[t->n++] = ts;
    return KR_OK;
}

/* Maps a list of names (the "columns" array or one layout's keys) to roles; refuses two names
 * for one role and requires timestamps, open, high, low, close. col_role[i] = role or -1. */
static kr_status map_names(const char *const *names, int n, const char *what, const char *owner,
                           int *col_role, const char **role_name, kr_api_error *err) {
    int seen[N_ROLES];
    for (int k = 0; k < N_ROLES; k++) seen[k] = -1, role_name[k] = NULL;
    char f[160], ex[64];
    for (int i = 0; i < n; i++) {
        col_role[i] = role_of(names[i]);
        if (col_role[i] < 0) continue;
        if (seen[col_role[i]] >= 0) {
            snprintf(f, sizeof f, "%s%s", what, kr_json_sanitize(names[i], ex, sizeof ex));
            return kr_api_error_set(err, 400, f, "names the same column as '%s'",
                                    kr_json_sanitize(names[seen[col_role[i]]], ex, sizeof ex));
        }
        seen[col_role[i]] = i;
        role_name[col_role[i]] = names[i];
    }
    const int required[] = { ROLE_TS, KR_OPEN, KR_HIGH, KR_LOW, KR_CLOSE };
    for (int k = 0; k < 5; k++)
        if (seen[required[k]] < 0)
            return kr_api_error_set(
                err, 400, owner, "missing the '%s' column%s", k_role_names[required[k]],
                required[k] == ROLE_TS ? " (also accepted: timestamp, datetime, date, time)" : "");
    return KR_OK;
}

#define MAX_COLUMNS 64

/* [[ts, o, h, l, c, v?, a?], ...], optionally reordered by "columns". */
static kr_status parse_array_rows(const cJSON *arr, const cJSON *columns, table *t,
                                  kr_api_error *err) {
    const char *names[MAX_COLUMNS];
    int col_role[MAX_COLUMNS], ncols;
    const char *role_name[N_ROLES];
    char f[160];
    if (columns) {
        if (!cJSON_IsArray(columns))
            return kr_api_error_set(err, 400, "columns", "must be an array of column names");
        ncols = cJSON_GetArraySize(columns);
        if (ncols < 5 || ncols > MAX_COLUMNS)
            return kr_api_error_set(err, 400, "columns", "must name 5..%d columns, got %d",
                                    MAX_COLUMNS, ncols);
        int i = 0;
        for (const cJSON *c = columns->child; c; c = c->next, i++) {
            if (!cJSON_IsString(c)) {
                snprintf(f, sizeof f, "columns[%d]", i);
                return kr_api_error_set(err, 400, f, "must be a string, got %s",
                                        kr_json_type_name(c));
            }
            names[i] = c->valuestring;
        }
        kr_status st = map_names(names, ncols, "columns.", "columns", col_role, role_name, err);
        if (st != KR_OK) return st;
    } else {
        /* Default order: the reference's column order. */
        ncols = cJSON_GetArraySize(arr->child);
        if (ncols < 5 || ncols > 7)
            return kr_api_error_set(err, 400, "candles[0]",
                                    "has %d values; expected [timestamps, open, high, low, close"
                                    "(, volume(, amount))] or give \"columns\"",
                                    ncols);
        for (int i = 0; i < ncols; i++) {
            names[i] = i == 0 ? "timestamps" : k_role_names[i - 1];
            col_role[i] = i == 0 ? ROLE_TS : i - 1;
        }
        for (int k = 0; k < N_ROLES; k++) role_name[k] = NULL;
    }
    t->has_volume = 0;
    for (int i = 0; i < ncols; i++) t->has_volume |= col_role[i] == KR_VOLUME;
    t->has_amount = 0;
    for (int i = 0; t->has_volume && i < ncols; i++) t->has_amount |= col_role[i] == KR_AMOUNT;
    for (int i = 0; !t->has_volume && i < ncols; i++)
        if (col_role[i] == KR_AMOUNT)
            snprintf(t->amount_dropped, sizeof t->amount_dropped, "%s", names[i]);

    row_cells rc;
    memset(&rc, 0, sizeof rc);
    rc.lay = LAYOUT_ROWS;
    for (int k = 0; k < N_ROLES; k++) rc.name[k] = role_name[k];
    int64_t r = 0;
    for (const cJSON *row = arr->child; row; row = row->next, r++) {
        snprintf(f, sizeof f, "candles[%lld]", (long long)r);
        if (!cJSON_IsArray(row))
            return kr_api_error_set(err, 400, f, "must be an array like candles[0], got %s",
                                    kr_json_type_name(row));
        int n = cJSON_GetArraySize(row);
        if (n != ncols)
            return kr_api_error_set(err, 400, f, "has %d values, expected %d%s", n, ncols,
                                    columns ? " (one per \"columns\" entry)" : " (as candles[0])");
        for (int k = 0; k < N_ROLES; k++) rc.cell[k] = NULL;
        int i = 0;
        for (const cJSON *c = row->child; c; c = c->next, i++)
            if (col_role[i] >= 0 && !(col_role[i] == KR_AMOUNT && !t->has_volume))
                rc.cell[col_role[i]] = c;
        rc.row = r;
        kr_status st = add_row(t, &rc, err);
        if (st != KR_OK) return st;
    }
    return KR_OK;
}

/* [{"timestamps": ..., "open": ..., ...}, ...]; the first row decides whether volume and
 * amount are present, and every row must agree. Unknown keys are ignored (like extra CSV
 * columns, e.g. a "symbol"). */
static kr_status parse_object_rows(const cJSON *arr, table *t, kr_api_error *err) {
    char f[160], ex[64];
    row_cells rc;
    memset(&rc, 0, sizeof rc);
    rc.lay = LAYOUT_ROWS;
    int64_t r = 0;
    for (const cJSON *row = arr->child; row; row = row->next, r++) {
        snprintf(f, sizeof f, "candles[%lld]", (long long)r);
        if (!cJSON_IsObject(row))
            return kr_api_error_set(err, 400, f, "must be an object like candles[0], got %s",
                                    kr_json_type_name(row));
        for (int k = 0; k < N_ROLES; k++) rc.cell[k] = NULL, rc.name[k] = NULL;
        for (const cJSON *c = row->child; c; c = c->next) {
            int role = role_of(c->string);
            if (role < 0) continue;
            if (rc.cell[role]) {
                snprintf(f, sizeof f, "candles[%lld].%s", (long long)r,
                         kr_json_sanitize(c->string, ex, sizeof ex));
                return kr_api_error_set(err, 400, f, "names the same field as '%s'", rc.name[role]);
            }
            rc.cell[role] = c;
            rc.name[role] = c->string;
        }
        if (r == 0) {
            t->has_volume = rc.cell[KR_VOLUME] != NULL;
            t->has_amount = t->has_volume && rc.cell[KR_AMOUNT] != NULL;
            if (!t->has_volume && rc.cell[KR_AMOUNT])
                snprintf(t->amount_dropped, sizeof t->amount_dropped, "%s", rc.name[KR_AMOUNT]);
        }
        /* Without volume the reference ignores amount too (both become 0). */
        if (!t->has_volume) rc.cell[KR_AMOUNT] = NULL;
        rc.row = r;
        kr_status st = add_row(t, &rc, err);
        if (st != KR_OK) return st;
    }
    return KR_OK;
}

/* {"timestamps": [...], "open": [...], ...}: pandas' "list" orient. */
static kr_status parse_columns(const cJSON *obj, table *t, kr_api_error *err) {
    const char *names[MAX_COLUMNS] = { 0 };
    const cJSON *cols[MAX_COLUMNS];
    int col_role[MAX_COLUMNS], n = 0;
    const char *role_name[N_ROLES];
    char f[160], ex[64];
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (n == MAX_COLUMNS)
            return kr_api_error_set(err, 400, "candles", "more than %d columns", MAX_COLUMNS);
        names[n] = c->string;
        cols[n++] = c;
    }
    kr_status st = map_names(names, n, "candles.", "candles", col_role, role_name, err);
    if (st != KR_OK) return st;
    const cJSON *by_role[N_ROLES] = { 0 };
    for (int i = 0; i < n; i++)
        if (col_role[i] >= 0) by_role[col_role[i]] = cols[i];
    int rows = -1;
    for (int k = 0; k < N_ROLES; k++) {
        if (!by_role[k]) continue;
        snprintf(f, sizeof f, "candles.%s", kr_json_sanitize(role_name[k], ex, sizeof ex));
        if (!cJSON_IsArray(by_role[k]))
            return kr_api_error_set(err, 400, f, "must be an array, got %s",
                                    kr_json_type_name(by_role[k]));
        int m = cJSON_GetArraySize(by_role[k]);
        if (k == ROLE_TS || rows < 0) {
            if (rows >= 0 && m != rows)
                return kr_api_error_set(err, 400, f, "has %d values, the other columns %d", m,
                                        rows);
            rows = m;
        } else if (m != rows) {
            return kr_api_error_set(err, 400, f, "has %d values, the other columns %d", m, rows);
        }
    }
    t->has_volume = by_role[KR_VOLUME] != NULL;
    t->has_amount = t->has_volume && by_role[KR_AMOUNT] != NULL;
    if (!t->has_volume && by_role[KR_AMOUNT])
        snprintf(t->amount_dropped, sizeof t->amount_dropped, "%s", by_role[KR_AMOUNT]->string);
    if (!t->has_volume) by_role[KR_AMOUNT] = NULL;

    row_cells rc;
    memset(&rc, 0, sizeof rc);
    rc.lay = LAYOUT_COLUMNS;
    const cJSON *it[N_ROLES];
    for (int k = 0; k < N_ROLES; k++) {
        rc.name[k] = role_name[k];
        it[k] = by_role[k] ? by_role[k]->child : NULL;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int k = 0; k < N_ROLES; k++) {
            rc.cell[k] = it[k];
            if (it[k]) it[k] = it[k]->next;
        }
        rc.row = r;
        st = add_row(t, &rc, err);
        if (st != KR_OK) return st;
    }
    return KR_OK;
}

/* pandas DataFrame.to_json layouts that are not already rows or column lists become rows of
 * arrays plus "columns" (the index, when no column holds the timestamps, is the timestamps):
 *   orient='split'    {"columns": [...], "index": [...], "data": [[...], ...]}
 *   orient='columns'  {"Open": {"<index>": 1.0, ...}, ...}   (to_json's default)
 *   orient='index'    {"<index>": {"Open": 1.0, ...}, ...}
 * The rows and columns are counted against the limits before anything is built, and every
 * column (row) must hold a value for every index key (column) in the first one's order, as
 * to_json writes them (null for NaN): the rebuilt table is then no larger than the body, and
 * built in one pass. (Rows x columns built first, with missing cells made up as null and each
 * found by a linear search, let a 78 KB body take 1.3 GB and a 2 MB one a minute of CPU.)
 * Returns 1 with *rows and *cols set (caller deletes both), 0 when v is none of these, or a
 * negative status with err set. */
static int pandas_layout(const cJSON *v, const kr_api_limits *lim, const char *rows_note,
                         cJSON **rows, cJSON **cols, kr_api_error *err) {
    *rows = *cols = NULL;
    if (!cJSON_IsObject(v) || !v->child) return 0;
    const cJSON *scol = cJSON_GetObjectItemCaseSensitive(v, "columns");
    const cJSON *sidx = cJSON_GetObjectItemCaseSensitive(v, "index");
    const cJSON *sdata = cJSON_GetObjectItemCaseSensitive(v, "data");
    int split = scol && sdata;
    int by_col = !split && cJSON_IsObject(v->child) && role_of(v->child->string) >= 0;
    int by_idx = !split && !by_col && cJSON_IsObject(v->child);
    if (!split && !by_col && !by_idx) return 0;
    if (split) {
        if (!cJSON_IsArray(scol) || !cJSON_IsArray(sdata) || (sidx && !cJSON_IsArray(sidx)))
            return kr_api_error_set(err, 400, "candles",
                                    "a pandas 'split' frame needs \"columns\" and \"data\" arrays "
                                    "(and an \"index\" array)");
        if (sidx && cJSON_GetArraySize(sidx) != cJSON_GetArraySize(sdata)) {
            int ni = cJSON_GetArraySize(sidx), nd = cJSON_GetArraySize(sdata);
            return kr_api_error_set(err, 400, "candles",
                                    "a pandas 'split' frame's \"index\" has %d entries but its "
                                    "\"data\" %d rows",
                                    ni, nd);
        }
        const int nc = cJSON_GetArraySize(scol) + (sidx ? 1 : 0);
        if (nc > MAX_COLUMNS)
            return kr_api_error_set(err, 400, "candles",
                                    "a pandas frame of %d columns (with its index): at most %d", nc,
                                    MAX_COLUMNS);
        const int64_t nr = cJSON_GetArraySize(sdata);
        if (nr > lim->max_rows)
            return kr_api_error_set(err, 400, "candles", "needs 2..%lld rows%s, got %lld",
                                    (long long)lim->max_rows, rows_note, (long long)nr);
    }
    const cJSON *first = v->child;
    const cJSON *names = by_col ? v : first, *keys = by_col ? first : v;
    if (!split) {
        const int nc = cJSON_GetArraySize(names) + 1;
        if (nc > MAX_COLUMNS)
            return kr_api_error_set(err, 400, "candles",
                                    "a pandas frame of %d columns (with its index): at most %d", nc,
                                    MAX_COLUMNS);
        const int64_t nr = cJSON_GetArraySize(keys);
        if (nr > lim->max_rows)
            return kr_api_error_set(err, 400, "candles", "needs 2..%lld rows%s, got %lld",
                                    (long long)lim->max_rows, rows_note, (long long)nr);
    }
    cJSON *r = cJSON_CreateArray(), *c = cJSON_CreateArray();
    if (!r || !c) goto nomem;
    if (split) {
        int has_ts = 0;
        for (const cJSON *n = scol->child; n; n = n->next)
            has_ts |= cJSON_IsString(n) && role_of(n->valuestring) == ROLE_TS;
        const int use_index = !has_ts && sidx;
        if (use_index) cJSON_AddItemToArray(c, cJSON_CreateString("timestamps"));
        for (const cJSON *n = scol->child; n; n = n->next)
            cJSON_AddItemToArray(c, cJSON_Duplicate(n, 1));
        const cJSON *ix = sidx ? sidx->child : NULL;
        for (const cJSON *row = sdata->child; row; row = row->next, ix = ix ? ix->next : NULL) {
            cJSON *nr = cJSON_Duplicate(row, 1);
            if (!nr) goto nomem;
            if (use_index && cJSON_IsArray(nr)) {
                cJSON *t = ix ? cJSON_Duplicate(ix, 1) : cJSON_CreateNull();
                if (!t) goto nomem;
                cJSON_InsertItemInArray(nr, 0, t);
            }
            cJSON_AddItemToArray(r, nr);
        }
    } else {
        /* Columns of {index: value} (or rows of {column: value}): one row per index key, in
         * the order of the first column (row). */
        int has_ts = 0;
        if (by_col)
            for (const cJSON *col = v->child; col; col = col->next)
                has_ts |= role_of(col->string) == ROLE_TS;
        else
            for (const cJSON *f = first->child; f; f = f->next)
                has_ts |= role_of(f->string) == ROLE_TS;
        if (!has_ts) cJSON_AddItemToArray(c, cJSON_CreateString("timestamps"));
        for (const cJSON *n = names->child; n; n = n->next)
            cJSON_AddItemToArray(c, cJSON_CreateString(n->string));
        /* by_col: where each column's next value is; by_idx: the row's own values walk along. */
        const cJSON *next[MAX_COLUMNS];
        int j = 0;
        if (by_col)
            for (const cJSON *n = names->child; n; n = n->next, j++) {
                if (!cJSON_IsObject(n)) {
                    cJSON_Delete(r);
                    cJSON_Delete(c);
                    return kr_api_error_set(err, 400, "candles",
                                            "column '%.64s' must be an object of {index: value}, "
                                            "got %s",
                                            n->string, kr_json_type_name(n));
                }
                next[j] = n->child;
            }
        for (const cJSON *k = keys->child; k; k = k->next) {
            cJSON *nr = cJSON_CreateArray();
            if (!nr) goto nomem;
            cJSON_AddItemToArray(r, nr);
            if (!has_ts) cJSON_AddItemToArray(nr, cJSON_CreateString(k->string));
            if (!by_col && !cJSON_IsObject(k)) {
                cJSON_Delete(r);
                cJSON_Delete(c);
                return kr_api_error_set(err, 400, "candles",
                                        "row '%.64s' must be an object of {column: value}, got %s",
                                        k->string, kr_json_type_name(k));
            }
            const cJSON *own = by_col ? NULL : k->child;
            j = 0;
            for (const cJSON *n = names->child; n; n = n->next, j++) {
                const cJSON *cell = by_col ? next[j] : own;
                const char *want = by_col ? k->string : n->string;
                if (!cell || strcmp(cell->string, want) != 0) {
                    cJSON_Delete(r);
                    cJSON_Delete(c);
                    if (by_col)
                        return kr_api_error_set(
                            err, 400, "candles",
                            "column '%.64s' has no value for index key '%.64s' next, where "
                            "column '%.64s' has one: every column needs one per key, in the same "
                            "order (null for none), as DataFrame.to_json writes them",
                            n->string, want, first->string);
                    return kr_api_error_set(
                        err, 400, "candles",
                        "row '%.64s' has no value for column '%.64s' next, where the first row "
                        "has one: every row needs one per column, in the same order (null for "
                        "none), as DataFrame.to_json writes them",
                        k->string, want);
                }
                if (by_col)
                    next[j] = cell->next;
                else
                    own = cell->next;
                cJSON *dup = cJSON_Duplicate(cell, 1);
                if (!dup) goto nomem;
                cJSON_AddItemToArray(nr, dup);
            }
            if (!by_col && own) {
                cJSON_Delete(r);
                cJSON_Delete(c);
                return kr_api_error_set(err, 400, "candles",
                                        "row '%.64s' has a column '%.64s' the first row has not",
                                        k->string, own->string);
            }
        }
        j = 0;
        if (by_col)
            for (const cJSON *n = names->child; n; n = n->next, j++)
                if (next[j]) {
                    const char *extra = next[j]->string;
                    cJSON_Delete(r);
                    cJSON_Delete(c);
                    return kr_api_error_set(err, 400, "candles",
                                            "column '%.64s' has an index key '%.64s' column "
                                            "'%.64s' has not",
                                            n->string, extra, first->string);
                }
    }
    *rows = r;
    *cols = c;
    return 1;
nomem:
    cJSON_Delete(r);
    cJSON_Delete(c);
    return kr_api_error_set(err, 503, "candles", "out of memory");
}

static kr_status candles_from_value(const cJSON *v, const cJSON *columns, const kr_api_limits *lim,
                                    kr_candles **out, kr_api_error *err);

kr_status kr_api_candles_from_json(const cJSON *v, const cJSON *columns, const kr_api_limits *lim,
                                   kr_candles **out, kr_api_error *err) {
    cJSON *rows = NULL, *cols = NULL;
    kr_api_limits dl = kr_api_default_limits();
    if (!lim) lim = &dl;
    char rows_note[64] = "";
    if (lim->max_rows_key) snprintf(rows_note, sizeof rows_note, " (%s)", lim->max_rows_key);
    int pd = columns ? 0 : pandas_layout(v, lim, rows_note, &rows, &cols, err);
    if (pd < 0) return pd;
    if (pd == 0) return candles_from_value(v, columns, lim, out, err);
    kr_status st = candles_from_value(rows, cols, lim, out, err);
    cJSON_Delete(rows);
    cJSON_Delete(cols);
    return st;
}

static kr_status candles_from_value(const cJSON *v, const cJSON *columns, const kr_api_limits *lim,
                                    kr_candles **out, kr_api_error *err) {
    kr_api_limits dl = kr_api_default_limits();
    if (!lim) lim = &dl;
    *out = NULL;
    char rows_note[64] = "";
    if (lim->max_rows_key) snprintf(rows_note, sizeof rows_note, " (%s)", lim->max_rows_key);
    if (!v) return kr_api_error_set(err, 400, "candles", "required");
    if (columns && !cJSON_IsArray(v))
        return kr_api_error_set(err, 400, "columns",
                                "only applies when candles are rows of arrays");
    if (columns && v->child && !cJSON_IsArray(v->child))
        return kr_api_error_set(err, 400, "columns",
                                "only applies when candles are rows of arrays");
    if (cJSON_IsString(v)) {
        /* CSV text: the market layer's own reader, so its rules and messages apply as is. */
        kr_error e = { 0 };
        kr_candles *c = NULL;
        if (kr_candles_parse_csv(v->valuestring, strlen(v->valuestring), "candles", &c, &e) !=
            KR_OK) {
            kr_api_error_set(err, 400, NULL, "%s", e.message);
            snprintf(err->field, sizeof err->field, "candles");
            return KR_ERR_INVALID_ARG;
        }
        if (c->n < 2 || c->n > lim->max_rows) {
            int64_t n = c->n;
            kr_candles_free(c);
            return kr_api_error_set(err, 400, "candles", "needs 2..%lld rows%s, got %lld",
                                    (long long)lim->max_rows, rows_note, (long long)n);
        }
        *out = c;
        return KR_OK;
    }
    table t;
    memset(&t, 0, sizeof t);
    kr_status st;
    if (cJSON_IsArray(v)) {
        int64_t n = cJSON_GetArraySize(v);
        if (n < 2 || n > lim->max_rows)
            return kr_api_error_set(err, 400, "candles", "needs 2..%lld rows%s, got %lld",
                                    (long long)lim->max_rows, rows_note, (long long)n);
        if (cJSON_IsArray(v->child))
            st = parse_array_rows(v, columns, &t, err);
        else if (cJSON_IsObject(v->child))
            st = parse_object_rows(v, &t, err);
        else
            st = kr_api_error_set(err, 400, "candles[0]",
                                  "must be an array [timestamps, open, high, low, close, volume?, "
                                  "amount?] or an object, got %s",
                                  kr_json_type_name(v->child));
    } else if (cJSON_IsObject(v)) {
        st = parse_columns(v, &t, err);
        if (st == KR_OK && (t.n < 2 || t.n > lim->max_rows))
            st = kr_api_error_set(err, 400, "candles", "needs 2..%lld rows%s, got %lld",
                                  (long long)lim->max_rows, rows_note, (long long)t.n);
    } else {
        st = kr_api_error_set(err, 400, "candles",
                              "must be an array of rows, an object of columns or CSV text, got %s",
                              kr_json_type_name(v));
    }
    if (st == KR_OK) {
        kr_candles *c = calloc(1, sizeof *c);
        if (!c) {
            st = kr_api_error_set(err, 400, "candles", "out of memory");
        } else {
            c->n = t.n;
            c->timestamps = t.ts;
            c->values = t.values;
            c->has_volume = t.has_volume;
            c->has_amount = t.has_amount;
            memcpy(c->amount_dropped, t.amount_dropped, sizeof c->amount_dropped);
            c->date_only = !t.any_time;
            *out = c;
            return KR_OK;
        }
    }
    free(t.ts);
    free(t.values);
    return st;
}

/* ------------------------------------------------------------------ whole bodies and files */

/* Whether an object is the columns layout itself: one of its members is an array named as a
 * timestamp column is ({"timestamps": [...], "open": [...], ...}). Anything else keeps being
 * read as {"candles": ..., "columns": ...}, so a misspelt member is named as such. */
static int has_time_column(const cJSON *root) {
    static const char *const names[] = { "timestamps", "timestamp", "datetime", "date", "time" };
    for (const cJSON *it = root->child; it; it = it->next)
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (cJSON_IsArray(it) && it->string && !strcasecmp(it->string, names[i])) return 1;
    return 0;
}

kr_status kr_api_candles_parse(const char *body, size_t len, int csv, const kr_api_limits *lim,
                               kr_candles **out, kr_api_error *err) {
    memset(err, 0, sizeof *err);
    *out = NULL;
    kr_api_limits dl = kr_api_default_limits();
    if (!lim) lim = &dl;
    if (csv) {
        kr_error e = { 0 };
        if (!body || len == 0)
            return kr_api_error_set(err, 400, "body", "empty; expected CSV text");
        if (kr_candles_parse_csv(body, len, "body", out, &e) != KR_OK) {
            kr_api_error_set(err, 400, NULL, "%s", e.message); /* "body: line 18, ..." */
            snprintf(err->field, sizeof err->field, "body");
            return KR_ERR_INVALID_ARG;
        }
        /* The server counts lines before it parses (413); this holds for any caller. */
        if ((*out)->n > lim->max_rows) {
            const int64_t n = (*out)->n;
            kr_candles_free(*out);
            *out = NULL;
            return kr_api_error_set(
                err, 413, "body", "holds %lld candles, more than %lld%s%s%s", (long long)n,
                (long long)lim->max_rows, lim->max_rows_key ? " (" : "",
                lim->max_rows_key ? lim->max_rows_key : "", lim->max_rows_key ? ")" : "");
        }
        return KR_OK;
    }
    cJSON *root;
    kr_json_limits jl = kr_api_json_limits(lim);
    kr_status st = kr_json_body_parse(body, len, &jl, &root, err);
    if (st != KR_OK) return st;
    const cJSON *candles = root, *columns = NULL;
    /* A pandas frame as to_json writes it ('split', 'columns', 'index'), or the columns layout
     * ({"timestamps": [...], "open": [...], ...}), is the candles. */
    if (cJSON_IsObject(root) && !cJSON_GetObjectItemCaseSensitive(root, "candles") &&
        ((cJSON_GetObjectItemCaseSensitive(root, "columns") &&
          cJSON_GetObjectItemCaseSensitive(root, "data")) ||
         cJSON_IsObject(root->child) || has_time_column(root))) {
        st = kr_api_candles_from_json(root, NULL, lim, out, err);
        goto done;
    }
    if (cJSON_IsObject(root)) {
        kr_field f[] = {
            KR_F_VALUE("candles", &candles, KR_FIELD_REQUIRED),
            KR_F_VALUE("columns", &columns, 0),
        };
        candles = NULL;
        if ((st = kr_fields_read(root, f, 2, err)) != KR_OK) goto done;
    } else if (!cJSON_IsArray(root)) {
        st = kr_api_error_set(err, 400, "body",
                              "must be an array of candle rows or {\"candles\": ...}, got %s",
                              kr_json_type_name(root));
        goto done;
    }
    /* The candle parser wants a history (2+ rows); one new bar is a fine upsert, but a single
     * JSON row would need its own validator, so point at CSV instead. */
    if (cJSON_IsArray(candles) && cJSON_GetArraySize(candles) == 1) {
        st = kr_api_error_set(err, 400, "candles",
                              "JSON candles need at least 2 rows; give a single candle as CSV "
                              "text (over HTTP, a text/csv body)");
        goto done;
    }
    st = kr_api_candles_from_json(candles, columns, lim, out, err);
done:
    cJSON_Delete(root);
    return st;
}

kr_status kr_candles_parse_text(const char *text, size_t len, const char *label, kr_candles **out,
                                kr_error *err) {
    *out = NULL;
    size_t i = 0;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) i = 3; /* a UTF-8 BOM, as editors write */
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
        i++;
    if (i == len || (text[i] != '{' && text[i] != '['))
        return kr_candles_parse_csv(text, len, label, out, err);
    text += i;
    len -= i;
    /* A file's JSON is held in memory as a parse tree (about 10x its size), so it keeps the
     * server's row limit; the messages say so rather than name a server setting. CSV is read
     * straight into columns and has no such limit. */
    kr_api_limits lim = kr_api_default_limits();
    lim.max_rows_key = "JSON input is parsed in memory; CSV input has no row limit";
    kr_api_error aerr;
    if (kr_api_candles_parse(text, len, 0, &lim, out, &aerr) == KR_OK) return KR_OK;
    return kr_error_set(err, KR_ERR_FORMAT, "%s: %s", label, aerr.message);
}
