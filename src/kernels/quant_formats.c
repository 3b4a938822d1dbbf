/*
 * kernels/quant_formats — the scalar side of quant.h: format names, the exact bf16 / f16 /
 * e4m3 conversions, and quantising an f32 weight into a kr_qmat.
 *
 * The conversions work on the bit patterns with integer arithmetic rather than through the
 * FPU, so they round the same way on every CPU and compiler (no dependence on FTZ/DAZ, the
 * rounding mode or whether F16C exists); the SIMD dequantisers are tested against them.
 */
#include "kernels/quant.h"

#include "base/error.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_fmt_names[KR_WFMT_COUNT] = { "f32", "bf16", "int8", "fp8", "q4" };

const char *kr_wfmt_name(kr_wfmt fmt) {
    return (int)fmt >= 0 && fmt < KR_WFMT_COUNT ? k_fmt_names[fmt] : "unknown";
}

int kr_wfmt_parse(const char *name, kr_wfmt *out) {
    if (!name) return -1;
    for (int f = 0; f < KR_WFMT_COUNT; f++) {
        const char *a = name, *b = k_fmt_names[f];
        /* Case-insensitive: "Q4" / "BF16" come from command lines and config files. */
        while (*a && *b) {
            char c = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
            if (c != *b) break;
            a++;
            b++;
        }
        if (!*a && !*b) {
            if (out) *out = (kr_wfmt)f;
            return 0;
        }
    }
    return -1;
}

int kr_wfmt_row_align(kr_wfmt fmt, int group) {
    switch (fmt) {
    case KR_WFMT_BF16: return 32;
    case KR_WFMT_INT8:
    case KR_WFMT_FP8: return 64;
    case KR_WFMT_Q4: return group == 64 ? 64 : KR_Q4_GROUP_DEFAULT;
    default: return 1;
    }
}

/* ---- Conversions */

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* m · 2^-shift rounded to nearest, ties to even (shift in 1..31). */
static uint32_t rne_shift(uint32_t m, int shift) {
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return r + (rem > half || (rem == half && (r & 1u)));
}

uint16_t kr_f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    /* NaN: truncate and force the quiet bit, exactly what VCVTNEPS2BF16 does, so the
     * AVX512_BF16 activation quantiser and this agree on NaN payloads too. */
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7FFF + lsb carries into bit 16 exactly when RNE rounds up; the carry out of
     * the largest finite values lands on the infinity pattern, as it should. */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float kr_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t kr_f32_to_f16(float x) {
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x01FFu));
    if (a >= 0x477FF000u) /* >= 65520, the midpoint of 65504 and 2^16: rounds to inf */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x38800000u) { /* below 2^-14: an f16 subnormal (or zero), in units of 2^-24 */
        int e = (int)(a >> 23);
        if (e < 102) return sign; /* < 2^-25: under half the smallest subnormal */
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
        /* m · 2^(e - 150) = (m · 2^(e - 126)) units of 2^-24; e in [102, 112] so the shift is
         * 14..24. The carry from 0x3FF to 0x400 gives the smallest normal, correctly. */
        return (uint16_t)(sign | rne_shift(m, 126 - e));
    }
    /* Normal: rebias the exponent (127 → 15) and round off 13 mantissa bits; a carry out of
     * the mantissa bumps the exponent (up to 0x7BFF at most: the inf case is above). */
    uint32_t b = a - ((uint32_t)(127 - 15) << 23);
    return (uint16_t)(sign | ((b + 0x0FFFu + ((b >> 13) & 1u)) >> 13));
}

float kr_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F) return bits_f32(sign | 0x7F800000u | (m << 13)); /* inf / NaN */
    if (e == 0) {
        if (m == 0) return bits_f32(sign);
        /* subnormal m · 2^-24: normalise into an f32 (always representable) */
        int s = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            s++;
        }
        return bits_f32(sign | ((uint32_t)(127 - 15 + 1 - s) << 23) | ((m & 0x3FFu) << 13));
    }
    return bits_f32(sign | ((e + 127 - 15) << 23) | (m << 13));
}

uint8_t kr_f32_to_e4m3(float x) {
    uint32_t u = f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7F;
    if (a < 0x3C800000u) { /* below 2^-6: an e4m3 subnormal (or zero), in units of 2^-9 */
        int e = (int)(a >> 23);
        if (e < 117) return sign; /* < 2^-10: under half the smallest subnormal */
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
        /* m · 2^(e - 141) units of 2^-9; e in [117, 120] so the shift is 21..24. A carry to 8
         * is the smallest normal, 0x08. */
        return (uint8_t)(sign | rne_shift(m, 141 - e));
    }
    /* Normal: rebias (127 → 7), round off 20 mantissa bits. e4m3fn has no infinity and uses
     * 0x7F for NaN, so anything rounding past 0x7E (448), infinities included, saturates. */
    uint32_t b = a - ((uint32_t)(127 - 7) << 23);
    uint32_t r = (b + 0x7FFFFu + ((b >> 20) & 1u)) >> 20;
    if (a >= 0x7F800000u || r > 0x7Eu) r = 0x7Eu;
    return (uint8_t)(sign | r);
}

float kr_e4m3_to_f32(uint8_t b) {
    /* NaN has one fixed pattern per sign so every dequantiser can produce the same bits. */
    if ((b & 0x7Fu) == 0x7Fu) return bits_f32((b & 0x80u) ? 0xFFC00000u : 0x7FC00000u);
    /* The e4m3 bits moved up 7 places are an f16 with the same exponent field and a bias 8
     * lower, i.e. the value / 256, subnormals included (the SIMD decoders use vcvtph2ps on
     * that). Both steps are exact. */
    uint16_t h = (uint16_t)(((b & 0x7Fu) << 7) | ((b & 0x80u) << 8));
    return kr_f16_to_f32(h) * 256.0f;
}

/* ---- Quantising */

static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

typedef struct layout {
    size_t data, scale, row_sum, gscale, gzero, in_scale; /* sizes in bytes */
} layout;

static layout layout_of(kr_wfmt fmt, size_t n, size_t k, size_t kp, int group, int has_in) {
    layout l = { 0, 0, 0, 0, 0, 0 };
    switch (fmt) {
    case KR_WFMT_F32: l.data = n * kp * 4; break;
    case KR_WFMT_BF16: l.data = n * kp * 2; break;
    case KR_WFMT_INT8:
        l.data = n * kp;
        l.scale = n * 4;
        l.row_sum = n * 4;
        break;
    case KR_WFMT_FP8:
        l.data = n * kp;
        l.scale = n * 4;
        break;
    case KR_WFMT_Q4: {
        size_t groups = group > 0 ? kp / (size_t)group : 0;
        l.data = n * kp / 2;
        l.gscale = n * groups * 2;
        l.gzero = n * groups;
        break;
    }
    default: break;
    }
    if (has_in) l.in_scale = k * 4;
    return l;
}

size_t kr_qmat_bytes(const kr_qmat *m) {
    if (!m || m->n <= 0 || m->k <= 0) return 0;
    size_t kp = m->kp > 0 ? (size_t)m->kp : (size_t)m->k;
    layout l = layout_of(m->fmt, (size_t)m->n, (size_t)m->k, kp, m->group, m->in_scale != NULL);
    return l.data + l.scale + l.row_sum + l.gscale + l.gzero + l.in_scale;
}

void kr_qmat_owned_free(kr_qmat_owned *q) {
    if (!q) return;
    free(q->mem);
    memset(q, 0, sizeof *q);
}

/* Every weight (after col_scale) must be finite; checked for the whole matrix before any
 * quantising, so the error names the first bad element whatever the format. */
static kr_status check_finite(const float *w, const float *col_scale, int n, int k, kr_error *err) {
    for (int r = 0; r < n; r++) {
        const float *src = w + (size_t)r * (size_t)k;
        for (int j = 0; j < k; j++) {
            if (!isfinite(src[j]))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "kr_qmat_quantize: weight row %d column %d is not finite (%g)",
                                    r, j, (double)src[j]);
            if (col_scale && !isfinite(src[j] * col_scale[j]))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "kr_qmat_quantize: weight row %d column %d overflows when "
                                    "multiplied by col_scale",
                                    r, j);
        }
    }
    return KR_OK;
}

static float row_absmax(const float *x, int k) {
    float m = 0.0f;
    for (int j = 0; j < k; j++) {
        float a = fabsf(x[j]);
        if (a > m) m = a;
    }
    return m;
}

static kr_status quant_bf16(const float *x, int r, int k, uint16_t *q, kr_error *err) {
    for (int j = 0; j < k; j++) {
        q[j] = kr_f32_to_bf16(x[j]);
        if ((q[j] & 0x7FFFu) == 0x7F80u)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "kr_qmat_quantize: weight row %d column %d (%g) overflows bf16", r,
                                j, (double)x[j]);
    }
    return KR_OK;
}

/* nearbyintf(y) for |y| <= 2^22 under the default rounding mode (round to nearest even):
 * adding and subtracting 1.5·2^23 leaves y's integer part in the mantissa. Baseline x86-64
 * has no round instruction, so nearbyintf was a libm call per weight (Kronos-small to int8 at
 * load: 0.11-0.13 s before, 0.09-0.11 s after; the same codes, test_kernels_quant). */
static inline float round_even_small(float y) {
    const float magic = 12582912.0f; /* exact without -ffast-math, which the build never uses */
    return (y + magic) - magic;
}

static void quant_int8(const float *x, int k, int8_t *q, float *scale, int32_t *row_sum) {
    float s = row_absmax(x, k) / 127.0f;
    int32_t sum = 0;
    /* A nonzero row whose scale underflows to 0 keeps q = 0 (its weights are below 2^-142).
     * |x / s| <= 127 (s is the row's max |x| / 127), so round_even_small applies. */
    if (s > 0.0f)
        for (int j = 0; j < k; j++) {
            float v = round_even_small(x[j] / s);
            int qi = v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
            q[j] = (int8_t)qi;
            sum += qi;
        }
    else
        for (int j = 0; j < k; j++) q[j] = 0;
    *scale = s;
    *row_sum = sum;
}

static void quant_fp8(const float *x, int k, uint8_t *q, float *scale) {
    float s = row_absmax(x, k) / 448.0f;
    for (int j = 0; j < k; j++) q[j] = s > 0.0f ? kr_f32_to_e4m3(x[j] / s) : 0;
    *scale = s;
}

/* Smallest f16 >= t (t >= 0, finite). */
static uint16_t f16_round_up(float t) {
    uint16_t h = kr_f32_to_f16(t);
    if (kr_f16_to_f32(h) < t) h++;
    return h;
}

static int clamp15(float v) { return v < 0.0f ? 0 : v > 15.0f ? 15 : (int)v; }

int kr_q4_group_params(const float *x, int len, uint16_t *gscale, uint8_t *gzero) {
    float lo = 0.0f, hi = 0.0f;
    for (int j = 0; j < len; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    /* The scale is rounded UP to f16, so s · 15 still spans [lo, hi] and no weight is
     * clamped by more than s/2 (rounding to nearest could shrink the range by 2^-11 and
     * clip the extremes a little further). */
    float t = (hi - lo) / 15.0f;
    uint16_t hs = f16_round_up(t);
    if (!isfinite(t) || (hs & 0x7FFFu) >= 0x7C00u) return -1;
    float s = kr_f16_to_f32(hs);
    *gscale = hs;
    *gzero = (uint8_t)(s > 0.0f ? clamp15(nearbyintf(-lo / s)) : 0);
    return 0;
}

int kr_q4_code(float x, float s, int zero) {
    if (!(s > 0.0f)) return zero;
    return clamp15(nearbyintf(x / s) + (float)zero); /* |x/s| <= 15.5 in range: fits */
}

/* Stores code qi of element j of a Q4 row (the nibble layout of quant.h). */
static void q4_put(uint8_t *q, int j, int qi) {
    int i = j & 31;
    uint8_t *byte = q + (j - i) / 2 + (i & 15);
    *byte = (uint8_t)(*byte | (i < 16 ? qi : qi << 4));
}

static kr_status quant_q4(const float *x, int r, int k, int kp, int group, uint8_t *q,
                          uint16_t *gscale, uint8_t *gzero, kr_error *err) {
    int groups = kp / group;
    memset(q, 0, (size_t)kp / 2);
    for (int g = 0; g < groups; g++) {
        int j0 = g * group, j1 = j0 + group < k ? j0 + group : k;
        if (kr_q4_group_params(x + j0, j1 - j0, &gscale[g], &gzero[g]) != 0) {
            float lo = 0.0f, hi = 0.0f;
            for (int j = j0; j < j1; j++) {
                lo = fminf(lo, x[j]);
                hi = fmaxf(hi, x[j]);
            }
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "kr_qmat_quantize: q4 row %d group %d: weight range [%g, %g] "
                                "needs a scale beyond f16",
                                r, g, (double)lo, (double)hi);
        }
        float s = kr_f16_to_f32(gscale[g]);
        int z = gzero[g];
        for (int j = j0; j < j0 + group; j++) q4_put(q, j, j < j1 ? kr_q4_code(x[j], s, z) : z);
    }
    return KR_OK;
}

/* Arrays of a kr_qmat being built: one 64-byte aligned allocation. */
typedef struct qmat_arrays {
    char *mem;
    size_t total;
    void *data;
    float *scale, *in_scale;
    int32_t *row_sum;
    uint16_t *gscale;
    uint8_t *gzero;
} qmat_arrays;

/* Checks the shape and group (group: 0 = default for Q4, ignored otherwise), fills the
 * header of out->m and allocates every array zeroed. `who` names the caller in errors. */
static kr_status qmat_alloc(const char *who, kr_wfmt fmt, int n, int k, int *group, int has_in,
                            kr_qmat_owned *out, qmat_arrays *a, kr_error *err) {
    memset(out, 0, sizeof *out);
    memset(a, 0, sizeof *a);
    if (fmt != KR_WFMT_BF16 && fmt != KR_WFMT_INT8 && fmt != KR_WFMT_FP8 && fmt != KR_WFMT_Q4)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: format %d (%s) is not a quantised format",
                            who, (int)fmt, kr_wfmt_name(fmt));
    if (n < 1 || k < 1 || k > INT_MAX - 64)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: bad shape n=%d k=%d", who, n, k);
    if (fmt == KR_WFMT_Q4) {
        if (*group == 0) *group = KR_Q4_GROUP_DEFAULT;
        if (*group != 32 && *group != 64)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: q4 group %d (must be 32 or 64)", who,
                                *group);
    } else {
        *group = 0;
    }
    int align = kr_wfmt_row_align(fmt, *group);
    int kp = (k + align - 1) / align * align;
    if ((size_t)n > SIZE_MAX / 8 / (size_t)kp)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: n=%d k=%d too large", who, n, k);
    layout l = layout_of(fmt, (size_t)n, (size_t)k, (size_t)kp, *group, has_in);
    /* Each array starts on a 64-byte line so the SIMD kernels may use aligned loads and no
     * two arrays share a cache line. */
    size_t off_scale = round64(l.data), off_rsum = off_scale + round64(l.scale);
    size_t off_gs = off_rsum + round64(l.row_sum), off_gz = off_gs + round64(l.gscale);
    size_t off_in = off_gz + round64(l.gzero), total = off_in + round64(l.in_scale);
    char *mem = aligned_alloc(64, total);
    if (!mem) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory (%zu bytes)", who, total);
    memset(mem, 0, total);
    a->mem = mem;
    a->total = total;
    a->data = mem;
    a->scale = l.scale ? (float *)(mem + off_scale) : NULL;
    a->row_sum = l.row_sum ? (int32_t *)(mem + off_rsum) : NULL;
    a->gscale = l.gscale ? (uint16_t *)(mem + off_gs) : NULL;
    a->gzero = l.gzero ? (uint8_t *)(mem + off_gz) : NULL;
    a->in_scale = l.in_scale ? (float *)(mem + off_in) : NULL;
    kr_qmat *m = &out->m;
    m->fmt = fmt;
    m->n = n;
    m->k = k;
    m->kp = kp;
    m->group = *group;
    m->data = mem;
    m->scale = a->scale;
    m->row_sum = a->row_sum;
    m->gscale = a->gscale;
    m->gzero = a->gzero;
    m->in_scale = NULL; /* set once filled */
    return KR_OK;
}

static void qmat_finish(kr_qmat_owned *out, qmat_arrays *a) {
    out->m.in_scale = a->in_scale;
    out->mem = a->mem;
    out->bytes = kr_qmat_bytes(&out->m);
}

kr_status kr_qmat_quantize(kr_wfmt fmt, int n, int k, const float *w, const float *col_scale,
                           int group, kr_qmat_owned *out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_qmat_quantize: out is NULL");
    memset(out, 0, sizeof *out);
    if (!w) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_qmat_quantize: w is NULL");
    if (col_scale)
        for (int j = 0; j < k; j++)
            if (!(col_scale[j] > 0.0f) || !isfinite(col_scale[j]) || !isfinite(1.0f / col_scale[j]))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "kr_qmat_quantize: col_scale[%d] = %g (must be finite, > 0 "
                                    "and have a finite inverse)",
                                    j, (double)col_scale[j]);
    qmat_arrays a;
    kr_status st =
        qmat_alloc("kr_qmat_quantize", fmt, n, k, &group, col_scale != NULL, out, &a, err);
    if (st == KR_OK) st = check_finite(w, col_scale, n, k, err);
    float *x = st == KR_OK ? malloc((size_t)k * sizeof *x) : NULL;
    if (st == KR_OK && !x) st = kr_error_set(err, KR_ERR_NOMEM, "kr_qmat_quantize: out of memory");
    int kp = out->m.kp, groups = group ? kp / group : 0;
    for (int r = 0; r < n && st == KR_OK; r++) {
        const float *src = w + (size_t)r * (size_t)k;
        for (int j = 0; j < k; j++) x[j] = col_scale ? src[j] * col_scale[j] : src[j];
        size_t ro = (size_t)r * (size_t)kp;
        switch (fmt) {
        case KR_WFMT_BF16: st = quant_bf16(x, r, k, (uint16_t *)a.data + ro, err); break;
        case KR_WFMT_INT8:
            quant_int8(x, k, (int8_t *)a.data + ro, a.scale + r, a.row_sum + r);
            break;
        case KR_WFMT_FP8: quant_fp8(x, k, (uint8_t *)a.data + ro, a.scale + r); break;
        case KR_WFMT_Q4:
            st = quant_q4(x, r, k, kp, group, (uint8_t *)a.data + ro / 2,
                          a.gscale + (size_t)r * (size_t)groups,
                          a.gzero + (size_t)r * (size_t)groups, err);
            break;
        default: break;
        }
    }
    free(x);
    if (st != KR_OK) {
        free(a.mem);
        memset(out, 0, sizeof *out);
        return st;
    }
    if (col_scale)
        for (int j = 0; j < k; j++) a.in_scale[j] = 1.0f / col_scale[j];
    else
        a.in_scale = NULL;
    qmat_finish(out, &a);
    return KR_OK;
}

kr_status kr_qmat_from_codes(kr_wfmt fmt, int n, int k, int group, const int8_t *codes,
                             const float *row_scale, const uint16_t *gscale, const uint8_t *gzero,
                             kr_qmat_owned *out, kr_error *err) {
    static const char who[] = "kr_qmat_from_codes";
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: out is NULL", who);
    memset(out, 0, sizeof *out);
    if (fmt != KR_WFMT_INT8 && fmt != KR_WFMT_Q4)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: format %s has no integer codes", who,
                            kr_wfmt_name(fmt));
    if (!codes || (fmt == KR_WFMT_INT8 && !row_scale) || (fmt == KR_WFMT_Q4 && (!gscale || !gzero)))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: missing codes or scales", who);
    qmat_arrays a;
    kr_status st = qmat_alloc(who, fmt, n, k, &group, 0, out, &a, err);
    if (st != KR_OK) return st;
    int kp = out->m.kp, groups = group ? kp / group : 0;
    for (int r = 0; r < n && st == KR_OK; r++) {
        const int8_t *c = codes + (size_t)r * (size_t)k;
        if (fmt == KR_WFMT_INT8) {
            if (!isfinite(row_scale[r]) || row_scale[r] < 0.0f)
                st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s: row %d scale %g", who, r,
                                  (double)row_scale[r]);
            int8_t *q = (int8_t *)a.data + (size_t)r * (size_t)kp;
            int32_t sum = 0;
            for (int j = 0; j < k && st == KR_OK; j++) {
                if (c[j] < -127)
                    st = kr_error_set(err, KR_ERR_INVALID_ARG,
                                      "%s: row %d column %d code %d outside -127..127", who, r, j,
                                      c[j]);
                q[j] = c[j];
                sum += c[j];
            }
            a.scale[r] = row_scale[r];
            a.row_sum[r] = sum;
            continue;
        }
        uint8_t *q = (uint8_t *)a.data + (size_t)r * (size_t)kp / 2;
        for (int g = 0; g < groups && st == KR_OK; g++) {
            size_t gi = (size_t)r * (size_t)groups + (size_t)g;
            if ((gscale[gi] & 0x7FFFu) >= 0x7C00u || (gscale[gi] & 0x8000u) || gzero[gi] > 15)
                st = kr_error_set(err, KR_ERR_INVALID_ARG,
                                  "%s: row %d group %d: scale 0x%04x or zero %d out of range", who,
                                  r, g, gscale[gi], gzero[gi]);
            a.gscale[gi] = gscale[gi];
            a.gzero[gi] = gzero[gi];
            for (int j = g * group; j < (g + 1) * group && st == KR_OK; j++) {
                int qi = j < k ? c[j] : gzero[gi]; /* padding decodes to 0 */
                if (qi < 0 || qi > 15)
                    st = kr_error_set(err, KR_ERR_INVALID_ARG,
                                      "%s: row %d column %d code %d outside 0..15", who, r, j, qi);
                else
                    q4_put(q, j, qi);
            }
        }
    }
    if (st != KR_OK) {
        free(a.mem);
        memset(out, 0, sizeof *out);
        return st;
    }
    qmat_finish(out, &a);
    return KR_OK;
}
