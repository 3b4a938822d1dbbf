/*
 * model/weights — binds the tensors of a Kronos tokenizer or predictor checkpoint
 * (config.json + model.safetensors) to the structs in weights.h. See weights.h.
 *
 * Loading is two passes over a list of "slots" (one per tensor the forward pass reads):
 * the first pass finds each tensor by its exact state_dict name and checks dtype and
 * shape, so the conversion arena is only allocated for a checkpoint that passed every
 * check; the second pass points F32 tensors into the mapping and converts the rest into
 * that one arena, sized by the first pass. The random-model writer lives in random_model.c.
 */
#include "model/weights.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/finite.h"
#include "model/safetensors.h"

/* Sizes of the temporal embedding tables, in the reference's order of fields below. */
static const char *const k_te_names[5] = { "minute", "hour", "weekday", "day", "month" };
static const int k_te_rows[5] = { 60, 24, 7, 32, 13 };

/* The s2 cross-attention always uses the DependencyAwareLayer constructor default. */
#define DEP_HEADS 4

#define NAME_MAX_LEN 160

typedef struct weights_owner {
    kr_safetensors *st;
    float *arena;
    kr_qmat *qmats; /* quantised Linears bound from a kronos quantize checkpoint */
    void **copies; /* their arrays that were misaligned in the file, copied */
    int n_copies;
} weights_owner;

/* A quantised Linear found in the file, turned into a kr_qmat by binder_finish. */
typedef struct qslot {
    kr_linear *l;
    kr_qmat m; /* pointers into the mapping (may be misaligned until finish) */
} qslot;

typedef struct slot {
    const float **dst;
    const kr_st_tensor *t; /* NULL: computed rotary inv_freq of length n */
    int64_t n;
} slot;

typedef struct binder {
    const kr_safetensors *st;
    const char *label; /* model.safetensors path, for messages */
    slot *slots;
    int n, cap;
    size_t arena_floats; /* floats needing conversion or computation */
    size_t n_params; /* learnable parameters bound (buffers excluded) */
    size_t n_floats; /* every float bound, buffers included */
    kr_quant_config quant; /* the checkpoint's quantisation (format 0: f32) */
    qslot *q;
    int nq, capq;
    size_t q_bytes; /* bytes of the quantised Linears */
    int check_finite; /* refuse NaN / infinite weights (kr_weights_opts) */
    kr_status status; /* first error; later binds are no-ops */
    kr_error *err;
} binder;

static int is_float_dtype(kr_dtype dt) {
    return dt == KR_DT_F32 || dt == KR_DT_F16 || dt == KR_DT_BF16;
}

/* F32 data can be used in place only when a float load from it is aligned. */
static int usable_in_place(const kr_st_tensor *t) {
    return t->dtype == KR_DT_F32 && ((uintptr_t)t->data % _Alignof(float)) == 0;
}

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "[");
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

/* A weight the forward pass reads must be finite: one NaN spreads through every row it
 * touches and turns forecasts into garbage without any other sign. */
static void check_finite(binder *b, const kr_st_tensor *t) {
    if (!b->check_finite || b->status != KR_OK || !t) return;
    int64_t i = kr_first_nonfinite(t->data, t->dtype, t->numel);
    if (i < 0) return;
    char at[64] = "";
    if (t->ndim == 2 && t->shape[1] > 0)
        snprintf(at, sizeof at, " ([%lld, %lld])", (long long)(i / t->shape[1]),
                 (long long)(i % t->shape[1]));
    b->status =
        kr_error_set(b->err, KR_ERR_MODEL,
                     "%s: tensor '%s' element %lld%s is %s (its first non-finite value): "
                     "the checkpoint is corrupt (allow_nonfinite, the CLI's "
                     "--allow-nonfinite-weights, loads it anyway)",
                     b->label, t->name, (long long)i, at, kr_nonfinite_kind(t->data, t->dtype, i));
}

/* A finite scale can still make infinite weights: an int8 code (up to 128 in magnitude) or an
 * fp8 one (up to 448) times a scale near FLT_MAX overflows float32. */
static void check_scale_range(binder *b, const kr_st_tensor *t, float max_code) {
    if (!b->check_finite || b->status != KR_OK || !t) return;
    const float limit = FLT_MAX / max_code;
    for (int64_t i = 0; i < t->numel; i++) {
        float s;
        memcpy(&s, (const uint8_t *)t->data + 4 * i, 4);
        if (!(fabsf(s) <= limit)) {
            b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                     "%s: tensor '%s' element %lld: scale %g times a code of up "
                                     "to %g overflows float32 (infinite weights): the checkpoint "
                                     "is corrupt (allow_nonfinite loads it anyway)",
                                     b->label, t->name, (long long)i, (double)s, (double)max_code);
            return;
        }
    }
}

static int push_slot(binder *b, const float **dst, const kr_st_tensor *t, int64_t n) {
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        slot *s = realloc(b->slots, (size_t)cap * sizeof *s);
        if (!s) {
            b->status = kr_error_set(b->err, KR_ERR_NOMEM, "%s: out of memory", b->label);
            return 0;
        }
        b->slots = s;
        b->cap = cap;
    }
    b->slots[b->n++] = (slot){ dst, t, n };
    return 1;
}

/* Binds tensor `name` of shape [d0] (d1 < 0) or [d0, d1] to *dst. `param` says whether it
 * counts as a learnable parameter. With `rotary_dim` > 0 the tensor is the rotary inv_freq
 * buffer [rotary_dim/2] and is computed when the file lacks it. */
static void bind_v(binder *b, const float **dst, int param, int64_t d0, int64_t d1, int rotary_dim,
                   const char *fmt, va_list ap) {
    if (b->status != KR_OK) return;
    char name[NAME_MAX_LEN];
    vsnprintf(name, sizeof name, fmt, ap);
    int64_t want[2] = { d0, d1 };
    int want_ndim = d1 < 0 ? 1 : 2;
    int64_t numel = d1 < 0 ? d0 : d0 * d1;

    const kr_st_tensor *t = kr_st_find(b->st, name);
    if (!t) {
        if (rotary_dim > 0) {
            /* Older exports may omit the buffer; it is a pure function of head_dim. */
            if (push_slot(b, dst, NULL, numel)) {
                b->arena_floats += (size_t)numel;
                b->n_floats += (size_t)numel;
            }
            return;
        }
        b->status = kr_error_set(b->err, KR_ERR_MODEL, "%s: missing tensor '%s'", b->label, name);
        return;
    }
    if (!is_float_dtype(t->dtype)) {
        b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                 "%s: tensor '%s' has dtype %s, expected F32, F16 or BF16",
                                 b->label, name, kr_dtype_name(t->dtype));
        return;
    }
    int same = t->ndim == want_ndim;
    for (int i = 0; same && i < want_ndim; i++) same = t->shape[i] == want[i];
    if (!same) {
        char got[128], exp[64];
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        fmt_shape(exp, sizeof exp, want_ndim, want);
        b->status = kr_error_set(b->err, KR_ERR_MODEL, "%s: tensor '%s' has shape %s, expected %s",
                                 b->label, name, got, exp);
        return;
    }
    if (rotary_dim > 0 && t->dtype != KR_DT_F32) {
        /* A BF16/F16 copy of the buffer is off by up to 2^-9 / 2^-12 relative, and the
         * RoPE angle error grows with the position (radians by position 2000); the f32
         * value is a pure function of head_dim, so recompute it instead. */
        t = NULL;
    }
    check_finite(b, t);
    if (b->status != KR_OK || !push_slot(b, dst, t, numel)) return;
    if (!t || !usable_in_place(t)) b->arena_floats += (size_t)numel;
    b->n_floats += (size_t)numel;
    if (param) b->n_params += (size_t)numel;
}

KR_PRINTF(5, 6)
static void bind(binder *b, const float **dst, int64_t d0, int64_t d1, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    bind_v(b, dst, 1, d0, d1, 0, fmt, ap);
    va_end(ap);
}

KR_PRINTF(4, 5)
static void bind_rotary(binder *b, const float **dst, int head_dim, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    bind_v(b, dst, 0, head_dim / 2, -1, head_dim, fmt, ap);
    va_end(ap);
}

/* Finds `prefix`.`suffix` with the given dtype and 1-D/2-D shape (d1 < 0: 1-D); NULL with
 * b->status set when it is missing or wrong (optional: NULL without an error if missing). */
static const kr_st_tensor *find_exact(binder *b, const char *prefix, const char *suffix,
                                      kr_dtype dt, int64_t d0, int64_t d1, int optional) {
    if (b->status != KR_OK) return NULL;
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    const kr_st_tensor *t = kr_st_find(b->st, name);
    if (!t) {
        if (!optional)
            b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                     "%s: missing tensor '%s' (config.json says the checkpoint "
                                     "is %s-quantised)",
                                     b->label, name, kr_wfmt_name((kr_wfmt)b->quant.format));
        return NULL;
    }
    int64_t want[2] = { d0, d1 };
    int nd = d1 < 0 ? 1 : 2;
    int same = t->dtype == dt && t->ndim == nd;
    for (int i = 0; same && i < nd; i++) same = t->shape[i] == want[i];
    if (!same) {
        char got[128], exp[64];
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        fmt_shape(exp, sizeof exp, nd, want);
        b->status =
            kr_error_set(b->err, KR_ERR_MODEL, "%s: tensor '%s' is %s %s, expected %s %s", b->label,
                         name, kr_dtype_name(t->dtype), got, kr_dtype_name(dt), exp);
        return NULL;
    }
    check_finite(b, t); /* bf16 / fp8 weights and every scale; integers have no NaN */
    return b->status == KR_OK ? t : NULL;
}

/* The first padding column j in [k, kp) of row r whose code is not the format's zero
 * (kernels/quant.h: bf16 and fp8 ±0, q4 the group's zero point; int8 is check_qmat's), or -1. */
static int bad_padding(const kr_qmat *m, int r) {
    const uint8_t *row;
    for (int j = m->k; j < m->kp; j++) {
        switch (m->fmt) {
        case KR_WFMT_BF16: {
            uint16_t h;
            memcpy(&h, (const uint8_t *)m->data + 2 * ((size_t)r * (size_t)m->kp + (size_t)j), 2);
            if (h & 0x7FFFu) return j;
            break;
        }
        case KR_WFMT_FP8:
            row = (const uint8_t *)m->data + (size_t)r * (size_t)m->kp;
            if (row[j] & 0x7Fu) return j;
            break;
        case KR_WFMT_Q4: {
            /* Runs of 32: byte j0/2 + i holds element j0 + i (low nibble) and j0 + 16 + i. */
            row = (const uint8_t *)m->data + (size_t)r * (size_t)(m->kp / 2);
            int in_run = j % 32;
            uint8_t byte = row[(j - in_run) / 2 + in_run % 16];
            uint8_t q = in_run < 16 ? byte & 0x0Fu : byte >> 4;
            if (q != m->gzero[(size_t)r * (size_t)(m->kp / m->group) + (size_t)(j / m->group)])
                return j;
            break;
        }
        default: return -1;
        }
    }
    return -1;
}

/* The invariants kronos quantize writes and the kernels rely on, checked once at load (the
 * tensors may sit misaligned in the mapping, hence memcpy): int8 codes in -127..127 with zero
 * padding and each qrowsum their exact sum, int8/fp8 scales >= 0, q4 group scales >= 0 and
 * zero points 0..15, and the padding columns of bf16/fp8/q4 rows zero weights (the q4 kernel
 * multiplies them in: a nonzero one changes the forecast). A file that breaks one was damaged
 * or written by something else, and would forecast wrong numbers without any other sign. */
static void check_qmat(binder *b, const char *prefix, const kr_qmat *m) {
    if (b->status != KR_OK) return;
    const uint8_t *data = m->data;
    for (int r = 0; r < m->n && b->status == KR_OK; r++) {
        if (m->fmt == KR_WFMT_INT8 || m->fmt == KR_WFMT_FP8) {
            float sc;
            memcpy(&sc, (const uint8_t *)m->scale + 4 * (size_t)r, 4);
            if (sc < 0.0f && isfinite(sc)) /* NaN and inf: check_finite's (allow_nonfinite) */
                b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                         "%s: tensor '%s.qscale' row %d: negative scale %g: the "
                                         "checkpoint is corrupt",
                                         b->label, prefix, r, (double)sc);
        }
        if (m->fmt == KR_WFMT_INT8 && b->status == KR_OK) {
            const int8_t *c = (const int8_t *)data + (size_t)r * (size_t)m->kp;
            /* Branch-free sum, minimum and padding OR, so the compiler vectorises the pass
             * (it read 110 MB of Kronos-base codes at 0.5 GB/s with a branch per code); the
             * offending column is looked for only once something is off. |sum| <= 127 kp. */
            int32_t sum = 0;
            int8_t lowest = 0;
            uint8_t padding = 0;
            int j0 = 0;
            for (; j0 + 64 <= m->k; j0 += 64) { /* a fixed trip count: vectorised at -O2 */
                int16_t part = 0;
                for (int j = 0; j < 64; j++) {
                    part = (int16_t)(part + c[j0 + j]);
                    lowest = c[j0 + j] < lowest ? c[j0 + j] : lowest;
                }
                sum += part;
            }
            for (int j = j0; j < m->k; j++) {
                sum += c[j];
                lowest = c[j] < lowest ? c[j] : lowest;
            }
            for (int j = m->k; j < m->kp; j++) padding |= (uint8_t)c[j];
            int bad = -1;
            if (lowest < -127 || padding)
                for (int j = 0; j < m->kp && bad < 0; j++)
                    if (c[j] < -127 || (j >= m->k && c[j] != 0)) bad = j;
            int32_t stored;
            memcpy(&stored, (const uint8_t *)m->row_sum + 4 * (size_t)r, 4);
            if (bad >= 0)
                b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                         "%s: tensor '%s.qweight' row %d column %d: code %d %s: "
                                         "the checkpoint is corrupt",
                                         b->label, prefix, r, bad, c[bad],
                                         bad >= m->k ? "in the zero padding" : "below -127");
            else if (sum != stored)
                b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                         "%s: tensor '%s.qrowsum' row %d is %d, but the row's "
                                         "codes sum to %d: the checkpoint is corrupt",
                                         b->label, prefix, r, stored, sum);
        }
        if (m->fmt == KR_WFMT_Q4) {
            int groups = m->kp / m->group;
            for (int g = 0; g < groups && b->status == KR_OK; g++) {
                size_t gi = (size_t)r * (size_t)groups + (size_t)g;
                uint16_t gs;
                memcpy(&gs, (const uint8_t *)m->gscale + 2 * gi, 2);
                uint8_t z = m->gzero[gi];
                /* -0 is harmless; -inf and NaN are check_finite's (allow_nonfinite). */
                int negative = (gs & 0x8000u) && (gs & 0x7FFFu) && (gs & 0x7C00u) != 0x7C00u;
                if (negative || z > 15)
                    b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                             "%s: '%s' row %d group %d: %s: the checkpoint is "
                                             "corrupt",
                                             b->label, prefix, r, g,
                                             z > 15 ? "zero point above 15 (qgzero)"
                                                    : "negative scale (qgscale)");
            }
        }
        if (m->fmt != KR_WFMT_INT8 && m->k < m->kp && b->status == KR_OK) {
            int j = bad_padding(m, r);
            if (j >= 0)
                b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                         "%s: tensor '%s.qweight' row %d column %d: padding "
                                         "(columns %d..%d of a %d-input Linear) is not a zero "
                                         "weight: the checkpoint is corrupt",
                                         b->label, prefix, r, j, m->k, m->kp - 1, m->k);
        }
    }
}

/* A Linear of a kronos quantize checkpoint: `prefix`.qweight and its scales (quant.h). The
 * qweight's dtype names the format, so one checkpoint may mix formats (model.c keeps the
 * output heads of 8- and 4-bit models in bf16). */
static void bind_qlinear(binder *b, kr_linear *l, const char *prefix) {
    if (b->status != KR_OK) return;
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s.qweight", prefix);
    const kr_st_tensor *t = kr_st_find(b->st, name);
    kr_qmat m = { .fmt = (kr_wfmt)b->quant.format, .n = l->n_out, .k = l->n_in };
    if (t && t->dtype == KR_DT_BF16)
        m.fmt = KR_WFMT_BF16;
    else if (t && t->dtype == KR_DT_I8)
        m.fmt = KR_WFMT_INT8;
    else if (t && t->dtype == KR_DT_F8_E4M3)
        m.fmt = KR_WFMT_FP8;
    else if (t && t->dtype == KR_DT_U8)
        m.fmt = KR_WFMT_Q4;
    m.group = m.fmt == KR_WFMT_Q4 ? b->quant.group_size : 0;
    int align = kr_wfmt_row_align(m.fmt, m.group);
    m.kp = (m.k + align - 1) / align * align;
    t = NULL;
    switch (m.fmt) {
    case KR_WFMT_BF16: t = find_exact(b, prefix, "qweight", KR_DT_BF16, m.n, m.kp, 0); break;
    case KR_WFMT_INT8: t = find_exact(b, prefix, "qweight", KR_DT_I8, m.n, m.kp, 0); break;
    case KR_WFMT_FP8: t = find_exact(b, prefix, "qweight", KR_DT_F8_E4M3, m.n, m.kp, 0); break;
    case KR_WFMT_Q4:
        if (m.group != 32 && m.group != 64) {
            b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                     "%s: '%s' is 4-bit but config.json gives no q4 group_size",
                                     b->label, name);
            return;
        }
        t = find_exact(b, prefix, "qweight", KR_DT_U8, m.n, m.kp / 2, 0);
        break;
    default: break;
    }
    if (t) m.data = t->data;
    if (m.fmt == KR_WFMT_INT8 || m.fmt == KR_WFMT_FP8) {
        if ((t = find_exact(b, prefix, "qscale", KR_DT_F32, m.n, -1, 0))) m.scale = t->data;
        check_scale_range(b, t, m.fmt == KR_WFMT_INT8 ? 128.0f : 448.0f);
    }
    if (m.fmt == KR_WFMT_INT8) {
        if ((t = find_exact(b, prefix, "qrowsum", KR_DT_I32, m.n, -1, 0))) m.row_sum = t->data;
    }
    if (m.fmt == KR_WFMT_Q4) {
        int64_t g = m.kp / m.group;
        if ((t = find_exact(b, prefix, "qgscale", KR_DT_F16, m.n, g, 0))) m.gscale = t->data;
        if ((t = find_exact(b, prefix, "qgzero", KR_DT_U8, m.n, g, 0))) m.gzero = t->data;
    }
    if ((t = find_exact(b, prefix, "qinscale", KR_DT_F32, m.k, -1, 1))) m.in_scale = t->data;
    check_qmat(b, prefix, &m);
    if (b->status != KR_OK) return;
    if (b->nq == b->capq) {
        int cap = b->capq ? 2 * b->capq : 64;
        qslot *q = realloc(b->q, (size_t)cap * sizeof *q);
        if (!q) {
            b->status = kr_error_set(b->err, KR_ERR_NOMEM, "%s: out of memory", b->label);
            return;
        }
        b->q = q;
        b->capq = cap;
    }
    b->q[b->nq++] = (qslot){ l, m };
    b->q_bytes += kr_qmat_bytes(&m);
    b->n_params += (size_t)m.n * (size_t)m.k;
}

/* Linear layer `prefix`.weight [n_out][n_in] (+ `prefix`.bias [n_out] when with_bias). */
static void bind_linear(binder *b, kr_linear *l, int n_out, int n_in, int with_bias,
                        const char *prefix) {
    l->n_out = n_out;
    l->n_in = n_in;
    l->b = NULL;
    if (b->quant.format != KR_WFMT_F32)
        bind_qlinear(b, l, prefix);
    else
        bind(b, &l->w, n_out, n_in, "%s.weight", prefix);
    if (with_bias) bind(b, &l->b, n_out, -1, "%s.bias", prefix);
}

/* `file_rotary` = 0 skips the stored inv_freq and always computes it: the s2 cross-attention
 * never rotates (query length 1), so its buffer is ignored rather than validated. */
static void bind_attn(binder *b, kr_attn_weights *a, int d_model, int n_heads, int file_rotary,
                      const char *prefix) {
    static const char *const proj[4] = { "q_proj", "k_proj", "v_proj", "out_proj" };
    kr_linear *dst[4] = { &a->q, &a->k, &a->v, &a->out };
    char name[NAME_MAX_LEN];
    a->n_heads = n_heads;
    a->head_dim = d_model / n_heads;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, proj[i]);
        bind_linear(b, dst[i], d_model, d_model, 1, name);
    }
    if (file_rotary) {
        bind_rotary(b, &a->inv_freq, a->head_dim, "%s.rotary.inv_freq", prefix);
    } else if (b->status == KR_OK && push_slot(b, &a->inv_freq, NULL, a->head_dim / 2)) {
        b->arena_floats += (size_t)(a->head_dim / 2);
        b->n_floats += (size_t)(a->head_dim / 2);
    }
}

static void bind_block(binder *b, kr_block_weights *blk, int d_model, int n_heads, int ff_dim,
                       const char *prefix, int index) {
    char p[64], name[NAME_MAX_LEN];
    snprintf(p, sizeof p, "%s.%d", prefix, index);
    bind(b, &blk->norm1, d_model, -1, "%s.norm1.weight", p);
    bind(b, &blk->norm2, d_model, -1, "%s.norm2.weight", p);
    snprintf(name, sizeof name, "%s.self_attn", p);
    bind_attn(b, &blk->attn, d_model, n_heads, 1, name);
    snprintf(name, sizeof name, "%s.ffn.w1", p);
    bind_linear(b, &blk->w1, ff_dim, d_model, 0, name);
    snprintf(name, sizeof name, "%s.ffn.w2", p);
    bind_linear(b, &blk->w2, d_model, ff_dim, 0, name);
    snprintf(name, sizeof name, "%s.ffn.w3", p);
    bind_linear(b, &blk->w3, ff_dim, d_model, 0, name);
}

/* A checkpoint with more blocks than the config promises was saved from a different
 * config; ignoring the extra blocks would silently run a different model. */
static void check_layer_range(binder *b, const char *prefix, int n_blocks, const char *key,
                              int key_value) {
    if (b->status != KR_OK) return;
    size_t pl = strlen(prefix);
    for (int i = 0; i < kr_st_count(b->st); i++) {
        const char *name = kr_st_at(b->st, i)->name;
        if (strncmp(name, prefix, pl) != 0 || name[pl] != '.') continue;
        const char *p = name + pl + 1;
        if (*p < '0' || *p > '9') continue;
        long idx = 0;
        while (*p >= '0' && *p <= '9' && idx < 1000000) idx = idx * 10 + (*p++ - '0');
        if (idx >= n_blocks) {
            b->status = kr_error_set(b->err, KR_ERR_MODEL,
                                     "%s: tensor '%s' is block %ld of '%s', but config.json has "
                                     "%s = %d (%d blocks): checkpoint and config do not match",
                                     b->label, name, idx, prefix, key, key_value, n_blocks);
            return;
        }
    }
}

/* torch: 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), all in float32. powf
 * matches the buffers torch 1.13 stored for head_dim 8, 16, 64 bit for bit; for head_dim 52
 * one element differs by 1 ulp (torch's vectorised pow is not correctly rounded), which is
 * why a stored F32 buffer is always preferred. */
static void rotary_inv_freq(float *dst, int64_t half, int64_t dim) {
    for (int64_t i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)dim;
        dst[i] = 1.0f / powf(10000.0f, e);
    }
}

/* Arrays of a foreign writer's file may be misaligned for their element type; ours never are
 * (the writer orders tensors by element size), so this copy is the rare path. */
static const void *aligned_or_copy(weights_owner *o, const void *p, size_t bytes, size_t align,
                                   int *ok) {
    if (!p || (uintptr_t)p % align == 0) return p;
    void **c = realloc(o->copies, (size_t)(o->n_copies + 1) * sizeof *c);
    void *mem = malloc(bytes ? bytes : 1);
    if (!c || !mem) {
        if (c) o->copies = c;
        free(mem);
        *ok = 0;
        return NULL;
    }
    o->copies = c;
    memcpy(mem, p, bytes);
    o->copies[o->n_copies++] = mem;
    return mem;
}

static kr_status finish_qslots(binder *b, weights_owner *o) {
    if (!b->nq) return KR_OK;
    o->qmats = calloc((size_t)b->nq, sizeof *o->qmats);
    int ok = o->qmats != NULL;
    for (int i = 0; ok && i < b->nq; i++) {
        kr_qmat m = b->q[i].m;
        size_t n = (size_t)m.n, groups = m.group ? (size_t)(m.kp / m.group) : 0;
        m.scale = aligned_or_copy(o, m.scale, n * 4, 4, &ok);
        m.row_sum = aligned_or_copy(o, m.row_sum, n * 4, 4, &ok);
        m.gscale = aligned_or_copy(o, m.gscale, n * groups * 2, 2, &ok);
        m.in_scale = aligned_or_copy(o, m.in_scale, (size_t)m.k * 4, 4, &ok);
        m.data = aligned_or_copy(o, m.data, m.fmt == KR_WFMT_BF16 ? n * (size_t)m.kp * 2 : 0,
                                 m.fmt == KR_WFMT_BF16 ? 2 : 1, &ok);
        o->qmats[i] = m;
        b->q[i].l->q = &o->qmats[i];
    }
    if (!ok) return kr_error_set(b->err, KR_ERR_NOMEM, "%s: out of memory", b->label);
    return KR_OK;
}

/* Second pass: every slot gets its pointer. Returns the owner (mapping + arena). */
static kr_status binder_finish(binder *b, kr_safetensors *st, weights_owner **out) {
    *out = NULL;
    if (b->status != KR_OK) return b->status;
    weights_owner *o = calloc(1, sizeof *o);
    if (!o) return kr_error_set(b->err, KR_ERR_NOMEM, "%s: out of memory", b->label);
    if (b->arena_floats) {
        o->arena = malloc(b->arena_floats * sizeof(float));
        if (!o->arena) {
            free(o);
            return kr_error_set(b->err, KR_ERR_NOMEM,
                                "%s: out of memory converting %zu weights to f32", b->label,
                                b->arena_floats);
        }
    }
    size_t used = 0;
    for (int i = 0; i < b->n; i++) {
        slot *s = &b->slots[i];
        if (s->t && usable_in_place(s->t)) {
            *s->dst = (const float *)s->t->data;
            continue;
        }
        float *dst = o->arena + used;
        used += (size_t)s->n;
        if (s->t) {
            kr_status rc = kr_st_to_f32(s->t, dst, b->err);
            if (rc != KR_OK) {
                free(o->arena);
                free(o);
                return rc;
            }
        } else {
            rotary_inv_freq(dst, s->n, 2 * s->n);
        }
        *s->dst = dst;
    }
    o->st = st;
    *out = o;
    return finish_qslots(b, o);
}

static void owner_free(void *p) {
    weights_owner *o = p;
    if (!o) return;
    kr_st_close(o->st);
    free(o->arena);
    free(o->qmats);
    for (int i = 0; i < o->n_copies; i++) free(o->copies[i]);
    free(o->copies);
    free(o);
}

/* The end of a load: the bound weights go to an owner, which takes *st over (then *st is
 * NULL), and dir is copied. On failure nothing is left to the caller but *st when no owner
 * took it. The binder's lists are freed either way. */
static kr_status binder_hand_over(binder *b, kr_safetensors **st, const char *dir, void **owner,
                                  char **dir_copy, size_t *n_params, size_t *bytes) {
    weights_owner *o;
    kr_status rc = binder_finish(b, *st, &o);
    if (o) *st = NULL;
    char *copy = NULL;
    if (rc == KR_OK && !(copy = strdup(dir)))
        rc = kr_error_set(b->err, KR_ERR_NOMEM, "%s: out of memory", b->label);
    free(b->slots);
    free(b->q);
    b->slots = NULL;
    b->q = NULL;
    if (rc != KR_OK) {
        owner_free(o);
        return rc;
    }
    *owner = o;
    *dir_copy = copy;
    *n_params = b->n_params;
    *bytes = b->n_floats * sizeof(float) + b->q_bytes;
    return KR_OK;
}

const kr_safetensors *kr_weights_source(const void *owner) {
    return owner ? ((const weights_owner *)owner)->st : NULL;
}

static char *join_path(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Maps (or with opts->no_mmap reads) dir/model.safetensors; *st_path (caller frees) names it
 * in later messages. */
static kr_status open_dir(const char *dir, const kr_weights_opts *opts, char **st_path,
                          kr_safetensors **st, kr_error *err) {
    *st = NULL;
    *st_path = join_path(dir, "model.safetensors");
    if (!*st_path) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
    kr_status rc =
        opts && opts->no_mmap ? kr_st_read(*st_path, st, err) : kr_st_open(*st_path, st, err);
    if (rc != KR_OK) {
        free(*st_path);
        *st_path = NULL;
    }
    return rc;
}

/* Opens dir/model.safetensors (open_dir) and readies a binder over it for a checkpoint
 * quantised as `quant`. On failure nothing is left open. */
static kr_status binder_open(binder *b, const char *dir, const kr_weights_opts *opts,
                             kr_quant_config quant, char **st_path, kr_safetensors **st,
                             kr_error *err) {
    kr_status rc = open_dir(dir, opts, st_path, st, err);
    *b = (binder){ .st = *st,
                   .label = *st_path,
                   .err = err,
                   .quant = quant,
                   .check_finite = !(opts && opts->allow_nonfinite) };
    return rc;
}

/* What a load that failed after binder_open drops: the binder's tables, the file (unless
 * binder_hand_over took it) and its name. */
static void binder_drop(binder *b, char *st_path, kr_safetensors *st) {
    free(b->slots);
    free(b->q);
    free(st_path);
    kr_st_close(st);
}

/* ---------------------------------------------------------------- tokenizer */

void kr_tokenizer_weights_free(kr_tokenizer_weights *w) {
    if (!w) return;
    kr_quant_owner_free(w->qowner);
    owner_free(w->owner);
    free(w->dir);
    free(w->enc);
    free(w->dec);
    free(w);
}

kr_status kr_tokenizer_weights_load(const char *dir, const kr_weights_opts *opts,
                                    kr_tokenizer_weights **out, kr_error *err) {
    if (!dir || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_tokenizer_weights_load: NULL argument");
    *out = NULL;
    char *cfg_path = join_path(dir, "config.json");
    if (!cfg_path) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
    kr_tokenizer_config cfg;
    kr_status rc = kr_tokenizer_config_load(cfg_path, &cfg, err);
    free(cfg_path);
    if (rc != KR_OK) return rc;

    char *st_path;
    kr_safetensors *st;
    binder b;
    if ((rc = binder_open(&b, dir, opts, cfg.quant, &st_path, &st, err)) != KR_OK) return rc;

    kr_tokenizer_weights *w = calloc(1, sizeof *w);
    if (!w) {
        rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", st_path);
        goto fail;
    }
    w->cfg = cfg;
    w->n_enc = cfg.n_enc_layers - 1; /* the reference builds n_layers - 1 blocks */
    w->n_dec = cfg.n_dec_layers - 1;
    w->enc = calloc((size_t)(w->n_enc ? w->n_enc : 1), sizeof *w->enc);
    w->dec = calloc((size_t)(w->n_dec ? w->n_dec : 1), sizeof *w->dec);
    if (!w->enc || !w->dec) {
        rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", st_path);
        goto fail;
    }

    const int d = cfg.d_model, q = cfg.s1_bits + cfg.s2_bits;
    check_layer_range(&b, "encoder", w->n_enc, "n_enc_layers", cfg.n_enc_layers);
    check_layer_range(&b, "decoder", w->n_dec, "n_dec_layers", cfg.n_dec_layers);
    bind_linear(&b, &w->embed, d, cfg.d_in, 1, "embed");
    for (int i = 0; i < w->n_enc; i++)
        bind_block(&b, &w->enc[i], d, cfg.n_heads, cfg.ff_dim, "encoder", i);
    for (int i = 0; i < w->n_dec; i++)
        bind_block(&b, &w->dec[i], d, cfg.n_heads, cfg.ff_dim, "decoder", i);
    bind_linear(&b, &w->quant_embed, q, d, 1, "quant_embed");
    bind_linear(&b, &w->post_quant_embed, d, q, 1, "post_quant_embed");
    bind_linear(&b, &w->head, cfg.d_in, d, 1, "head");
    /* post_quant_embed_pre (s1-only decode, a training loss term) and tokenizer.bsq.*
     * (integer buffers) are deliberately not bound. */

    rc = binder_hand_over(&b, &st, dir, &w->owner, &w->dir, &w->n_params, &w->bytes);
    if (rc == KR_OK) {
        free(st_path);
        *out = w;
        return KR_OK;
    }

fail:
    binder_drop(&b, st_path, st);
    kr_tokenizer_weights_free(w);
    return rc;
}

/* ---------------------------------------------------------------- predictor */

void kr_predictor_weights_free(kr_predictor_weights *w) {
    if (!w) return;
    kr_quant_owner_free(w->qowner);
    owner_free(w->owner);
    free(w->dir);
    free(w->blocks);
    free(w);
}

kr_status kr_predictor_weights_load(const char *dir, const kr_weights_opts *opts,
                                    kr_predictor_weights **out, kr_error *err) {
    if (!dir || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_predictor_weights_load: NULL argument");
    *out = NULL;
    char *cfg_path = join_path(dir, "config.json");
    if (!cfg_path) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
    kr_predictor_config cfg;
    kr_status rc = kr_predictor_config_load(cfg_path, &cfg, err);
    free(cfg_path);
    if (rc != KR_OK) return rc;

    char *st_path;
    kr_safetensors *st;
    binder b;
    if ((rc = binder_open(&b, dir, opts, cfg.quant, &st_path, &st, err)) != KR_OK) return rc;

    kr_predictor_weights *w = calloc(1, sizeof *w);
    if (!w) {
        rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", st_path);
        goto fail;
    }
    w->cfg = cfg;
    w->blocks = calloc((size_t)cfg.n_layers, sizeof *w->blocks);
    if (!w->blocks) {
        rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", st_path);
        goto fail;
    }

    const int d = cfg.d_model;
    const int64_t v1 = (int64_t)1 << cfg.s1_bits, v2 = (int64_t)1 << cfg.s2_bits;
    check_layer_range(&b, "transformer", cfg.n_layers, "n_layers", cfg.n_layers);
    bind(&b, &w->emb_s1, v1, d, "embedding.emb_s1.weight");
    bind(&b, &w->emb_s2, v2, d, "embedding.emb_s2.weight");
    bind_linear(&b, &w->fusion, d, 2 * d, 1, "embedding.fusion_proj");
    const float **te[5] = { &w->te_minute, &w->te_hour, &w->te_weekday, &w->te_day, &w->te_month };
    for (int i = 0; i < 5; i++) {
        /* learn_te=False wraps the table in FixedEmbedding, whose nn.Embedding is `.emb`. */
        bind(&b, te[i], k_te_rows[i], d,
             cfg.learn_te ? "time_emb.%s_embed.weight" : "time_emb.%s_embed.emb.weight",
             k_te_names[i]);
    }
    for (int i = 0; i < cfg.n_layers; i++)
        bind_block(&b, &w->blocks[i], d, cfg.n_heads, cfg.ff_dim, "transformer", i);
    bind(&b, &w->norm, d, -1, "norm.weight");
    bind_attn(&b, &w->dep, d, DEP_HEADS, 0, "dep_layer.cross_attn");
    bind(&b, &w->dep_norm, d, -1, "dep_layer.norm.weight");
    bind_linear(&b, &w->head_s1, (int)v1, d, 1, "head.proj_s1");
    bind_linear(&b, &w->head_s2, (int)v2, d, 1, "head.proj_s2");

    rc = binder_hand_over(&b, &st, dir, &w->owner, &w->dir, &w->n_params, &w->bytes);
    if (rc == KR_OK) {
        free(st_path);
        *out = w;
        return KR_OK;
    }

fail:
    binder_drop(&b, st_path, st);
    kr_predictor_weights_free(w);
    return rc;
}
