/*
 * store/store_target — what a --db value (or $KRONOS_DB, a config's "db") names, and how
 * messages show it (see kronos/store.h: kr_store_check_target, kr_store_display_name,
 * kr_store_resolve_path). The rule: a postgresql:// or postgres:// URL is a PostgreSQL
 * database, a path an SQLite file, and whatever else looks like a URL (a scheme "word:"
 * other than file:, "://" with no '/' before it), white space at either end, a control
 * character or a libpq key=value string is refused, never taken for a file name. A password
 * never shows: the display masks more than libpq would read as one, never less (its
 * fuzz target, fuzz/fuzz_store_url.c, checks that). Reads text only: nothing is opened.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "store/store_backend.h"

/* ------------------------------------------------------------------ targets */

int kr_store_is_url(const char *target) {
    return target &&
           (!strncasecmp(target, "postgresql://", 13) || !strncasecmp(target, "postgres://", 11));
}

/* The ':' ending a URL scheme at the start of t (RFC 3986: a letter, then letters, digits,
 * '+', '-', '.'), or NULL. */
static const char *scheme_colon(const char *t) {
    if (!isalpha((unsigned char)*t)) return NULL;
    const char *p = t + 1;
    while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.') p++;
    return *p == ':' ? p : NULL;
}

/* file:NAME is the file of that name (store_sqlite.c), not a URL. */
static int is_file_name(const char *t) { return !strncasecmp(t, "file:", 5); }

/* Where a URL-like target's scheme ends (past its ':' and any '/'), or NULL when target reads
 * as a file path: the rule of kr_store_check_target, white space at the start skipped (a
 * target refused for it is still shown masked). */
static const char *url_rest(const char *t) {
    while (*t == ' ' || *t == '\t') t++;
    const char *colon = scheme_colon(t), *sep = strstr(t, "://");
    if (colon && !is_file_name(t)) {
        colon++;
    } else if (sep && !memchr(t, '/', (size_t)(sep - t))) {
        colon = sep + 1;
    } else {
        return NULL;
    }
    while (*colon == '/') colon++;
    return colon;
}

static int hex_value(char ch) {
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Whether the URL query parameter at p (up to '=', '&' or '#') names a secret: password or
 * sslpassword (the client key's passphrase), whatever its case and however percent-escaped
 * (libpq decodes the keys: "pass%77ord" is a password). */
static int is_secret_param(const char *p) {
    char key[32];
    size_t n = 0;
    for (; *p && *p != '=' && *p != '&' && *p != '#'; p++) {
        int ch = (unsigned char)*p, hi, lo;
        if (ch == '%' && (hi = hex_value(p[1])) >= 0 && (lo = hex_value(p[2])) >= 0) {
            ch = hi * 16 + lo;
            p += 2;
        }
        if (n + 1 >= sizeof key) return 0; /* longer than any keyword */
        key[n++] = (char)ch;
    }
    key[n] = '\0';
    return *p == '=' && (!strcasecmp(key, "password") || !strcasecmp(key, "sslpassword"));
}

/* The password of a URL-like target's user part: [*from, *to) (empty when it is "user:@"),
 * or 0 when there is none. libpq ends user:password at the first '@' or '/', so a password
 * holding an unescaped '/' or '@' makes a URL it misreads (it takes the start for a host and
 * port): the user meant a password all the same. So it runs from the first ':' after the
 * scheme to the last '@' of the whole URL, and with a scheme kronos does not read (a typo, or
 * a "user:" taken for one, where the password may be what follows it) from the first ':' of
 * all. */
static int userinfo_secret(const char *target, const char **from, const char **to) {
    const char *rest = url_rest(target);
    if (!rest) return 0;
    while (*target == ' ' || *target == '\t') target++;
    const char *at = strrchr(kr_store_is_url(target) ? rest : target, '@');
    if (!at) return 0;
    if (!kr_store_is_url(target)) {
        /* From its first ':' (the scheme's, or one before "://") to the last '@' anywhere:
         * what a typo took for a scheme may hold the password too ("a:PW@x://..."). */
        const char *colon = strchr(target, ':');
        if (!colon || colon > at) return 0;
        *from = colon + 1;
    } else {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        if (!colon) return 0; /* user@host: no password */
        *from = colon + 1;
    }
    *to = at;
    return 1;
}

int kr_store_url_password(const char *target, char *out, size_t cap) {
    const char *from, *to;
    if (cap == 0 || !target || !userinfo_secret(target, &from, &to)) return 0;
    size_t n = 0;
    for (const char *p = from; p < to && n + 1 < cap; p++) {
        int hi, lo;
        /* %00 is left as it is: a NUL would end the text (libpq refuses it anyway). */
        if (*p == '%' && p + 2 < to && (hi = hex_value(p[1])) >= 0 && (lo = hex_value(p[2])) >= 0 &&
            hi + lo > 0) {
            out[n++] = (char)(hi * 16 + lo);
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return 1;
}

static int is_keyword_conninfo(const char *target);

void kr_store_display_name(const char *target, char *out, size_t cap) {
    if (!out || cap == 0) return;
    out[0] = '\0';
    if (!target) return;
    if (is_keyword_conninfo(target)) { /* refused (kr_store_check_target); it may hold one */
        snprintf(out, cap, "(a PostgreSQL key=value string, not shown)");
        return;
    }
    const char *rest = url_rest(target);
    if (!rest) {
        snprintf(out, cap, "%s", target);
        return;
    }
    /* The password can be in the user part (user:secret@host, userinfo_secret) or a query
     * parameter (?password=secret); both are replaced, whatever else the URL holds is kept.
     * A secret parameter's value runs to the next '&' (libpq takes '#' and '?' into it). */
    const char *from = NULL, *at = NULL;
    if (!userinfo_secret(target, &from, &at)) from = NULL;
    size_t o = 0;
#define PUT(ch)                           \
    do {                                  \
        if (o + 1 < cap) out[o++] = (ch); \
    } while (0)
    for (const char *p = target; *p;) {
        if (from && p == from) {
            for (const char *m = "***"; *m; m++) PUT(*m);
            p = at;
            from = NULL; /* once: "u:@h" masks nothing but is still shown "u:***@h" */
            continue;
        }
        if (p > target && (p[-1] == '?' || p[-1] == '&') && is_secret_param(p)) {
            const char *eq = p + strcspn(p, "=&#");
            for (; p <= eq && *p; p++) PUT(*p); /* the key as written, and its '=' */
            for (const char *m = "***"; *m; m++) PUT(*m);
            p += strcspn(p, "&");
            if (from && p > from && p < at) { /* it ended inside the user part's password */
                p = at;
                from = NULL;
            }
            continue;
        }
        PUT(*p);
        p++;
    }
#undef PUT
    out[o] = '\0';
}

/* Whether target is a libpq keyword/value string ("host=db user=k password=..."): not a URL,
 * so it would be taken for an SQLite file name, created under that name and shown in every
 * message, password included. */
static int is_keyword_conninfo(const char *target) {
    static const char *const keys[] = { "host",    "hostaddr",        "port",     "dbname",
                                        "user",    "password",        "passfile", "service",
                                        "sslmode", "connect_timeout", "options",  NULL };
    while (*target == ' ' || *target == '\t') target++;
    for (int i = 0; keys[i]; i++) {
        size_t n = strlen(keys[i]);
        if (!strncasecmp(target, keys[i], n)) {
            const char *p = target + n;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == '=') return 1;
        }
    }
    return 0;
}

static kr_status refuse_keyword_conninfo(kr_error *err) {
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "the database looks like a PostgreSQL key=value connection string (not "
                        "shown: it may hold a password); give a postgresql://USER@HOST:PORT/DB "
                        "URL (the password in PGPASSWORD or ~/.pgpass), or ./NAME for an SQLite "
                        "file of that name");
}

/* The scheme of target for a message, into out: its leading letters, digits, '+', '-' and
 * '.' (up to its ':' or "://"): never what else precedes a "://", which may be a password
 * ("x?password=...://"). */
static void scheme_of(const char *t, char *out, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap &&
           (isalnum((unsigned char)t[n]) || t[n] == '+' || t[n] == '-' || t[n] == '.'))
        n++;
    memcpy(out, t, n);
    out[n] = '\0';
}

kr_status kr_store_check_target(const char *target, kr_error *err) {
    if (!target || !*target)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "the database name is empty");
    if (is_keyword_conninfo(target)) return refuse_keyword_conninfo(err);
    char shown[PATH_MAX];
    kr_store_display_name(target, shown, sizeof shown);
    for (char *p = shown; *p; p++) /* printable in a message and a log line */
        if ((unsigned char)*p < 32 || *p == 127) *p = '?';
    const size_t n = strlen(target);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)target[i] < 32 || target[i] == 127)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "database '%s': holds a control character (byte %zu); a file "
                                "name or URL has none",
                                shown, i + 1);
    if (isspace((unsigned char)target[0]) || isspace((unsigned char)target[n - 1]))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "database '%s': %s with white space (a stray space or quote in "
                            "the setting?); remove it",
                            shown, isspace((unsigned char)target[0]) ? "starts" : "ends");
    if (kr_store_is_url(target) || !url_rest(target)) return KR_OK;
    char scheme[40];
    scheme_of(target, scheme, sizeof scheme);
    if (!strcasecmp(scheme, "postgresql") || !strcasecmp(scheme, "postgres"))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "database '%s': a PostgreSQL URL starts with %s:// (a colon and two "
                            "slashes): postgresql://USER@HOST:PORT/DB",
                            shown, scheme);
    if (!scheme[0]) snprintf(scheme, sizeof scheme, "what precedes ://");
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "database '%s': '%s' is not a kind of database kronos opens: a "
                        "PostgreSQL database is postgresql://USER@HOST:PORT/DB (or postgres://), "
                        "an SQLite store a file path (one whose name starts like a URL scheme, "
                        "with a colon, is given as ./NAME)",
                        shown, scheme);
}

kr_status kr_store_resolve_path(const char *flag, char *out, size_t cap, kr_error *err) {
    if (!out || cap == 0) return kr_error_set(err, KR_ERR_INVALID_ARG, "store path: no buffer");
    out[0] = '\0'; /* and so it stays on any error */
    const char *env_db = getenv("KRONOS_DB"), *xdg = getenv("XDG_DATA_HOME"),
               *home = getenv("HOME");
    int n;
    /* Given but empty (an unset shell variable): not the default store, which a delete or an
     * ingest would then change unasked. */
    if (flag && !*flag)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "--db is empty; leave it out for the default store");
    if (flag)
        n = snprintf(out, cap, "%s", flag);
    else if (env_db && *env_db)
        n = snprintf(out, cap, "%s", env_db);
    else if (xdg && *xdg)
        n = snprintf(out, cap, "%s/kronos/kronos.db", xdg);
    else if (home && *home)
        n = snprintf(out, cap, "%s/.local/share/kronos/kronos.db", home);
    else
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "no database path: pass --db FILE or set KRONOS_DB (HOME is unset)");
    if (n < 0 || (size_t)n >= cap)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "database path is too long");
    kr_status st = kr_store_check_target(out, err);
    if (st != KR_OK) {
        out[0] = '\0';
        return st;
    }
    /* Nothing is created here: a command that only reads (store list, analyze) must not
     * leave directories behind for a path that names no database. kr_store_open makes them
     * when it creates the file. */
    return KR_OK;
}
