/*
 * fuzz_hub_headers — libFuzzer target for the hub client's response-header handling
 * (hub/http: kr_hub_meta_header), which reads what a Hugging Face hub, a mirror or anything
 * on the path sends back. The input is cut into lines as libcurl delivers them (not
 * NUL-terminated, each passed with its exact length); whatever they hold, every text field
 * stays a bounded C string and every number is -1 (absent) or non-negative.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/http.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kr_hub_meta m;
    kr_hub_meta_init(&m);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && data[i] != '\n') continue;
        size_t len = i - start + (i < size ? 1 : 0);
        if (len > 0) {
            /* An exact-size copy, so reading past the line is caught by ASan. */
            char *line = malloc(len);
            memcpy(line, data + start, len);
            kr_hub_meta_header(&m, line, len);
            free(line);
        }
        start = i + 1;
    }
    CHECK(memchr(m.commit, '\0', sizeof m.commit));
    CHECK(memchr(m.linked_etag, '\0', sizeof m.linked_etag));
    CHECK(memchr(m.etag, '\0', sizeof m.etag));
    CHECK(memchr(m.error_code, '\0', sizeof m.error_code));
    CHECK(memchr(m.error_message, '\0', sizeof m.error_message));
    CHECK(m.linked_size >= -1 && m.content_length >= -1);
    CHECK(m.range_start >= -1 && m.range_total >= -1);
    return 0;
}
