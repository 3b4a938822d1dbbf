/*
 * server/static_files — files of the web page from the web root (see static_files.h).
 *
 * The path check works on the decoded URL (libmicrohttpd has already turned %2e%2e into
 * ".."; a %00 ends the string, so "app.js%00.css" is simply app.js, served as what it is),
 * segment by segment, then on the resolved file: the lexical check keeps ".." and hidden
 * names from reaching the file system at all, the realpath check catches symlinks inside
 * the root that point out of it, and the hidden-name rule is applied again to the resolved
 * path (a visible name inside the root may be a symlink to ".secret" or into ".git"). Files
 * are read whole per request: the page is a handful of small files, and nothing is cached
 * that a rebuild would have to invalidate.
 *
 * Revalidation: every file answer carries a weak ETag made of the file's inode, size and
 * modification time (nanoseconds), and Last-Modified; with Cache-Control: no-cache a browser
 * asks again on every load, and a matching If-None-Match (or, without one, an
 * If-Modified-Since not older than the file) is a 304 with no body, so an unchanged page costs
 * a round trip instead of its ~250 KB. The validators come from the same fstat as the bytes
 * sent. Range requests are not supported: the whole file is sent, and no Accept-Ranges.
 */
#include "server/static_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/strbuf.h"

#define ASSETS_PREFIX "/assets/"
#define MAX_URL_PATH 1024

/* The page may only talk to its own origin and run its own scripts: no CDN, no inline
 * script. The chart library sets element styles from script, hence 'unsafe-inline' for
 * styles only. */
#define PAGE_CSP                                                                               \
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' " \
    "data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

/* Lexical check of a relative path: segments of printable ASCII, none empty, none starting
 * with a dot (covers "." and ".." as well as hidden files), no backslash. */
static int safe_relative(const char *rel) {
    if (!*rel || strlen(rel) > MAX_URL_PATH) return 0;
    const char *seg = rel;
    for (const char *p = rel;; p++) {
        if (*p == '/' || *p == '\0') {
            if (p == seg || *seg == '.') return 0;
            if (*p == '\0') return 1;
            seg = p + 1;
            continue;
        }
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f || ch == '\\') return 0;
    }
}

int kr_static_resolve(const char *root, const char *url, char *out, size_t cap) {
    if (!root || !*root || !url || cap < PATH_MAX) return 404;
    const char *rel;
    if (!strcmp(url, "/"))
        rel = "index.html";
    else if (!strncmp(url, ASSETS_PREFIX, strlen(ASSETS_PREFIX)))
        rel = url + 1; /* "assets/..." */
    else
        return 404;
    if (!safe_relative(rel)) return 404;

    char root_real[PATH_MAX], joined[PATH_MAX + MAX_URL_PATH + 2], file_real[PATH_MAX];
    if (!realpath(root, root_real)) return 404;
    int n = snprintf(joined, sizeof joined, "%s/%s", root_real, rel);
    if (n < 0 || (size_t)n >= sizeof joined) return 404;
    if (!realpath(joined, file_real)) return 404;
    size_t rn = strlen(root_real);
    /* Inside the root: its real path plus a separator ("/" as root is its own case). */
    int inside = !strcmp(root_real, "/")
                     ? file_real[0] == '/'
                     : !strncmp(file_real, root_real, rn) && file_real[rn] == '/';
    if (!inside) return 404;
    /* The lexical rule again on where the links led: a visible name may be a symlink to a
     * hidden file or into a hidden directory of the root (assets/x.txt -> ../.secret). Only
     * the part below the root counts; the root itself may live under a hidden directory
     * (~/.local/share/kronos/web). */
    const char *below = !strcmp(root_real, "/") ? file_real + 1 : file_real + rn + 1;
    for (const char *seg = below; *seg;) {
        if (*seg == '.') return 404;
        seg += strcspn(seg, "/");
        if (*seg == '/') seg++;
    }
    struct stat sb;
    if (stat(file_real, &sb) != 0 || !S_ISREG(sb.st_mode)) return 404;
    snprintf(out, cap, "%s", file_real);
    return 0;
}

const char *kr_static_content_type(const char *path) {
    static const struct {
        const char *ext, *type;
    } k_types[] = {
        { ".html", "text/html; charset=utf-8" },
        { ".js", "text/javascript; charset=utf-8" },
        { ".mjs", "text/javascript; charset=utf-8" },
        { ".css", "text/css; charset=utf-8" },
        { ".json", "application/json" },
        { ".map", "application/json" },
        { ".svg", "image/svg+xml" },
        { ".png", "image/png" },
        { ".ico", "image/x-icon" },
        { ".txt", "text/plain; charset=utf-8" },
        { ".woff2", "font/woff2" },
    };
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
            if (!strcmp(dot, k_types[i].ext)) return k_types[i].type;
    return "application/octet-stream";
}

/* ------------------------------------------------------------------ validators */

static const char *const k_wdays[7] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
static const char *const k_months[12] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

void kr_static_etag(const struct stat *sb, char *out, size_t cap) {
    /* Weak: the file's identity and state, not a hash of its bytes (which would need a read
     * on every revalidation). Any rewrite, replacement (new inode) or resize changes it. */
    snprintf(out, cap, "W/\"%llx-%llx-%llx.%lx\"", (unsigned long long)sb->st_ino,
             (unsigned long long)sb->st_size, (unsigned long long)sb->st_mtim.tv_sec,
             (unsigned long)sb->st_mtim.tv_nsec);
}

void kr_http_date_format(time_t t, char *out, size_t cap) {
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(out, cap, "Thu, 01 Jan 1970 00:00:00 GMT");
        return;
    }
    /* Day and month names spelt out here: strftime's %a and %b follow the locale. */
    snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", k_wdays[tm.tm_wday], tm.tm_mday,
             k_months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static long long days_from_civil(long long y, int m, int d) {
    y -= m <= 2;
    const long long era = (y >= 0 ? y : y - 399) / 400;
    const long long yoe = y - era * 400;
    const long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int month_index(const char *m) {
    for (int i = 0; i < 12; i++)
        if (!strcmp(m, k_months[i])) return i;
    return -1;
}

/* n decimal digits at s (nothing else: scanf would also take "+6" or " 6"); -1 when not. */
static int digits(const char *s, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* "hh:mm:ss" at s. */
static int clock_of(const char *s, int *hh, int *mm, int *ss) {
    if (s[2] != ':' || s[5] != ':') return -1;
    *hh = digits(s, 2), *mm = digits(s + 3, 2), *ss = digits(s + 6, 2);
    return *hh < 0 || *mm < 0 || *ss < 0 ? -1 : 0;
}

int kr_http_date_parse(const char *s, time_t *out) {
    if (!s) return -1;
    const size_t n = strnlen(s, 65);
    char mon[4] = { 0 };
    int d = -1, y = -1, hh = -1, mm = -1, ss = -1;
    /* RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient
     * must still accept; every field at its fixed place. */
    const char *comma = memchr(s, ',', n);
    if (n == 29 && comma == s + 3 && s[4] == ' ' && s[7] == ' ' && s[11] == ' ' && s[16] == ' ' &&
        !strcmp(s + 25, " GMT")) {
        /* Sun, 06 Nov 1994 08:49:37 GMT */
        d = digits(s + 5, 2), y = digits(s + 12, 4);
        memcpy(mon, s + 8, 3);
        if (clock_of(s + 17, &hh, &mm, &ss)) return -1;
    } else if (comma && comma[1] == ' ' && strlen(comma + 2) == 22) {
        /* Sunday, 06-Nov-94 08:49:37 GMT; two-digit years: 70-99 are 19xx, the rest 20xx. */
        const char *r = comma + 2;
        if (r[2] != '-' || r[6] != '-' || r[9] != ' ' || strcmp(r + 18, " GMT")) return -1;
        d = digits(r, 2), y = digits(r + 7, 2);
        memcpy(mon, r + 3, 3);
        if (y < 0 || clock_of(r + 10, &hh, &mm, &ss)) return -1;
        y += y < 70 ? 2000 : 1900;
    } else if (n == 24 && !comma && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
        /* Sun Nov  6 08:49:37 1994 (the day padded with a space) */
        d = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
        y = digits(s + 20, 4);
        memcpy(mon, s + 4, 3);
        if (clock_of(s + 11, &hh, &mm, &ss)) return -1;
    } else {
        return -1;
    }
    int m = month_index(mon);
    static const int k_mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (m < 0 || y < 1970 || d < 1 || d > k_mdays[m] || hh > 23 || mm > 59 || ss > 60) return -1;
    if (ss == 60) ss = 59; /* a leap second */
    *out = (time_t)(days_from_civil(y, m + 1, d) * 86400LL + hh * 3600LL + mm * 60LL + ss);
    return 0;
}

/* The opaque part of an entity tag ("xyz" of W/"xyz"), without its quotes. */
static int opaque_of(const char *tag, const char **start, size_t *len) {
    if (!strncmp(tag, "W/", 2)) tag += 2;
    if (*tag != '"') return -1;
    const char *end = strchr(tag + 1, '"');
    if (!end) return -1;
    *start = tag + 1;
    *len = (size_t)(end - tag - 1);
    return 0;
}

int kr_static_etag_matches(const char *if_none_match, const char *etag) {
    const char *want;
    size_t want_len;
    if (!if_none_match || !etag || opaque_of(etag, &want, &want_len) != 0) return 0;
    const char *p = if_none_match;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) return 0;
        /* "*": any current representation (the file exists: it was resolved). */
        if (*p == '*') {
            const char *q = p + 1;
            while (*q == ' ' || *q == '\t') q++;
            if (*q == ',' || !*q) return 1;
            return 0;
        }
        /* Weak comparison (RFC 9110 §13.1.2): W/ ignored on either side. */
        const char *o;
        size_t ol;
        if (opaque_of(p, &o, &ol) != 0) return 0; /* malformed: no match, the full answer */
        if (ol == want_len && !memcmp(o, want, ol)) return 1;
        p = o + ol + 1;
        while (*p == ' ' || *p == '\t') p++;
        if (*p && *p != ',') return 0;
    }
}

/* The conditional headers of a request, however many lines they came on (If-None-Match lines
 * past the 8th are not looked at: at worst the full answer, never a wrong 304). */
typedef struct cond_headers {
    const char *inm[8]; /* If-None-Match lines */
    int n_inm;
    const char *ims; /* If-Modified-Since */
    int n_ims;
} cond_headers;

static enum MHD_Result collect_cond(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
    (void)kind;
    cond_headers *h = cls;
    if (!key || !value) return MHD_YES;
    if (!strcasecmp(key, MHD_HTTP_HEADER_IF_NONE_MATCH)) {
        if (h->n_inm < (int)(sizeof h->inm / sizeof h->inm[0])) h->inm[h->n_inm++] = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_IF_MODIFIED_SINCE)) {
        h->ims = value;
        h->n_ims++;
    }
    return MHD_YES;
}

/* RFC 9110 §13.2.2: If-None-Match decides when present; only without it does
 * If-Modified-Since (one valid HTTP-date) count. */
static int not_modified(struct MHD_Connection *mc, const char *etag, time_t mtime) {
    cond_headers h = { 0 };
    MHD_get_connection_values(mc, MHD_HEADER_KIND, collect_cond, &h);
    if (h.n_inm > 0) {
        for (int i = 0; i < h.n_inm; i++)
            if (kr_static_etag_matches(h.inm[i], etag)) return 1;
        return 0;
    }
    time_t since;
    if (h.n_ims == 1 && kr_http_date_parse(h.ims, &since) == 0) return mtime <= since;
    return 0;
}

/* ------------------------------------------------------------------ the handler */

/* Reads a whole regular file from fd (whose fstat is sb). Caller frees; NULL on failure. */
static char *read_fd(int fd, const struct stat *sb, size_t *len) {
    size_t want = (size_t)sb->st_size, got = 0;
    char *buf = malloc(want ? want : 1);
    while (buf && got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (buf && got != want) {
        free(buf);
        return NULL;
    }
    *len = got;
    return buf;
}

/* Headers every file answer carries, 200 and 304 alike. */
static void add_file_headers(struct MHD_Response *r, const char *etag, const char *last_modified) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_LAST_MODIFIED, last_modified);
    /* Revalidate every time: a rebuilt page shows up on the next reload (and an unchanged one
     * costs a 304). */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
}

/* GET / without a built page: a page a browser shows (status 404, as the file is missing)
 * that says how to build it, instead of a JSON error a person opening the server's address
 * cannot act on. */
static enum MHD_Result reply_not_built(struct MHD_Connection *mc, kr_conn *c, const char *root) {
    kr_sb sb = { 0 };
    kr_sb_append(&sb,
                 "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<title>kronos: the web page is not built</title></head>\n<body style=\"font:"
                 "16px/1.5 system-ui,sans-serif;max-width:46em;margin:3em auto;padding:0 1em\">\n"
                 "<h1>kronos is running; its web page is not built</h1>\n"
                 "<p>The API answers under <code>/v1/</code> (<a href=\"/health\">/health</a>, "
                 "<a href=\"/v1/models\">/v1/models</a>). The page it serves at <code>/</code> "
                 "is built from <code>web/</code> with Node.js:</p>\n<pre>cd web &amp;&amp; npm ci "
                 "&amp;&amp; npm run build</pre>\n<p>(<code>bash scripts/demo.sh</code> does it, "
                 "and <code>cmake --install</code> installs the built page), then reload. "
                 "kronos serve looked for it in <code>");
    kr_sb_append_html(&sb, root && *root ? root : "(no web root)");
    kr_sb_append(&sb, "</code>; <code>--web-root DIR</code> names another directory.</p>\n"
                      "</body></html>\n");
    char *body = NULL;
    kr_error err = { 0 };
    if (kr_sb_finish(&sb, &body, &err) != KR_OK)
        return kr_srv_reply_error(mc, c, 404, "the web page is not built", NULL);
    return kr_srv_reply(mc, c, 404, "text/html; charset=utf-8", body, strlen(body), NULL, NULL);
}

enum MHD_Result kr_handle_static(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    const char *root = c->srv->cfg.web_root;
    char path[PATH_MAX];
    if (kr_static_resolve(root, url, path, sizeof path) != 0) {
        if (!strcmp(url, "/")) return reply_not_built(mc, c, root);
        return kr_srv_reply_error(mc, c, 404, "no such file", NULL);
    }
    /* O_NOFOLLOW: the resolved path is final; a symlink swapped in since is not followed. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        (size_t)sb.st_size > KR_STATIC_MAX_BYTES) {
        if (fd >= 0) close(fd);
        return kr_srv_reply_error(mc, c, 404, "no such file", NULL);
    }
    char etag[96], last_modified[40];
    kr_static_etag(&sb, etag, sizeof etag);
    kr_http_date_format(sb.st_mtim.tv_sec, last_modified, sizeof last_modified);
    if (not_modified(mc, etag, sb.st_mtim.tv_sec)) {
        close(fd);
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        /* No body. libmicrohttpd 0.9.75 adds "Content-Length: 0" to it whatever is set
         * (a second, correct Content-Length would only duplicate the header); clients take a
         * 304 as bodiless regardless. */
        add_file_headers(r, etag, last_modified);
        return kr_srv_queue(mc, c, MHD_HTTP_NOT_MODIFIED, r, 0);
    }
    size_t len = 0;
    char *body = read_fd(fd, &sb, &len);
    close(fd);
    if (!body) return kr_srv_reply_error(mc, c, 404, "no such file", NULL);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, kr_static_content_type(path));
    add_file_headers(r, etag, last_modified);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (!strcmp(url, "/")) {
        MHD_add_response_header(r, "Content-Security-Policy", PAGE_CSP);
        MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    }
    kr_srv_hold_answer(c, len, 0, NULL, 0); /* read already: counted, never refused */
    return kr_srv_queue(mc, c, 200, r, len);
}
