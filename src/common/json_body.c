/*
 * common/json_body — request body to JSON document (see json_body.h).
 *
 * The scan is a tokenizer, not a validator: it follows strings (with their escapes) and the
 * container structure closely enough to count values and to name the JSON path of a bad
 * string, and leaves grammar to cJSON. Path bookkeeping is a fixed stack of the open
 * containers (kind, element index, the current key as a span of the input), so the scan
 * allocates nothing whatever the body holds.
 */
#include "common/json_body.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"

typedef struct level {
    char kind; /* '{' or '[' */
    int expect_key; /* object: the next string is a key */
    size_t index; /* element number in this container */
    const char *key; /* object: the current member's key (raw bytes, no quotes) */
    size_t key_len;
} level;

/* "candles[3].high": the path to the element the scan is in. */
static void path_of(const level *stack, int depth, char *out, size_t cap) {
    kr_sb sb = { 0 };
    char raw[96], safe[96];
    for (int d = 0; d < depth; d++) {
        if (stack[d].kind == '[') {
            kr_sb_appendf(&sb, "[%zu]", stack[d].index);
        } else if (stack[d].key) {
            size_t n = stack[d].key_len < sizeof raw - 1 ? stack[d].key_len : sizeof raw - 1;
            memcpy(raw, stack[d].key, n);
            raw[n] = '\0';
            kr_sb_appendf(&sb, "%s%s", d ? "." : "", kr_json_sanitize(raw, safe, sizeof safe));
        }
    }
    snprintf(out, cap, "%s", sb.data && sb.data[0] ? sb.data : "body");
    kr_sb_free(&sb);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

kr_status kr_json_body_scan(const char *json, size_t len, const kr_json_limits *lim,
                            kr_json_scan *out, kr_api_error *err) {
    memset(out, 0, sizeof *out);
    level stack[KR_JSON_MAX_DEPTH];
    int depth = 0;
    char field[160];
    const size_t max_values = lim ? lim->max_values : 0;
    size_t i = 0;
    while (i < len) {
        const char c = json[i];
        if (is_space(c) || c == ':' || c == ',') {
            if (depth > 0 && c == ',') {
                stack[depth - 1].index++;
                if (stack[depth - 1].kind == '{') stack[depth - 1].expect_key = 1;
            }
            if (depth > 0 && c == ':') stack[depth - 1].expect_key = 0;
            i++;
            continue;
        }
        if (c == '}' || c == ']') {
            if (depth == 0) break; /* unbalanced: the parser says where */
            depth--;
            i++;
            continue;
        }
        const int is_key = depth > 0 && stack[depth - 1].kind == '{' && stack[depth - 1].expect_key;
        if (!is_key) {
            out->values++;
            if (max_values && out->values > max_values) {
                kr_api_error_set(err, 413, "body",
                                 "holds more than %zu JSON values, more than a candle history "
                                 "can use%s%s%s; send fewer candles",
                                 max_values, lim->values_key ? " (the limit follows from " : "",
                                 lim->values_key ? lim->values_key : "",
                                 lim->values_key ? ")" : "");
                return KR_ERR_INVALID_ARG;
            }
        }
        if (c == '{' || c == '[') {
            if (depth == KR_JSON_MAX_DEPTH) {
                path_of(stack, depth, field, sizeof field);
                kr_api_error_set(err, 400, field, "nests deeper than %d levels", KR_JSON_MAX_DEPTH);
                return KR_ERR_INVALID_ARG;
            }
            stack[depth++] = (level){ c, c == '{', 0, NULL, 0 };
            if (depth > out->max_depth) out->max_depth = depth;
            i++;
            continue;
        }
        if (c == '"') {
            const size_t start = ++i;
            while (i < len && json[i] != '"') {
                const unsigned char b = (unsigned char)json[i];
                int nul = 0;
                if (b < 0x20) {
                    nul = 1;
                } else if (b == '\\') {
                    /* \u0000 (any case of hex digits): a NUL that C strings would end at. */
                    if (i + 5 < len && json[i + 1] == 'u' && !memcmp(json + i + 2, "0000", 4))
                        nul = 1;
                    /* A line end in CSV text: "\\n", or a "\\r" not followed by "\\n" (the
                     * reader takes a bare CR as one too). */
                    const int line_end =
                        i + 1 < len &&
                        (json[i + 1] == 'n' ||
                         (json[i + 1] == 'r' &&
                          !(i + 3 < len && json[i + 2] == '\\' && json[i + 3] == 'n')));
                    if (line_end && !is_key &&
                        ++out->string_lines > (lim && lim->max_lines ? lim->max_lines : SIZE_MAX)) {
                        kr_api_error_set(err, 413, "body",
                                         "holds CSV text of more than %zu lines%s%s%s; send "
                                         "fewer candles",
                                         lim->max_lines, lim->values_key ? " (" : "",
                                         lim->values_key ? lim->values_key : "",
                                         lim->values_key ? ")" : "");
                        return KR_ERR_INVALID_ARG;
                    }
                    i++; /* the escaped byte is never the closing quote */
                }
                if (nul) {
                    if (is_key) {
                        stack[depth - 1].key = json + start;
                        stack[depth - 1].key_len = i - start;
                    }
                    path_of(stack, depth, field, sizeof field);
                    kr_api_error_set(err, 400, field,
                                     "%s a %s character; strings in a request must not hold "
                                     "one",
                                     is_key ? "a key holds" : "holds",
                                     b < 0x20 && b != '\\' ? "raw control" : "NUL (\\u0000)");
                    return KR_ERR_INVALID_ARG;
                }
                i++;
            }
            out->strings++;
            out->string_bytes += i - start;
            if (is_key) {
                stack[depth - 1].key = json + start;
                stack[depth - 1].key_len = i - start;
            }
            i++; /* the closing quote */
            continue;
        }
        /* A number or a literal: up to the next delimiter. */
        while (i < len && !is_space(json[i]) && json[i] != ',' && json[i] != ']' &&
               json[i] != '}' && json[i] != ':')
            i++;
    }
    return KR_OK;
}

size_t kr_json_scan_tree_bytes(const kr_json_scan *s) {
    /* A node per value plus malloc's chunk overhead; a key or string value is one more
     * allocation (at least a 32-byte chunk) holding its bytes. */
    const size_t node = sizeof(cJSON) + 16;
    return s->values * node + s->strings * 32 + s->string_bytes +
           s->string_lines * (size_t)KR_CSV_ROW_BYTES;
}

size_t kr_csv_lines(const char *text, size_t len) {
    /* Line ends as the CSV reader takes them: "\n", "\r\n" and a bare "\r" (old Mac files),
     * so a body of bare "\r"s is not one line that slips past max_rows. */
    size_t n = 0;
    int open = 0; /* bytes since the last line end */
    for (size_t i = 0; i < len; i++) {
        const char b = text[i];
        if (b == '\n' || (b == '\r' && (i + 1 == len || text[i + 1] != '\n'))) {
            n++;
            open = 0;
        } else if (b != '\r') {
            open = 1;
        }
    }
    return n + (size_t)open;
}

static void position(const char *json, size_t off, long *line, long *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (json[i] == '\n')
            (*line)++, *col = 1;
        else
            (*col)++;
    }
}

kr_status kr_json_body_parse(const char *json, size_t len, const kr_json_limits *lim, cJSON **root,
                             kr_api_error *err) {
    *root = NULL;
    if (!json || len == 0) {
        kr_api_error_set(err, 400, "body", "empty; expected JSON");
        return KR_ERR_FORMAT;
    }
    kr_json_scan scan;
    if (kr_json_body_scan(json, len, lim, &scan, err) != KR_OK) return KR_ERR_FORMAT;
    const char *end = NULL;
    long line, col;
    *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!*root) {
        size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : len;
        position(json, off, &line, &col);
        kr_api_error_set(err, 400, "body", "invalid JSON at line %ld, column %ld (byte %zu)", line,
                         col, off);
        return KR_ERR_FORMAT;
    }
    /* One document per body: "{...}xyz" is not a request with a comment. */
    size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : len;
    while (off < len && is_space(json[off])) off++;
    if (off < len) {
        cJSON_Delete(*root);
        *root = NULL;
        position(json, off, &line, &col);
        kr_api_error_set(err, 400, "body",
                         "unexpected bytes after the JSON document at line %ld, column %ld "
                         "(byte %zu)",
                         line, col, off);
        return KR_ERR_FORMAT;
    }
    return KR_OK;
}

kr_status kr_json_body_failed(cJSON *root, kr_api_error *err, kr_status st) {
    cJSON_Delete(root);
    if (!err->status) err->status = 400;
    return st == KR_OK ? KR_ERR_INVALID_ARG : st;
}
