/*
 * kronos/status.h — the status codes and error detail every kronos function reports with.
 *
 * Its own small header so that the lowest layers (and programs that only pass errors along)
 * need not include the whole API: kronos.h includes it.
 *   - Every fallible function returns a kr_status: 0 ok, negative on error.
 *   - Detail goes into a caller-supplied kr_error (may be NULL); there is no global error
 *     state. The message names the place: file, row, field, tensor, request.
 */
#ifndef KRONOS_STATUS_H
#define KRONOS_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the shared library's public API: the library is built with hidden visibility, so
 * only KR_API functions are exported from libkronos.so. */
#if defined(__GNUC__)
#define KR_API __attribute__((visibility("default")))
#else
#define KR_API
#endif

/* Marks a function of a header under src/ (not installed) that a kronos shared library exports
 * all the same, for kronos' own code above it: libkronos.so for libkronos-tools.so, and
 * libkronos-tools.so for the kronos binary (the front ends' common/ routines). No API or ABI
 * promise: such a function may change in any release. tests/install/test_install.sh checks that
 * every export is KR_API in a public header or KR_PRIVATE in src/. */
#define KR_PRIVATE KR_API

typedef enum kr_status {
    KR_OK = 0,
    KR_ERR_INVALID_ARG = -1, /* a parameter is out of range or inconsistent */
    KR_ERR_IO = -2, /* a file could not be opened, read, mapped or written */
    KR_ERR_FORMAT = -3, /* malformed file or input data (CSV, JSON, safetensors) */
    KR_ERR_MODEL = -4, /* a checkpoint lacks a tensor or has the wrong shape/dtype */
    KR_ERR_NOMEM = -5, /* an allocation failed */
    KR_ERR_UNSUPPORTED = -6, /* valid but not supported by this build */
    KR_ERR_INTERNAL = -7, /* a broken invariant: a bug, please report */
    KR_ERR_CANCELLED = -8, /* the caller cancelled the operation */
    KR_ERR_BUSY = -9, /* a queue or memory budget is full: retry later */
    KR_ERR_TIMEOUT = -10, /* a deadline passed before the work finished */
    KR_ERR_UNAVAILABLE = -11, /* a server it needs (the store's database) is down or
                                 unreachable: retry later */
    KR_ERR_NUMERIC = -12 /* a computation produced NaN or infinity (a training step's
                            gradients); nothing was updated */
} kr_status;

/* Caller-supplied error detail. `message` names the place: file, row, field, tensor. `field`
 * is the request parameter or input field at fault when there is one ("pred_len", "lookback",
 * "candles", "future_timestamps"), set by the code that checks it (kr_error_set_field), else
 * "": a server answers 400 naming it, without reading the message. */
typedef struct kr_error {
    kr_status status;
    char message[512];
    char field[64];
} kr_error;

/* Static string for a status code ("invalid argument", ...). Never NULL. */
KR_API const char *kr_strerror(kr_status status);

#if defined(__GNUC__)
#define KR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KR_PRINTF(a, b)
#endif

/* Sets err (if non-NULL) to status and a printf-formatted message; returns status so a
 * caller can write `return kr_error_set(err, KR_ERR_FORMAT, "%s: row %d ...", ...);`. For
 * programs that report their own failures the way the library does. */
KR_API kr_status kr_error_set(kr_error *err, kr_status status, const char *fmt, ...)
    KR_PRINTF(3, 4);

/* kr_error_set naming the field at fault (err->field; "" by kr_error_set). */
KR_API kr_status kr_error_set_field(kr_error *err, kr_status status, const char *field,
                                    const char *fmt, ...) KR_PRINTF(4, 5);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_STATUS_H */
