/*
 * series/calendar_files — where the exchange calendars come from (see calendar.h): the
 * compiled-in copies of data/calendars (the fallback: a library with no data files still
 * knows every market), then the shipped directory of the installation (the same files, which a
 * packager may update without a rebuild), then the user's directory ($KRONOS_CALENDAR_DIR,
 * `--calendar-dir`, the server's `calendar_dir`). A file there either replaces the calendar of
 * its name (or adds a new market) or, with "extends": "NAME", adds years of holidays to it: a
 * user adds next year's notice without copying or rebuilding anything.
 *
 * A set of calendars (a "generation") is parsed whole and only then published; calendars are
 * handed out as borrowed pointers with static lifetime, so a generation replaced by a later
 * kr_calendar_load is never freed (a reload is rare: once per process, a few times in tests).
 */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/timeutil.h"
#include "kronos/util.h"
#include "series/calendar.h"
#include "series/candles.h"

/* The embedded files (calendars_data.c, generated). */
extern const struct {
    const char *name, *text;
    size_t len;
} kr_calendar_files[];
extern const int kr_calendar_n_files;

#define KR_CAL_MAX_FILE_BYTES ((size_t)4 << 20)
#define KR_CAL_MAX_CALENDARS 64
#define KR_CAL_ENV_DIR "KRONOS_CALENDAR_DIR"

typedef struct generation {
    kr_calendar *cals[KR_CAL_MAX_CALENDARS];
    const kr_calendar *list[KR_CAL_MAX_CALENDARS + 1];
    int n;
    struct generation *prev; /* the one it replaced: kept (and reachable), never freed */
} generation;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static generation *g_current; /* published; never freed */
static char g_error[768]; /* the first load's failure, repeated to every lookup */
static int g_loaded;

static int64_t day_number(int64_t t) {
    int64_t q = t / 86400;
    if (t % 86400 != 0 && t < 0) q--;
    return q;
}

static int year_of(int64_t day) { return kr_civil_from_unix(day * 86400).year; }

/* "HH:MM" (00:00 .. 24:00) -> seconds of day, or -1. */
static int parse_hhmm(const cJSON *v) {
    if (!cJSON_IsString(v)) return -1;
    int h, m;
    char tail;
    if (sscanf(v->valuestring, "%d:%d%c", &h, &m, &tail) != 2) return -1;
    if (h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m)) return -1;
    return h * 3600 + m * 60;
}

/* "YYYY-MM-DD" -> day number, or 0 with *ok = 0. */
static int64_t parse_day(const cJSON *v, int *ok) {
    int64_t t;
    int has_time = 0;
    *ok = cJSON_IsString(v) &&
          kr_parse_timestamp(v->valuestring, strlen(v->valuestring), &t, &has_time) == 0 &&
          !has_time;
    return *ok ? day_number(t) : 0;
}

static int copy_str(const cJSON *o, const char *key, char *out, size_t cap, int required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return !required;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap) return 0;
    snprintf(out, cap, "%s", v->valuestring);
    return 1;
}

static void calendar_free(kr_calendar *c) {
    if (!c) return;
    free(c->holidays);
    free(c->early_days);
    free(c->early_close);
    free(c);
}

#define BAD(field)                                                                                \
    do {                                                                                          \
        kr_error_set(err, KR_ERR_FORMAT, "%s: field '%s' is missing or malformed", label, field); \
        goto fail;                                                                                \
    } while (0)

/* Holidays (sorted, unique, each within [year_first, year_last] when strict) of v into
 * *days / *n (caller frees). */
static int parse_holidays(const cJSON *v, int64_t **days, int *n, int strict_first,
                          int strict_last) {
    *days = malloc(((size_t)cJSON_GetArraySize(v) + 1) * sizeof **days);
    *n = 0;
    if (!*days) return -1;
    for (const cJSON *d = v->child; d; d = d->next) {
        int ok;
        int64_t day = parse_day(d, &ok);
        if (!ok || (*n && day <= (*days)[*n - 1])) return -1;
        if (strict_first && (year_of(day) < strict_first || year_of(day) > strict_last)) return -1;
        (*days)[(*n)++] = day;
    }
    return 0;
}

static int parse_early(const cJSON *v, int64_t **days, int **close, int *n, int strict_first,
                       int strict_last) {
    size_t cap = (size_t)cJSON_GetArraySize(v) + 1;
    *days = malloc(cap * sizeof **days);
    *close = malloc(cap * sizeof **close);
    *n = 0;
    if (!*days || !*close) return -1;
    for (const cJSON *d = v->child; d; d = d->next) {
        int ok;
        if (!cJSON_IsArray(d) || cJSON_GetArraySize(d) != 2) return -1;
        int64_t day = parse_day(d->child, &ok);
        int cl = parse_hhmm(d->child->next);
        if (!ok || cl < 0 || (*n && day <= (*days)[*n - 1])) return -1;
        if (strict_first && (year_of(day) < strict_first || year_of(day) > strict_last)) return -1;
        (*days)[*n] = day;
        (*close)[(*n)++] = cl;
    }
    return 0;
}

static int parse_years(const cJSON *root, int *first, int *last) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "years");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(v->child) ||
        !cJSON_IsNumber(v->child->next))
        return -1;
    const double a = v->child->valuedouble, b = v->child->next->valuedouble;
    if (a != (int)a || b != (int)b || a < 1900 || b > 2200 || a > b) return -1;
    *first = (int)a;
    *last = (int)b;
    return 0;
}

/* A whole calendar from root (label names the file in messages). */
static kr_status parse_calendar(const char *label, const cJSON *root, kr_calendar **out,
                                kr_error *err) {
    static const char *const k_days[7] = { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
    kr_calendar *c = calloc(1, sizeof *c);
    if (!c) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
    const cJSON *v;
    if (!copy_str(root, "name", c->name, sizeof c->name, 1) || !c->name[0]) BAD("name");
    if (!copy_str(root, "title", c->title, sizeof c->title, 1)) BAD("title");
    if (!copy_str(root, "source", c->source, sizeof c->source, 1)) BAD("source");
    if (!copy_str(root, "timezone", c->timezone, sizeof c->timezone, 0)) BAD("timezone");
    v = cJSON_GetObjectItemCaseSensitive(root, "aliases");
    if (v && (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > KR_CAL_MAX_NAMES)) BAD("aliases");
    for (const cJSON *a = v ? v->child : NULL; a; a = a->next) {
        if (!cJSON_IsString(a) || strlen(a->valuestring) >= sizeof c->aliases[0]) BAD("aliases");
        snprintf(c->aliases[c->n_aliases++], sizeof c->aliases[0], "%s", a->valuestring);
    }
    if (parse_years(root, &c->year_first, &c->year_last) != 0) BAD("years");
    v = cJSON_GetObjectItemCaseSensitive(root, "weekdays");
    if (!cJSON_IsArray(v)) BAD("weekdays");
    for (const cJSON *d = v->child; d; d = d->next) {
        int k = 0;
        while (k < 7 && !(cJSON_IsString(d) && !strcmp(d->valuestring, k_days[k]))) k++;
        if (k == 7) BAD("weekdays");
        c->weekday_mask |= 1 << k;
    }
    if (!c->weekday_mask) BAD("weekdays");
    v = cJSON_GetObjectItemCaseSensitive(root, "sessions");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 ||
        cJSON_GetArraySize(v) > KR_CAL_MAX_SESSIONS)
        BAD("sessions");
    for (const cJSON *s = v->child; s; s = s->next) {
        if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) != 2) BAD("sessions");
        int o = parse_hhmm(s->child), e = parse_hhmm(s->child->next);
        int prev = c->n_sessions ? c->session_close[c->n_sessions - 1] : -1;
        if (o < 0 || e <= o || o < prev) BAD("sessions");
        c->session_open[c->n_sessions] = o;
        c->session_close[c->n_sessions++] = e;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "bar_label");
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "start") && strcmp(v->valuestring, "end")))
        BAD("bar_label");
    c->label_end = !strcmp(v->valuestring, "end");
    v = cJSON_GetObjectItemCaseSensitive(root, "closing_auction");
    if (v) { /* ["HH:MM", "HH:MM"]: from the last session's close */
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) BAD("closing_auction");
        int o = parse_hhmm(v->child), e = parse_hhmm(v->child->next);
        if (o != c->session_close[c->n_sessions - 1] || e <= o) BAD("closing_auction");
        c->closing_auction = e - o;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "symbol_suffixes");
    if (v && (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > KR_CAL_MAX_SUFFIXES))
        BAD("symbol_suffixes");
    for (const cJSON *a = v ? v->child : NULL; a; a = a->next) {
        if (!cJSON_IsString(a) || !a->valuestring[0] ||
            strlen(a->valuestring) >= sizeof c->suffixes[0])
            BAD("symbol_suffixes");
        snprintf(c->suffixes[c->n_suffixes++], sizeof c->suffixes[0], "%s", a->valuestring);
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "holidays");
    if (!cJSON_IsArray(v) || parse_holidays(v, &c->holidays, &c->n_holidays, 0, 0) != 0)
        BAD("holidays");
    v = cJSON_GetObjectItemCaseSensitive(root, "early_closes");
    if (!cJSON_IsArray(v) ||
        parse_early(v, &c->early_days, &c->early_close, &c->n_early, 0, 0) != 0)
        BAD("early_closes");
    *out = c;
    return KR_OK;
fail:
    calendar_free(c);
    return KR_ERR_FORMAT;
}

/* Merges two ascending day lists (with their closes when close_a is not NULL). */
static int merge_days(const int64_t *a, const int *close_a, int na, const int64_t *b,
                      const int *close_b, int nb, int64_t **out, int **close_out, int *n) {
    *out = malloc(((size_t)na + (size_t)nb + 1) * sizeof **out);
    if (close_out) *close_out = malloc(((size_t)na + (size_t)nb + 1) * sizeof **close_out);
    if (!*out || (close_out && !*close_out)) return -1;
    int i = 0, j = 0, k = 0;
    while (i < na || j < nb) {
        const int take_b = i == na || (j < nb && b[j] <= a[i]);
        if (take_b && i < na && b[j] == a[i]) i++; /* the extension's entry wins */
        (*out)[k] = take_b ? b[j] : a[i];
        if (close_out) (*close_out)[k] = take_b ? close_b[j] : close_a[i];
        k++;
        if (take_b)
            j++;
        else
            i++;
    }
    *n = k;
    return 0;
}

/* A copy of base with the extension's years, holidays and early closes added. The extension's
 * years must continue the base's (no year left without holidays in between) and its dates lie
 * within its own years (a typo of a year is refused, not silently ignored). */
static kr_status extend_calendar(const char *label, const cJSON *root, const kr_calendar *base,
                                 kr_calendar **out, kr_error *err) {
    int first, last;
    if (parse_years(root, &first, &last) != 0)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: field 'years' is missing or malformed (an extension lists the "
                            "years it adds, [first, last])",
                            label);
    if (first > base->year_last + 1 || last < base->year_first - 1)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: years %d..%d leave a gap after %s's %d..%d (an extension "
                            "continues the calendar's years)",
                            label, first, last, base->name, base->year_first, base->year_last);
    const cJSON *hv = cJSON_GetObjectItemCaseSensitive(root, "holidays");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "early_closes");
    int64_t *hol = NULL, *early = NULL;
    int *early_close = NULL, nh = 0, ne = 0;
    kr_calendar *c = NULL;
    kr_status st = KR_OK;
    if (!cJSON_IsArray(hv) || parse_holidays(hv, &hol, &nh, first, last) != 0) {
        st = kr_error_set(err, KR_ERR_FORMAT,
                          "%s: field 'holidays' is missing or malformed (ascending YYYY-MM-DD "
                          "dates within the file's years %d..%d)",
                          label, first, last);
        goto done;
    }
    if (ev &&
        (!cJSON_IsArray(ev) || parse_early(ev, &early, &early_close, &ne, first, last) != 0)) {
        st = kr_error_set(err, KR_ERR_FORMAT,
                          "%s: field 'early_closes' is malformed ([[\"YYYY-MM-DD\", \"HH:MM\"], "
                          "...] within the file's years)",
                          label);
        goto done;
    }
    c = malloc(sizeof *c);
    if (!c) {
        st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
        goto done;
    }
    *c = *base;
    c->holidays = NULL;
    c->early_days = NULL;
    c->early_close = NULL;
    if (merge_days(base->holidays, NULL, base->n_holidays, hol, NULL, nh, &c->holidays, NULL,
                   &c->n_holidays) != 0 ||
        merge_days(base->early_days, base->early_close, base->n_early, early, early_close, ne,
                   &c->early_days, &c->early_close, &c->n_early) != 0) {
        st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
        goto done;
    }
    if (first < c->year_first) c->year_first = first;
    if (last > c->year_last) c->year_last = last;
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    size_t used = strlen(c->source);
    if (cJSON_IsString(src) && used + 8 < sizeof c->source)
        snprintf(c->source + used, sizeof c->source - used, " + %d-%d: %s", first, last,
                 src->valuestring);
    used = strlen(c->origin);
    if (used + 4 < sizeof c->origin)
        snprintf(c->origin + used, sizeof c->origin - used, " + %s", label);
done:
    free(hol);
    free(early);
    free(early_close);
    if (st != KR_OK) {
        calendar_free(c);
        c = NULL;
    }
    *out = c;
    return st;
}

/* The calendar called name in g (or, with aliases, one of whose aliases it is), or -1. */
static int find_in(const generation *g, const char *name, int aliases) {
    for (int i = 0; i < g->n; i++)
        if (!strcasecmp(g->cals[i]->name, name)) return i;
    for (int i = 0; i < g->n && aliases; i++) /* "extends": "SZSE" names SSE's */
        for (int k = 0; k < g->cals[i]->n_aliases; k++)
            if (!strcasecmp(g->cals[i]->aliases[k], name)) return i;
    return -1;
}

/* One file's text into g: a whole calendar (replacing the one of its name, or added), or, with
 * "extends", more years of an existing one. pass 0 takes whole calendars, pass 1 extensions. */
static kr_status apply_text(generation *g, const char *label, const char *text, size_t len,
                            int pass, kr_error *err) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kr_error_set(err, KR_ERR_FORMAT, "%s: not a JSON object", label);
    }
    const cJSON *ext = cJSON_GetObjectItemCaseSensitive(root, "extends");
    kr_status st = KR_OK;
    kr_calendar *c = NULL;
    if (ext && !cJSON_IsString(ext)) {
        st = kr_error_set(err, KR_ERR_FORMAT, "%s: field 'extends' must name a calendar", label);
    } else if (ext && pass == 1) {
        const int at = find_in(g, ext->valuestring, 1);
        if (at < 0)
            st = kr_error_set(err, KR_ERR_FORMAT,
                              "%s: 'extends' names '%.40s', which is no known calendar", label,
                              ext->valuestring);
        else if ((st = extend_calendar(label, root, g->cals[at], &c, err)) == KR_OK) {
            /* The generation is not published yet: nobody holds the calendar replaced. */
            calendar_free(g->cals[at]);
            g->cals[at] = c;
        }
    } else if (!ext && pass == 0) {
        if ((st = parse_calendar(label, root, &c, err)) == KR_OK) {
            snprintf(c->origin, sizeof c->origin, "%s", label);
            const char *slash = strrchr(label, '/');
            snprintf(c->file, sizeof c->file, "%s", slash ? slash + 1 : label);
            const int at = find_in(g, c->name, 0);
            if (at >= 0) {
                calendar_free(g->cals[at]); /* unpublished: nobody holds it */
                g->cals[at] = c;
            } else if (g->n < KR_CAL_MAX_CALENDARS) {
                g->cals[g->n++] = c;
            } else {
                calendar_free(c);
                st = kr_error_set(err, KR_ERR_FORMAT, "%s: more than %d calendars", label,
                                  KR_CAL_MAX_CALENDARS);
            }
        }
    }
    cJSON_Delete(root);
    return st;
}

static int is_json_name(const struct dirent *d) {
    const size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 5 && !strcmp(d->d_name + n - 5, ".json");
}

/* Every *.json of dir (sorted by name) into g: whole calendars first, then extensions. A
 * missing directory is an error only when required (the user's); the shipped one may be
 * absent (an uninstalled library, a minimal container): the compiled-in copies stand. */
static kr_status apply_dir(generation *g, const char *dir, int required, kr_error *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        if (!required) return KR_OK;
        return kr_error_set(err, KR_ERR_IO, "calendar directory '%s': no such directory", dir);
    }
    struct dirent **names = NULL;
    const int n = scandir(dir, &names, is_json_name, alphasort);
    if (n < 0) return kr_error_set(err, KR_ERR_IO, "calendar directory '%s': cannot read", dir);
    kr_status st = KR_OK;
    for (int pass = 0; pass < 2 && st == KR_OK; pass++)
        for (int i = 0; i < n && st == KR_OK; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            char *text = NULL;
            size_t len = 0;
            st = kr_read_file(path, KR_CAL_MAX_FILE_BYTES, "calendar file", &text, &len, err);
            if (st == KR_OK) st = apply_text(g, path, text, len, pass, err);
            free(text);
        }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

static kr_status build(const char *shipped_dir, const char *user_dir, generation **out,
                       kr_error *err) {
    generation *g = calloc(1, sizeof *g);
    if (!g) return kr_error_set(err, KR_ERR_NOMEM, "calendars: out of memory");
    kr_status st = KR_OK;
    for (int pass = 0; pass < 2 && st == KR_OK; pass++)
        for (int i = 0; i < kr_calendar_n_files && st == KR_OK; i++) {
            char label[96];
            snprintf(label, sizeof label, "data/calendars/%s", kr_calendar_files[i].name);
            st = apply_text(g, label, kr_calendar_files[i].text, kr_calendar_files[i].len, pass,
                            err);
        }
    for (int i = 0; i < g->n && st == KR_OK; i++) /* compiled in: say so */
        snprintf(g->cals[i]->origin, sizeof g->cals[i]->origin, "built-in");
    if (st == KR_OK && shipped_dir && *shipped_dir) st = apply_dir(g, shipped_dir, 0, err);
    if (st == KR_OK && user_dir && *user_dir) st = apply_dir(g, user_dir, 1, err);
    if (st != KR_OK) {
        for (int i = 0; i < g->n; i++) calendar_free(g->cals[i]);
        free(g);
        return st;
    }
    for (int i = 0; i < g->n; i++) g->list[i] = g->cals[i];
    *out = g;
    return KR_OK;
}

kr_status kr_calendar_load(const char *shipped_dir, const char *user_dir, kr_error *err) {
    if (!user_dir || !*user_dir) user_dir = getenv(KR_CAL_ENV_DIR);
    generation *g = NULL;
    kr_status st = build(shipped_dir, user_dir, &g, err);
    if (st != KR_OK) return st;
    pthread_mutex_lock(&g_lock);
    g->prev = g_current; /* stays allocated: its calendars may be in use */
    g_current = g;
    g_error[0] = '\0';
    g_loaded = 1;
    pthread_mutex_unlock(&g_lock);
    return KR_OK;
}

kr_status kr_calendar_list(const kr_calendar *const **out, int *n, kr_error *err) {
    pthread_mutex_lock(&g_lock);
    if (!g_loaded) {
        /* First use without kr_calendar_load: the compiled-in calendars and the user's
         * directory from the environment. */
        kr_error e = { 0 };
        generation *g = NULL;
        if (build(NULL, getenv(KR_CAL_ENV_DIR), &g, &e) == KR_OK)
            g_current = g;
        else
            snprintf(g_error, sizeof g_error, "%s", e.message);
        g_loaded = 1;
    }
    const generation *g = g_current;
    pthread_mutex_unlock(&g_lock);
    if (!g) return kr_error_set(err, KR_ERR_FORMAT, "%s", g_error);
    *out = g->list;
    *n = g->n;
    return KR_OK;
}
