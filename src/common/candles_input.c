/*
 * common/candles_input — a front end's candle input: file or stdin, CSV or JSON (see
 * candles_input.h).
 */
#include "common/candles_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "common/candles_json.h"

kr_status kr_read_stream(FILE *stream, size_t max, const char *what, char **out, size_t *len,
                         kr_error *err) {
    size_t n = 0, sz = 65536;
    char *buf = malloc(sz + 1);
    if (!buf) return kr_error_set(err, KR_ERR_NOMEM, "out of memory reading %s", what);
    for (;;) {
        if (n > max) { /* one byte past the limit is enough to know */
            free(buf);
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s is larger than %zu bytes", what, max);
        }
        if (n == sz) {
            /* Grown to at most max + 1 bytes: doubling past it held 2 GiB for a 1 GiB limit. */
            const size_t grown = sz > max / 2 ? max + 1 : sz * 2;
            char *nb = realloc(buf, grown + 1);
            if (!nb) {
                free(buf);
                return kr_error_set(err, KR_ERR_NOMEM, "out of memory reading %s", what);
            }
            buf = nb;
            sz = grown;
        }
        size_t got = fread(buf + n, 1, sz - n, stream);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stream)) {
        free(buf);
        return kr_error_set(err, KR_ERR_IO, "cannot read %s", what);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return KR_OK;
}

/* Whether the file's first byte after white space (and a UTF-8 BOM) is '{' or '['. An
 * unreadable file, or one that is not a regular file (a FIFO would block the open until a
 * writer came), answers no and is left to the CSV reader to report. */
static int starts_like_json(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char head[256];
    size_t n = fread(head, 1, sizeof head, f), i = 0;
    fclose(f);
    if (n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF) i = 3;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) i++;
    return i < n && (head[i] == '{' || head[i] == '[');
}

kr_status kr_candles_load(const char *path, kr_candles **out, kr_error *err) {
    *out = NULL;
    const int from_stdin = !strcmp(path, "-");
    const char *label = from_stdin ? "stdin" : path;
    const size_t n = strlen(path);
    const int json = n > 5 && !strcmp(path + n - 5, ".json");
    if (!from_stdin && !json && !starts_like_json(path)) return kr_candles_read_csv(path, out, err);
    char *text = NULL;
    size_t len = 0;
    kr_status st =
        from_stdin ? kr_read_stream(stdin, KR_CANDLE_INPUT_MAX, "standard input", &text, &len, err)
                   : kr_read_file(path, KR_CANDLE_INPUT_MAX, "candle file", &text, &len, err);
    if (st != KR_OK) return st;
    st = kr_candles_parse_text(text, len, label, out, err);
    free(text);
    return st;
}

kr_status kr_input_read_file(const char *path, size_t max_bytes, const char *what, char **out,
                             size_t *len, kr_error *err) {
    return kr_read_file(path, max_bytes, what, out, len, err);
}
