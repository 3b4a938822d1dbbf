/*
 * server/static_files — the web page of `kronos serve`: GET / answers the web root's
 * index.html and GET /assets/<path> the files under <root>/assets (scripts, styles, the
 * chart library), read from disk on each request.
 *
 * The root is cfg.web_root (`kronos serve --web-root DIR`; the CLI defaults it to the
 * source tree's web/dist, built by `npm ci && npm run build` in web/). Only regular files
 * inside the root are served: a path with an empty, "." or ".." segment, a hidden name
 * (".git"), a backslash or a control character is refused, and so is a file whose real path
 * (symlinks resolved) leaves the root or has a hidden name below it. Every refusal and every
 * missing file is a plain 404, so the answer says nothing about what exists outside. Answers
 * carry a weak ETag and Last-Modified and honour If-None-Match / If-Modified-Since (304).
 */
#ifndef KR_SERVER_STATIC_FILES_H
#define KR_SERVER_STATIC_FILES_H

#include <stddef.h>
#include <time.h>

#include "server/server_internal.h"

/* Largest file served, bytes (the chart library is ~200 KB). */
#define KR_STATIC_MAX_BYTES ((size_t)16 << 20)

/* Maps a request path ("/" or "/assets/app.js") to the real path of a regular file inside
 * root, written to out (cap >= PATH_MAX). Returns 0, or 404 for anything refused or absent.
 * Pure apart from the file-system look-ups (realpath, stat). */
int kr_static_resolve(const char *root, const char *url, char *out, size_t cap);

/* The Content-Type for a file name, from its extension ("application/octet-stream" when
 * unknown). */
const char *kr_static_content_type(const char *path);

/* The weak ETag of a file from its fstat: W/"<inode>-<size>-<mtime s>.<ns>" in hex. */
struct stat;
void kr_static_etag(const struct stat *sb, char *out, size_t cap);

/* Whether an If-None-Match value (a list of entity tags, or "*") matches etag under the weak
 * comparison of RFC 9110 §13.1.2. A malformed list matches nothing (the full answer). */
int kr_static_etag_matches(const char *if_none_match, const char *etag);

/* An HTTP-date (IMF-fixdate, RFC 850 or asctime form) to Unix seconds: 0, or -1 when it is not
 * a valid date from 1970 on. */
int kr_http_date_parse(const char *s, time_t *out);
/* Unix seconds as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), locale-independent. */
void kr_http_date_format(time_t t, char *out, size_t cap);

/* The route handler (server.c): url is the decoded path without the query string. */
enum MHD_Result kr_handle_static(struct MHD_Connection *mc, kr_conn *c, const char *url);

#endif
