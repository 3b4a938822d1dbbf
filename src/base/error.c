/* base/error — see error.h. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kr_strerror(kr_status status) {
    switch (status) {
    case KR_OK: return "ok";
    case KR_ERR_INVALID_ARG: return "invalid argument";
    case KR_ERR_IO: return "i/o error";
    case KR_ERR_FORMAT: return "malformed input";
    case KR_ERR_MODEL: return "invalid model";
    case KR_ERR_NOMEM: return "out of memory";
    case KR_ERR_UNSUPPORTED: return "unsupported";
    case KR_ERR_INTERNAL: return "internal error";
    case KR_ERR_CANCELLED: return "cancelled";
    case KR_ERR_BUSY: return "busy";
    case KR_ERR_TIMEOUT: return "timed out";
    case KR_ERR_UNAVAILABLE: return "unavailable";
    case KR_ERR_NUMERIC: return "a computation produced NaN or infinity";
    }
    return "unknown error";
}

kr_status kr_error_set(kr_error *err, kr_status status, const char *fmt, ...) {
    if (err) {
        err->status = status;
        err->field[0] = '\0';
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

kr_status kr_error_set_field(kr_error *err, kr_status status, const char *field, const char *fmt,
                             ...) {
    if (err) {
        err->status = status;
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

void kr_error_prefix(kr_error *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->message];
    memcpy(old, err->message, sizeof old);
    snprintf(err->message, sizeof err->message, "%s: %s", prefix, old);
}

void kr_error_clear(kr_error *err) {
    if (!err) return;
    err->status = KR_OK;
    err->message[0] = '\0';
}
