/*
 * server/static_files — files of the web page from the web root (see static_files.h).
 *
 * The path check works on the decoded URL (libmicrohttpd has already turned %2e%2e into
 * ".."; a %00 ends the string, so "app.js%00.css" is simply app.js, served as what it is),
 * segment by segment, then on the resolved file: the lexical check keeps ".." and hidden
 * names from reaching the file system at all, the realpath check catches symlinks inside
 * the root that point out of it. Files are read whole per request: the page is a handful
 * of small files, and nothing is cached that a rebuild would have to invalidate.
 */
#include "server/static_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Reads a whole regular file (the resolved path; O_NOFOLLOW in case it was swapped for a
 * symlink since). Caller frees; NULL on failure. */
static char *read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    char *buf = NULL;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (size_t)sb.st_size <= KR_STATIC_MAX_BYTES) {
        size_t want = (size_t)sb.st_size, got = 0;
        buf = malloc(want ? want : 1);
        while (buf && got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (buf && got != want) {
            free(buf);
            buf = NULL;
        }
        *len = got;
    }
    close(fd);
    return buf;
}

enum MHD_Result kr_handle_static(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    const char *root = c->srv->cfg.web_root;
    char path[PATH_MAX];
    if (kr_static_resolve(root, url, path, sizeof path) != 0) {
        if (!strcmp(url, "/"))
            return kr_srv_reply_error(mc, c, 404,
                                      "the web page is not built: run 'npm ci && npm "
                                      "run build' in web/, or start kronos serve with "
                                      "--web-root DIR",
                                      NULL);
        return kr_srv_reply_error(mc, c, 404, "no such file", NULL);
    }
    size_t len = 0;
    char *body = read_file(path, &len);
    if (!body) return kr_srv_reply_error(mc, c, 404, "no such file", NULL);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, kr_static_content_type(path));
    /* Revalidate every time: a rebuilt page shows up on the next reload. */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (!strcmp(url, "/")) {
        MHD_add_response_header(r, "Content-Security-Policy", PAGE_CSP);
        MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    }
    return kr_srv_queue(mc, c, 200, r, len);
}
