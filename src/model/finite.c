/*
 * model/finite — see finite.h.
 *
 * A value is non-finite when its exponent field is all ones (for e4m3fn: the two NaN codes
 * 0x7f / 0xff, the format has no infinity). The scan looks only at those bits: blocks of a
 * fixed 64 elements are reduced to one "any bad" flag with loads, ANDs and compares the
 * compiler vectorises (the loop has no branch and a constant trip count), and only a block
 * whose flag is set is searched for the index. The scan is bound by memory bandwidth: one
 * read of the weights, which the first forecast would have paged in anyway.
 */
#include "model/finite.h"

#include <string.h>

enum { BLOCK = 64 };

/* Exponent masks: a value is non-finite iff (bits & mask) == mask. */
#define F32_EXP 0x7f800000u
#define F16_EXP 0x7c00u
#define BF16_EXP 0x7f80u
#define E4M3_NAN 0x7fu

static int bad32(const uint8_t *p, int64_t i) {
    uint32_t b;
    memcpy(&b, p + 4 * i, 4);
    return (b & F32_EXP) == F32_EXP;
}

static int bad16(const uint8_t *p, int64_t i, uint16_t mask) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return (h & mask) == mask;
}

static int bad8(const uint8_t *p, int64_t i) { return (p[i] & E4M3_NAN) == E4M3_NAN; }

/* One element's test; the switch is hoisted out of the block loops by the callers below. */
static int bad_at(const uint8_t *p, kr_dtype dt, int64_t i) {
    switch (dt) {
    case KR_DT_F32: return bad32(p, i);
    case KR_DT_F16: return bad16(p, i, F16_EXP);
    case KR_DT_BF16: return bad16(p, i, BF16_EXP);
    case KR_DT_F8_E4M3: return bad8(p, i);
    default: return 0;
    }
}

/* Whether any of the BLOCK elements from i on is non-finite (branch-free, vectorisable). */
static int block_bad32(const uint8_t *p, int64_t i) {
    unsigned any = 0;
    for (int j = 0; j < BLOCK; j++) {
        uint32_t b;
        memcpy(&b, p + 4 * (i + j), 4);
        any |= (b & F32_EXP) == F32_EXP;
    }
    return any != 0;
}

static int block_bad16(const uint8_t *p, int64_t i, uint16_t mask) {
    unsigned any = 0;
    for (int j = 0; j < BLOCK; j++) {
        uint16_t h;
        memcpy(&h, p + 2 * (i + j), 2);
        any |= (h & mask) == mask;
    }
    return any != 0;
}

static int block_bad8(const uint8_t *p, int64_t i) {
    unsigned any = 0;
    for (int j = 0; j < BLOCK; j++) any |= (p[i + j] & E4M3_NAN) == E4M3_NAN;
    return any != 0;
}

int64_t kr_first_nonfinite(const void *data, kr_dtype dt, int64_t n) {
    const uint8_t *p = data;
    if (!p || n <= 0) return -1;
    if (dt != KR_DT_F32 && dt != KR_DT_F16 && dt != KR_DT_BF16 && dt != KR_DT_F8_E4M3) return -1;
    int64_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        int bad = dt == KR_DT_F32    ? block_bad32(p, i)
                  : dt == KR_DT_F16  ? block_bad16(p, i, F16_EXP)
                  : dt == KR_DT_BF16 ? block_bad16(p, i, BF16_EXP)
                                     : block_bad8(p, i);
        if (bad) break;
    }
    for (; i < n; i++)
        if (bad_at(p, dt, i)) return i;
    return -1;
}

const char *kr_nonfinite_kind(const void *data, kr_dtype dt, int64_t i) {
    const uint8_t *p = data;
    uint32_t bits = 0, mant = 0, sign = 0;
    switch (dt) {
    case KR_DT_F32:
        memcpy(&bits, p + 4 * i, 4);
        mant = bits & 0x007fffffu;
        sign = bits >> 31;
        break;
    case KR_DT_F16:
    case KR_DT_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        mant = h & (dt == KR_DT_F16 ? 0x03ffu : 0x007fu);
        sign = h >> 15;
        break;
    }
    default: return "NaN"; /* e4m3fn has no infinity */
    }
    return mant ? "NaN" : sign ? "-inf" : "+inf";
}
