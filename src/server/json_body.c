/*
 * server/json_body — request body to JSON document (see json_body.h).
 */
#include "server/json_body.h"

kr_status kr_json_body_parse(const char *json, size_t len, cJSON **root, kr_api_error *err) {
    *root = NULL;
    if (!json || len == 0) {
        kr_api_error_set(err, 400, "body", "empty; expected JSON");
        return KR_ERR_FORMAT;
    }
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (*root) return KR_OK;
    size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : len;
    long line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (json[i] == '\n')
            line++, col = 1;
        else
            col++;
    }
    kr_api_error_set(err, 400, "body", "invalid JSON at line %ld, column %ld (byte %zu)", line, col,
                     off);
    return KR_ERR_FORMAT;
}
