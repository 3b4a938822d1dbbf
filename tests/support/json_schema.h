/*
 * A validator for the subset of JSON Schema the project's schemas use (type, required,
 * properties, additionalProperties as false or a schema, items, enum, minimum, maximum,
 * minItems, oneOf, $ref into $defs), for the tests that check a report against
 * docs/report.schema.json or docs/backtest.schema.json. A keyword outside the subset fails the
 * test (the validator must not pass what it does not check).
 */
#ifndef KR_TEST_JSON_SCHEMA_H
#define KR_TEST_JSON_SCHEMA_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* 1 if v matches schema s (root: the whole schema, for $ref), else 0 with msg naming the JSON
 * path (path: v's own, "$" at the top). */
int kr_test_schema_validate(const cJSON *root, const cJSON *s, const cJSON *v, const char *path,
                            char *msg, size_t cap);
/* The schema file, parsed; fails the test when it cannot be read or parsed. Caller frees it
 * (cJSON_Delete). */
cJSON *kr_test_schema_load(const char *path);

#endif
