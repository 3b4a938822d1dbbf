/*
 * common/build_info — what the build is, for `kronos version` and bug reports: its version,
 * the commit and build type it was configured from, the CPU's kernel rows and the versions of
 * the libraries it runs with (asked at run time: a distribution upgrade changes them), those
 * the build's options brought in only. In libkronos-tools, which links every one of them.
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#if KRONOS_WITH_PG
#include <libpq-fe.h>
#endif
#if KRONOS_BUILD_SERVER
#include <microhttpd.h>
#endif
#if KRONOS_WITH_SQLITE
#include <sqlite3.h>
#endif
#if KRONOS_WITH_CURL
#include <curl/curl.h>
#endif

#include "kernels/kernels.h"
#include "kronos.h"
#include "kronos/build_info.h"

#ifndef KRONOS_GIT_COMMIT
#define KRONOS_GIT_COMMIT "unknown"
#endif
#ifndef KRONOS_BUILD_TYPE
#define KRONOS_BUILD_TYPE "unknown"
#endif

void kr_get_build_info(kr_build_info *out) {
    static char supported[64], libraries[256], compiler[64];
    memset(out, 0, sizeof *out);
    out->version = kr_version();
    out->git_commit = KRONOS_GIT_COMMIT[0] ? KRONOS_GIT_COMMIT : "unknown";
    out->build_type = KRONOS_BUILD_TYPE[0] ? KRONOS_BUILD_TYPE : "unknown";
#if defined(__clang__)
    snprintf(compiler, sizeof compiler, "clang %d.%d.%d", __clang_major__, __clang_minor__,
             __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(compiler, sizeof compiler, "gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__,
             __GNUC_PATCHLEVEL__);
#else
    snprintf(compiler, sizeof compiler, "unknown");
#endif
    out->compiler = compiler;
    out->isa_active = kr_isa_name(kr_isa_active());
    size_t len = 0;
    supported[0] = '\0';
    for (int i = 0; i < KR_ISA_COUNT; i++)
        if (kr_isa_supported((kr_isa)i))
            len += (size_t)snprintf(supported + len, sizeof supported - len, "%s%s", len ? " " : "",
                                    kr_isa_name((kr_isa)i));
    out->isa_supported = supported;
    len = (size_t)snprintf(libraries, sizeof libraries, "cJSON %s", cJSON_Version());
#if KRONOS_WITH_SQLITE
    len += (size_t)snprintf(libraries + len, sizeof libraries - len, ", SQLite %s",
                            sqlite3_libversion());
#endif
#if KRONOS_WITH_PG
    const int pq = PQlibVersion();
    len += (size_t)snprintf(libraries + len, sizeof libraries - len, ", libpq %d.%d", pq / 10000,
                            pq % 10000);
#endif
#if KRONOS_WITH_CURL
    len += (size_t)snprintf(libraries + len, sizeof libraries - len, ", libcurl %s",
                            curl_version_info(CURLVERSION_NOW)->version);
#endif
#if KRONOS_BUILD_SERVER
    len += (size_t)snprintf(libraries + len, sizeof libraries - len, ", libmicrohttpd %s",
                            MHD_get_version());
#endif
    (void)len;
    out->libraries = libraries;
}
