/*
 * hub/sha256 — SHA-256 (FIPS 180-4), written for this project so the hub layer can check
 * downloaded blobs against the hub's content hash (`X-Linked-Etag`) without a crypto
 * library dependency. Streaming: init, update any number of times, final.
 */
#ifndef KR_HUB_SHA256_H
#define KR_HUB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

typedef struct kr_sha256 {
    uint32_t state[8]; /* running hash H0..H7 */
    uint64_t length; /* message bytes consumed so far */
    uint8_t block[64]; /* pending partial block */
    size_t block_len; /* bytes used in block, < 64 */
} kr_sha256;

void kr_sha256_init(kr_sha256 *s);
void kr_sha256_update(kr_sha256 *s, const void *data, size_t len);
/* Writes the 32-byte digest; s must be re-initialised before reuse. */
void kr_sha256_final(kr_sha256 *s, uint8_t digest[32]);
/* Lower-case hex of a digest into hex[65] (NUL-terminated). */
void kr_sha256_hex(const uint8_t digest[32], char hex[65]);
/* Hashes a whole file into hex[65]; KR_ERR_IO naming the file if it cannot be read. */
kr_status kr_sha256_file(const char *path, char hex[65], kr_error *err);

#endif
