/*
 * net/redact_url — a URL without its credentials, for messages and reports (see
 * http_client.h). Its own file: it needs no libcurl, so a build without it
 * (KRONOS_WITH_CURL=OFF, http_client_none.c) has it too.
 */
#include <stdio.h>
#include <string.h>

#include "net/http_client.h"

void kr_http_redact_url(const char *url, char *out, size_t cap) {
    if (!cap) return;
    if (!url) url = "";
    const char *p = strstr(url, "://");
    if (p) {
        p += 3;
        size_t auth = strcspn(p, "/?#");
        const char *at = NULL;
        for (size_t i = 0; i < auth; i++)
            if (p[i] == '@') at = p + i;
        if (at) {
            snprintf(out, cap, "%.*s%s", (int)(p - url), url, at + 1);
            return;
        }
    }
    snprintf(out, cap, "%s", url);
}
