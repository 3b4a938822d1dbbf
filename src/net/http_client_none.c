/*
 * net/http_client_none — the HTTP client in a build without libcurl (-DKRONOS_WITH_CURL=OFF):
 * every client fails to open, naming the option, so `kronos pull` and the analyst's language-
 * model narrative say why they cannot run while the rest of the library works as ever.
 */
#include <stddef.h>

#include "base/error.h"
#include "net/http_client.h"

kr_status kr_http_client_create(const kr_http_options *opts, kr_http_client **out, kr_error *err) {
    (void)opts;
    if (out) *out = NULL;
    return kr_error_set(err, KR_ERR_UNSUPPORTED,
                        "built without libcurl (KRONOS_WITH_CURL=OFF): no HTTP client");
}

void kr_http_client_free(kr_http_client *c) { (void)c; }

kr_status kr_http_perform(kr_http_client *c, const kr_http_request *rq, kr_http_response *rs,
                          kr_error *err) {
    (void)c;
    (void)rq;
    if (rs) *rs = (kr_http_response){ 0 };
    return kr_error_set(err, KR_ERR_UNSUPPORTED,
                        "built without libcurl (KRONOS_WITH_CURL=OFF): no HTTP client");
}
