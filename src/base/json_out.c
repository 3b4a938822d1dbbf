/*
 * base/json_out — cJSON additions shared by the JSON writers (header comment).
 */
#include "base/json_out.h"

#include <math.h>

#include "base/timeutil.h"

void kr_json_add_num(cJSON *o, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

void kr_json_add_str_or_null(cJSON *o, const char *key, const char *s) {
    if (s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

void kr_json_add_time(cJSON *o, const char *key, int64_t t, int date_only) {
    char b[32]; /* as every writer had it: a date-time of any int64 fits */
    cJSON_AddStringToObject(o, key, kr_format_timestamp(t, date_only, b, sizeof b));
}
