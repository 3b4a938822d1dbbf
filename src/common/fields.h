/*
 * common/fields — the JSON request-field readers every route uses: a request body's top-level
 * object is read against a table of named field descriptors (name, type, range, required),
 * so each route states its fields once and every route answers the same way:
 *   - an unknown field is an error listing the route's fields (a typo such as "pred_length"
 *     never silently becomes a default), a field given twice is an error;
 *   - null, like an absent field, means "the default": the reader leaves the destination as
 *     the caller initialised it (from the engine's default parameters, one place);
 *   - every error names the field and starts its message with it ("paths: must be an integer
 *     in 1..256, got 300"), and a limit that comes from the server's configuration names the
 *     config key ("(max_horizon)") so a client knows which cap it hit.
 * The same readers take one value at a time (kr_field_read_value) for array elements
 * ("quantiles[3]"). Pure: no I/O, no globals.
 */
#ifndef KR_COMMON_FIELDS_H
#define KR_COMMON_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kronos.h"

/* An HTTP-facing error: the status to send, the offending JSON field ("" when the error is
 * not about one field) and a message that starts with that field. */
typedef struct kr_api_error {
    int status;
    char field[128];
    char message[512];
} kr_api_error;

/* Sets err to status with a field and a printf message (the message gets "field: " in front
 * when field is non-empty). Returns KR_ERR_INVALID_ARG for convenience. */
kr_status kr_api_error_set(kr_api_error *err, int status, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

typedef enum kr_field_type {
    KR_FIELD_INT, /* int *: an integer in [min, max] */
    KR_FIELD_NUMBER, /* double *: a finite number in [min, max] ((min, max] with MIN_EXCL) */
    KR_FIELD_FLOAT, /* float *: as NUMBER, and with MIN_EXCL still > min once in float32 */
    KR_FIELD_BOOL, /* int *: true 1, false 0 */
    KR_FIELD_SEED, /* uint64_t *: an integer in 0..2^53 or a decimal string up to 2^64 - 1 */
    KR_FIELD_CHOICE, /* int *: index into choices of the string given */
    KR_FIELD_VALUE /* const cJSON **: any value; the route reads it (arrays, candles, names) */
} kr_field_type;

enum {
    KR_FIELD_REQUIRED = 1 << 0, /* absent or null: "required" */
    KR_FIELD_MIN_EXCL = 1 << 1 /* NUMBER/FLOAT: the lower bound is exclusive */
};

typedef struct kr_field {
    const char *name;
    kr_field_type type;
    void *out; /* destination (type above); untouched when the field is absent or null */
    double min, max; /* INT, NUMBER, FLOAT */
    unsigned flags;
    const char *const *choices; /* CHOICE: NULL-terminated list of accepted strings */
    const char *max_key; /* the config key max comes from ("max_paths"), named in errors */
    int present; /* set by kr_fields_read: given and not null */
} kr_field;

/* Field descriptors, one line per field in a route's table. */
#define KR_F_INT(nm, dst, lo, hi, fl) \
    { .name = (nm), .type = KR_FIELD_INT, .out = (dst), .min = (lo), .max = (hi), .flags = (fl) }
#define KR_F_NUM(nm, dst, lo, hi, fl) \
    { .name = (nm), .type = KR_FIELD_NUMBER, .out = (dst), .min = (lo), .max = (hi), .flags = (fl) }
#define KR_F_FLOAT(nm, dst, lo, hi, fl) \
    { .name = (nm), .type = KR_FIELD_FLOAT, .out = (dst), .min = (lo), .max = (hi), .flags = (fl) }
#define KR_F_BOOL(nm, dst) \
    { .name = (nm), .type = KR_FIELD_BOOL, .out = (dst) }
#define KR_F_SEED(nm, dst) \
    { .name = (nm), .type = KR_FIELD_SEED, .out = (dst) }
#define KR_F_CHOICE(nm, dst, list) \
    { .name = (nm), .type = KR_FIELD_CHOICE, .out = (dst), .choices = (list) }
#define KR_F_VALUE(nm, dst, fl) \
    { .name = (nm), .type = KR_FIELD_VALUE, .out = (dst), .flags = (fl) }

/* Reads obj (must be a JSON object; anything else is a 400 on "body") against fields[n]:
 * unknown and duplicate keys are errors, then every field present is converted into its
 * destination in table order, and a missing required field is an error. On error err names
 * the field (status 400) and the return value is KR_ERR_INVALID_ARG; destinations of fields
 * before the failing one may have been written. */
kr_status kr_fields_read(const cJSON *obj, kr_field *fields, int n, kr_api_error *err);

/* Converts one value with a descriptor (f->name is the name used in errors, e.g.
 * "quantiles[2]"); v NULL or null counts as absent. */
kr_status kr_field_read_value(const kr_field *f, const cJSON *v, kr_api_error *err);

/* "a number", "a string", "null", ... for messages; "nothing" for NULL. */
const char *kr_json_type_name(const cJSON *v);

/* A printable, bounded copy of client text for messages and field names: bytes outside
 * printable ASCII, quotes and backslashes become '?', and a cut is marked "...". */
const char *kr_json_sanitize(const char *s, char *out, size_t cap);

#endif
