/*
 * server/auth — API key file and bearer-token check (see auth.h).
 */
#include "server/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/fsutil.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

kr_status kr_auth_parse_key(const char *text, size_t len, const char *label, char *key, size_t cap,
                            kr_error *err) {
    /* The first line; a NUL ends it too (a C string could not carry what follows). */
    size_t end = 0;
    while (end < len && text[end] != '\n' && text[end] != '\0') end++;
    size_t a = 0, b = end;
    while (a < b && is_space(text[a])) a++;
    while (b > a && is_space(text[b - 1])) b--;
    const size_t n = b - a;
    if (n == 0) return kr_error_set(err, KR_ERR_FORMAT, "%s: the API key is empty", label);
    if (n >= cap)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: the API key is longer than %zu bytes", label,
                            cap - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)text[a + i] < 0x20 || text[a + i] == 0x7f)
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: the API key contains a control character at byte %zu", label,
                                i + 1);
    memcpy(key, text + a, n);
    key[n] = '\0';
    return KR_OK;
}

kr_status kr_auth_load_key_file(const char *path, char *key, size_t cap, kr_error *err) {
    char *text = NULL;
    size_t len = 0;
    kr_status st = kr_read_file(path, 4096, "API key file", &text, &len, err);
    if (st != KR_OK) return st;
    st = kr_auth_parse_key(text, len, path, key, cap, err);
    free(text);
    return st;
}

int kr_auth_key_file_exposed(const char *path, char *msg, size_t cap) {
    struct stat sb;
    if (!path || !*path || stat(path, &sb) != 0 || !(sb.st_mode & S_IROTH)) return 0;
    snprintf(msg, cap,
             "WARNING: API key file %s is readable by every user of this machine (mode %04o): "
             "chmod o-r it (deploy/README.md: 0640, group of the service user)",
             path, (unsigned)(sb.st_mode & 07777));
    return 1;
}

int kr_auth_equal(const char *a, size_t alen, const char *b, size_t blen) {
    /* Walk the expected key's full length whatever the candidate is, folding every byte
     * difference and the length difference into one accumulator. */
    unsigned char acc = (unsigned char)(alen != blen);
    for (size_t i = 0; i < blen; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        acc |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return acc == 0;
}

int kr_auth_check(const char *authorization, const char *key) {
    if (!key || !*key) return 1;
    if (!authorization) return 0;
    const char *s = authorization;
    while (*s == ' ' || *s == '\t') s++;
    if (strncasecmp(s, "Bearer", 6) != 0 || (s[6] != ' ' && s[6] != '\t')) return 0;
    s += 6;
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return kr_auth_equal(s, n, key, strlen(key));
}
