/* tests/support/json_schema — see json_schema.h. */
#include "json_schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static int type_ok(const char *t, const cJSON *v) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    fail_msg("schema uses unknown type '%s'", t);
    return 0;
}

static const char *g_known[] = { "$schema",  "$id",      "title",      "description",
                                 "type",     "required", "properties", "additionalProperties",
                                 "items",    "enum",     "minimum",    "maximum",
                                 "minItems", "oneOf",    "$ref",       "$defs" };

/* Returns 1 if v matches schema s, else 0 with a message naming the JSON path. */
int kr_test_schema_validate(const cJSON *root, const cJSON *s, const cJSON *v, const char *path,
                            char *msg, size_t cap) {
    for (const cJSON *k = s->child; k; k = k->next) {
        int known = 0;
        for (size_t i = 0; i < sizeof g_known / sizeof g_known[0]; i++)
            known |= !strcmp(k->string, g_known[i]);
        if (!known)
            fail_msg("schema keyword '%s' at %s is not supported by the test validator", k->string,
                     path);
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        const char *p = ref->valuestring;
        assert_true(!strncmp(p, "#/$defs/", 8));
        const cJSON *target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(root, "$defs"), p + 8);
        if (!target) fail_msg("unresolved $ref %s", p);
        return kr_test_schema_validate(root, target, v, path, msg, cap);
    }
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (one) {
        int matches = 0;
        char sub[512];
        for (const cJSON *alt = one->child; alt; alt = alt->next)
            matches += kr_test_schema_validate(root, alt, v, path, sub, sizeof sub);
        if (matches != 1) {
            snprintf(msg, cap, "%s: matches %d of the oneOf alternatives (last: %s)", path, matches,
                     sub);
            return 0;
        }
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (type) {
        int ok = 0;
        if (cJSON_IsString(type))
            ok = type_ok(type->valuestring, v);
        else
            for (const cJSON *t = type->child; t; t = t->next) ok |= type_ok(t->valuestring, v);
        if (!ok) {
            char *txt = cJSON_PrintUnformatted(v);
            snprintf(msg, cap, "%s: wrong type (%.80s)", path, txt ? txt : "?");
            free(txt);
            return 0;
        }
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        int ok = 0;
        for (const cJSON *e = en->child; e; e = e->next) ok |= cJSON_Compare(e, v, 1);
        if (!ok) {
            snprintf(msg, cap, "%s: not one of the enum values", path);
            return 0;
        }
    }
    if (cJSON_IsNumber(v)) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum"),
                    *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
        if ((mn && v->valuedouble < mn->valuedouble) || (mx && v->valuedouble > mx->valuedouble)) {
            snprintf(msg, cap, "%s: %g out of range", path, v->valuedouble);
            return 0;
        }
    }
    if (cJSON_IsObject(v)) {
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        for (const cJSON *k = req ? req->child : NULL; k; k = k->next)
            if (!cJSON_GetObjectItemCaseSensitive(v, k->valuestring)) {
                snprintf(msg, cap, "%s: missing required key '%s'", path, k->valuestring);
                return 0;
            }
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        for (const cJSON *m = v->child; m; m = m->next) {
            const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
            char sub[512];
            snprintf(sub, sizeof sub, "%s.%s", path, m->string);
            if (!ps) {
                if (addl && cJSON_IsFalse(addl)) {
                    snprintf(msg, cap, "%s: key not in the schema", sub);
                    return 0;
                }
                /* additionalProperties as a schema: every other key's value must match it. */
                if (addl && cJSON_IsObject(addl) &&
                    !kr_test_schema_validate(root, addl, m, sub, msg, cap))
                    return 0;
                continue;
            }
            if (!kr_test_schema_validate(root, ps, m, sub, msg, cap)) return 0;
        }
    }
    if (cJSON_IsArray(v)) {
        const cJSON *mi = cJSON_GetObjectItemCaseSensitive(s, "minItems");
        if (mi && cJSON_GetArraySize(v) < mi->valueint) {
            snprintf(msg, cap, "%s: fewer than %d items", path, mi->valueint);
            return 0;
        }
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        int i = 0;
        for (const cJSON *e = v->child; e && items; e = e->next, i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            if (!kr_test_schema_validate(root, items, e, sub, msg, cap)) return 0;
        }
    }
    return 1;
}

cJSON *kr_test_schema_load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    if (n == sizeof buf - 1) fail_msg("%s: larger than the test's buffer", path);
    buf[n] = 0;
    cJSON *s = cJSON_Parse(buf);
    if (!s) fail_msg("%s does not parse near: %.40s", path, cJSON_GetErrorPtr());
    return s;
}
