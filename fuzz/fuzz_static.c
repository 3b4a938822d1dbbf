/*
 * fuzz_static — libFuzzer target for the web page's path resolver (server/static_files:
 * kr_static_resolve), which turns a request path into a file under the web root. A scratch
 * root is made once: index.html, assets/app.js, a hidden file, a directory and a symlink that
 * leads out of the root, and one to a hidden file. Whatever the path, a resolved file is a
 * regular file strictly inside the root, never hidden, never the outside file. The same bytes
 * go to the conditional-request parsers: an HTTP date that parses formats and parses back to
 * the same second, and an If-None-Match list never crashes the matcher ("*" always matches).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/static_files.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

static char g_root[PATH_MAX], g_outside[PATH_MAX];

static void put(const char *rel, const char *text) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    FILE *f = fopen(p, "w");
    if (f) fputs(text, f), fclose(f);
}

static void make_root(void) {
    char tmpl[] = "/tmp/kronos-fuzz-static-XXXXXX";
    if (!mkdtemp(tmpl)) abort();
    if (!realpath(tmpl, g_root)) abort();
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/assets", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/assets/dir", g_root);
    mkdir(p, 0755);
    put("index.html", "<!doctype html>");
    put("assets/app.js", "1");
    put("assets/.hidden", "secret");
    /* A file outside the root and a symlink inside pointing at it. */
    snprintf(g_outside, sizeof g_outside, "%s.outside", g_root);
    FILE *f = fopen(g_outside, "w");
    if (f) fputs("outside", f), fclose(f);
    snprintf(p, sizeof p, "%s/assets/out.js", g_root);
    if (symlink(g_outside, p) != 0) abort();
    snprintf(p, sizeof p, "%s/assets/visible.txt", g_root);
    if (symlink(".hidden", p) != 0) abort();
}

static void conditional(const char *text) {
    time_t t;
    if (kr_http_date_parse(text, &t) == 0) {
        char again[64];
        time_t u;
        kr_http_date_format(t, again, sizeof again);
        CHECK(kr_http_date_parse(again, &u) == 0 && u == t);
    }
    static const char etag[] = "W/\"1a-2b-3c\"";
    int m = kr_static_etag_matches(text, etag);
    CHECK(m == 0 || m == 1);
    if (!strcmp(text, "*")) CHECK(m == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_root[0]) make_root();
    char url[2048];
    size_t n = size < sizeof url - 1 ? size : sizeof url - 1;
    memcpy(url, data, n);
    url[n] = '\0'; /* libmicrohttpd hands the handler a C string: a NUL ends it */
    conditional(url);
    char out[PATH_MAX];
    if (kr_static_resolve(g_root, url, out, sizeof out) != 0) return 0;
    size_t rn = strlen(g_root);
    CHECK(!strncmp(out, g_root, rn) && out[rn] == '/');
    CHECK(strcmp(out, g_outside) != 0);
    CHECK(!strstr(out + rn, "/."));
    struct stat sb;
    CHECK(stat(out, &sb) == 0 && S_ISREG(sb.st_mode));
    return 0;
}
