/*
 * server/json_body — a request body's bytes to a JSON document, the same way on every JSON
 * route: an empty body, a syntax error (named by line, column and byte) and anything after
 * the document are 400s on the field "body".
 * Pure: no I/O, no globals.
 */
#ifndef KR_SERVER_JSON_BODY_H
#define KR_SERVER_JSON_BODY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "server/fields.h"

/* Parses len bytes (need not be NUL-terminated). On success the caller owns *root
 * (cJSON_Delete). On failure *root is NULL, err names "body" (status 400) and the return
 * value is KR_ERR_FORMAT. */
kr_status kr_json_body_parse(const char *json, size_t len, cJSON **root, kr_api_error *err);

#endif
