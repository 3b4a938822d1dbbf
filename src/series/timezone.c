/* series/timezone — see timezone.h. */
#include "series/timezone.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"

/* Rules of the calendars' zones, for machines without tzdata. */
static const struct {
    const char *zone, *rule;
} k_builtin[] = {
    { "UTC", "UTC0" },
    { "Etc/UTC", "UTC0" },
    { "Asia/Shanghai", "CST-8" },
    { "Asia/Hong_Kong", "HKT-8" },
    { "America/New_York", "EST5EDT,M3.2.0,M11.1.0" },
};

/* [+-]hh[:mm[:ss]] into seconds; returns the end or NULL. */
static const char *parse_hms(const char *s, int *out) {
    int sign = 1;
    if (*s == '+' || *s == '-') sign = *s++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)*s)) return NULL;
    int v[3] = { 0, 0, 0 };
    for (int k = 0; k < 3; k++) {
        if (k > 0) {
            if (*s != ':') break;
            s++;
        }
        if (!isdigit((unsigned char)*s)) return NULL;
        int n = 0;
        while (isdigit((unsigned char)*s) && n < 1000) n = n * 10 + (*s++ - '0');
        v[k] = n;
    }
    if (v[0] > 167 || v[1] > 59 || v[2] > 59) return NULL;
    *out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
    return s;
}

/* A zone abbreviation: letters, or <...> (e.g. <+08>). */
static const char *parse_name(const char *s) {
    if (*s == '<') {
        const char *e = strchr(s, '>');
        return e && e - s >= 4 ? e + 1 : NULL;
    }
    const char *b = s;
    while (isalpha((unsigned char)*s)) s++;
    return s - b >= 3 ? s : NULL;
}

/* Mm.w.d[/time] */
static const char *parse_date(const char *s, int *m, int *w, int *d, int *t) {
    if (*s != 'M') return NULL;
    char *e = NULL;
    long mm = strtol(s + 1, &e, 10);
    if (*e != '.') return NULL;
    long ww = strtol(e + 1, &e, 10);
    if (*e != '.') return NULL;
    long dd = strtol(e + 1, &e, 10);
    if (mm < 1 || mm > 12 || ww < 1 || ww > 5 || dd < 0 || dd > 6) return NULL;
    *m = (int)mm;
    *w = (int)ww;
    *d = (int)dd;
    *t = 7200; /* 02:00 unless given */
    s = e;
    if (*s == '/') {
        s = parse_hms(s + 1, t);
        if (!s) return NULL;
    }
    return s;
}

kr_status kr_tz_parse_rule(const char *rule, kr_tz *tz, kr_error *err) {
    memset(tz, 0, sizeof *tz);
    if (!rule || strlen(rule) >= sizeof tz->rule)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "time zone rule: missing or too long");
    snprintf(tz->rule, sizeof tz->rule, "%s", rule);
    const char *s = parse_name(rule);
    int off = 0;
    if (!s || !(s = parse_hms(s, &off))) goto bad;
    tz->std_off = tz->dst_off = -off; /* POSIX counts hours west */
    if (!*s) return KR_OK;
    if (!(s = parse_name(s))) goto bad;
    tz->dst_off = tz->std_off + 3600;
    if (*s && *s != ',') {
        if (!(s = parse_hms(s, &off))) goto bad;
        tz->dst_off = -off;
    }
    if (*s++ != ',') goto bad; /* a DST zone without rules: unsupported */
    if (!(s = parse_date(s, &tz->start_m, &tz->start_w, &tz->start_d, &tz->start_t))) goto bad;
    if (*s++ != ',') goto bad;
    if (!(s = parse_date(s, &tz->end_m, &tz->end_w, &tz->end_d, &tz->end_t)) || *s) goto bad;
    tz->has_dst = 1;
    return KR_OK;
bad:
    return kr_error_set(err, KR_ERR_FORMAT,
                        "time zone rule '%s': not a POSIX TZ rule this reader knows "
                        "(std offset [dst [offset],Mm.w.d[/t],Mm.w.d[/t]])",
                        rule);
}

/* The tzdata footer: the last line of a TZif v2+ file, between two newlines. */
static int read_footer(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char head[5] = { 0 };
    char buf[256];
    int ok = -1;
    if (fread(head, 1, 5, f) == 5 && !memcmp(head, "TZif", 4) && head[4] >= '2' &&
        fseek(f, -(long)sizeof buf, SEEK_END) == 0) {
        size_t n = fread(buf, 1, sizeof buf, f);
        if (n >= 2 && buf[n - 1] == '\n') {
            size_t e = n - 1, b = e;
            while (b > 0 && buf[b - 1] != '\n') b--;
            if (b > 0 && e - b < cap && e > b) {
                memcpy(out, buf + b, e - b);
                out[e - b] = '\0';
                ok = 0;
            }
        }
    }
    fclose(f);
    return ok;
}

kr_status kr_tz_load(const char *name, kr_tz *out, kr_error *err) {
    if (!name || !*name || strlen(name) >= sizeof out->name || strstr(name, "..") || name[0] == '/')
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "time zone '%s': expected an IANA name like \"Asia/Shanghai\"",
                            name ? name : "");
    char rule[96] = "";
    char path[256];
    const char *dir = getenv("TZDIR");
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", name);
    if (read_footer(path, rule, sizeof rule) != 0) {
        for (size_t i = 0; i < sizeof k_builtin / sizeof k_builtin[0]; i++)
            if (!strcmp(k_builtin[i].zone, name))
                snprintf(rule, sizeof rule, "%s", k_builtin[i].rule);
        if (!rule[0])
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "time zone '%s': not found in %s (install tzdata) and not one of "
                                "the calendars' zones",
                                name, dir && *dir ? dir : "/usr/share/zoneinfo");
    }
    kr_status st = kr_tz_parse_rule(rule, out, err);
    if (st != KR_OK) {
        kr_error_prefix(err, "time zone '%s'", name);
        return st;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    return KR_OK;
}

/* Local midnight (as naive seconds) of the w-th weekday d (0 = Sunday) of month m; w = 5 is
 * the last. */
static int64_t nth_weekday(int year, int m, int w, int d) {
    int64_t first = kr_unix_from_civil(year, m, 1, 0, 0, 0);
    int wd_first = (kr_civil_from_unix(first).weekday + 1) % 7; /* to Sunday = 0 */
    int day = 1 + (d - wd_first + 7) % 7 + (w - 1) * 7;
    int days_in =
        (int)((kr_unix_from_civil(m == 12 ? year + 1 : year, m == 12 ? 1 : m + 1, 1, 0, 0, 0) -
               first) /
              86400);
    while (day > days_in) day -= 7;
    return first + (int64_t)(day - 1) * 86400;
}

int kr_tz_offset(const kr_tz *tz, int64_t utc) {
    if (!tz->has_dst) return tz->std_off;
    int year = kr_civil_from_unix(utc + tz->std_off).year;
    /* Transition instants in UTC: the start is given in standard time, the end in DST. */
    int64_t start =
        nth_weekday(year, tz->start_m, tz->start_w, tz->start_d) + tz->start_t - tz->std_off;
    int64_t end = nth_weekday(year, tz->end_m, tz->end_w, tz->end_d) + tz->end_t - tz->dst_off;
    int dst = start < end ? (utc >= start && utc < end) : !(utc >= end && utc < start);
    return dst ? tz->dst_off : tz->std_off;
}
