/*
 * model/safetensors — validated reader (mmap or in-memory image) and writer of the
 * safetensors format. See safetensors.h for the format and the contract.
 *
 * The reader is the only code that touches untrusted model bytes, so it checks everything
 * before any tensor is handed out: after kr_st_open* succeeds, every kr_st_tensor has a
 * known dtype, a shape whose element count fits in int64, and a data range that lies inside
 * the data section, matches numel × element size and overlaps no other tensor. Consumers
 * can then index tensor data without further bounds checks.
 */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/fsutil.h"

/* A header this large is certainly not a model (the Kronos-base header is ~15 KB); refusing
 * it bounds the memory cJSON may allocate for a hostile file. */
#define ST_MAX_HEADER ((uint64_t)100 * 1024 * 1024)

/* Offsets and dims travel through cJSON as doubles; above 2^53 they are no longer exact. */
#define ST_MAX_EXACT_INT 9007199254740992.0

struct kr_safetensors {
    char *label; /* path or caller's label, owned */
    void *map; /* mmap base (NULL for in-memory images) */
    size_t map_len;
    void *copy; /* the file read into memory by kr_st_read (owned), else NULL */
    const uint8_t *data; /* first byte after the header */
    size_t data_len;
    kr_st_tensor *tensors; /* [n] in header order */
    int n;
    const kr_st_tensor **by_name; /* [n] sorted by name, for kr_st_find */
    char *names; /* one block holding every tensor name */
};

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    size_t size;
} k_dtypes[KR_DT_COUNT] = {
    [KR_DT_F32] = { "F32", 4 },   [KR_DT_F16] = { "F16", 2 },         [KR_DT_BF16] = { "BF16", 2 },
    [KR_DT_F64] = { "F64", 8 },   [KR_DT_I64] = { "I64", 8 },         [KR_DT_I32] = { "I32", 4 },
    [KR_DT_I16] = { "I16", 2 },   [KR_DT_I8] = { "I8", 1 },           [KR_DT_U8] = { "U8", 1 },
    [KR_DT_BOOL] = { "BOOL", 1 }, [KR_DT_F8_E4M3] = { "F8_E4M3", 1 },
};

size_t kr_dtype_size(kr_dtype dt) { return ((unsigned)dt < KR_DT_COUNT) ? k_dtypes[dt].size : 0; }

const char *kr_dtype_name(kr_dtype dt) {
    return ((unsigned)dt < KR_DT_COUNT) ? k_dtypes[dt].name : "?";
}

static int dtype_from_name(const char *s, kr_dtype *out) {
    for (int i = 0; i < KR_DT_COUNT; i++) {
        if (strcmp(s, k_dtypes[i].name) == 0) {
            *out = (kr_dtype)i;
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- header parsing */

/* A JSON number that is an exact non-negative integer representable in a double. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_EXACT_INT || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

typedef struct range_ref {
    uint64_t begin, end;
    int index;
} range_ref;

static int cmp_range(const void *a, const void *b) {
    const range_ref *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_by_name(const void *a, const void *b) {
    const kr_st_tensor *x = *(const kr_st_tensor *const *)a;
    const kr_st_tensor *y = *(const kr_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static kr_status check_metadata(const cJSON *meta, const char *label, kr_error *err) {
    if (!cJSON_IsObject(meta))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: '__metadata__' is not an object", label);
    for (const cJSON *m = meta->child; m; m = m->next) {
        if (!cJSON_IsString(m))
            return kr_error_set(err, KR_ERR_FORMAT, "%s: '__metadata__' entry '%s' is not a string",
                                label, m->string ? m->string : "");
    }
    return KR_OK;
}

/* Validates one header entry and fills t (name left for the caller). `name` is only used
 * in messages. */
static kr_status parse_entry(const cJSON *e, const char *name, const char *label, size_t data_len,
                             kr_st_tensor *t, range_ref *r, kr_error *err) {
    if (!cJSON_IsObject(e))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': entry is not an object", label,
                            name);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!dt)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': missing 'dtype'", label, name);
    if (!cJSON_IsString(dt))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': 'dtype' is not a string", label,
                            name);
    if (!dtype_from_name(dt->valuestring, &t->dtype))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", label,
                            name, dt->valuestring);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!shape)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': missing 'shape'", label, name);
    if (!cJSON_IsArray(shape))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': 'shape' is not an array", label,
                            name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > KR_ST_MAX_DIMS)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': %d dimensions (at most %d)",
                            label, name, ndim, KR_ST_MAX_DIMS);
    t->ndim = ndim;
    int64_t numel = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: tensor '%s': shape[%d] is not a non-negative integer", label,
                                name, i);
        t->shape[i] = (int64_t)v;
        /* Checked multiplication: a header like [2^40, 2^40] must not wrap to a small size. */
        if (__builtin_mul_overflow(numel, (int64_t)v, &numel))
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: tensor '%s': element count of the shape overflows", label,
                                name);
    }
    t->numel = numel;
    uint64_t want_bytes;
    if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)k_dtypes[t->dtype].size, &want_bytes))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': byte size overflows", label,
                            name);

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!off)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': missing 'data_offsets'", label,
                            name);
    uint64_t begin, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &begin) ||
        !json_uint(off->child->next, &end))
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: tensor '%s': 'data_offsets' is not [begin, end] of "
                            "non-negative integers",
                            label, name);
    if (begin > end)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", label,
                            name, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_len)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets end %llu is past the data section "
                            "(%zu bytes; file truncated?)",
                            label, name, (unsigned long long)end, data_len);
    if (end - begin != want_bytes)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets span %llu bytes but shape × %s "
                            "needs %llu",
                            label, name, (unsigned long long)(end - begin), k_dtypes[t->dtype].name,
                            (unsigned long long)want_bytes);
    t->nbytes = (size_t)want_bytes;
    r->begin = begin;
    r->end = end;
    return KR_OK;
}

/* Parses and validates the header of image [base, base+len); fills st. */
static kr_status parse_image(kr_safetensors *st, const uint8_t *base, size_t len, kr_error *err) {
    const char *label = st->label;
    if (len < 8)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: file is %zu bytes, shorter than the 8-byte header length", label,
                            len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | base[i];
    if (hlen == 0) return kr_error_set(err, KR_ERR_FORMAT, "%s: header length is 0", label);
    if (hlen > ST_MAX_HEADER)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: header length %llu exceeds the %llu-byte limit", label,
                            (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    if (hlen > len - 8)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: header length %llu runs past the end of the file (%zu bytes)",
                            label, (unsigned long long)hlen, len);

    const char *hdr = (const char *)base + 8;
    st->data = base + 8 + hlen;
    st->data_len = len - 8 - (size_t)hlen;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
    if (!root) {
        /* cJSON reports the failure position through `end` (its global error pointer is
         * not thread-safe, so it is not used). */
        size_t at = (end && end >= hdr && end <= hdr + hlen) ? (size_t)(end - hdr) : 0;
        return kr_error_set(err, KR_ERR_FORMAT, "%s: header is not valid JSON (near byte %zu)",
                            label, at);
    }
    kr_status rc = KR_OK;
    /* Only the padding spaces the format allows may follow the JSON object. */
    for (const char *p = end; p < hdr + hlen; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            rc = kr_error_set(err, KR_ERR_FORMAT,
                              "%s: unexpected bytes after the header JSON (byte %zu)", label,
                              (size_t)(p - hdr));
            goto done;
        }
    }
    if (!cJSON_IsObject(root)) {
        rc = kr_error_set(err, KR_ERR_FORMAT, "%s: header JSON is not an object", label);
        goto done;
    }

    int n = 0;
    size_t names_len = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) continue;
        if (strcmp(e->string, "__metadata__") == 0) {
            if ((rc = check_metadata(e, label, err)) != KR_OK) goto done;
            continue;
        }
        if (e->string[0] == '\0') {
            rc = kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '': empty tensor name", label);
            goto done;
        }
        n++;
        names_len += strlen(e->string) + 1;
    }

    st->tensors = calloc((size_t)(n ? n : 1), sizeof *st->tensors);
    st->by_name = calloc((size_t)(n ? n : 1), sizeof *st->by_name);
    st->names = malloc(names_len ? names_len : 1);
    range_ref *ranges = calloc((size_t)(n ? n : 1), sizeof *ranges);
    if (!st->tensors || !st->by_name || !st->names || !ranges) {
        free(ranges);
        rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for %d tensor entries", label, n);
        goto done;
    }

    char *np = st->names;
    int k = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string || strcmp(e->string, "__metadata__") == 0) continue;
        kr_st_tensor *t = &st->tensors[k];
        rc = parse_entry(e, e->string, label, st->data_len, t, &ranges[k], err);
        if (rc != KR_OK) {
            free(ranges);
            goto done;
        }
        size_t nl = strlen(e->string) + 1;
        memcpy(np, e->string, nl);
        t->name = np;
        np += nl;
        t->data = st->data + ranges[k].begin;
        ranges[k].index = k;
        st->by_name[k] = t;
        k++;
    }
    st->n = n;

    /* Names first: a name given twice (often with the same range) is a duplicate, not an
     * overlap of a tensor with itself. */
    qsort(st->by_name, (size_t)n, sizeof *st->by_name, cmp_by_name);
    for (int i = 1; i < n; i++) {
        const char *a = st->by_name[i - 1]->name;
        if (strcmp(a, st->by_name[i]->name) == 0) {
            rc = kr_error_set(err, KR_ERR_FORMAT, "%s: tensor '%s': duplicate name", label, a);
            free(ranges);
            goto done;
        }
    }

    /* Overlap: after sorting by begin, each range must end before the next one starts.
     * Empty tensors occupy no bytes and can never overlap. */
    qsort(ranges, (size_t)n, sizeof *ranges, cmp_range);
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (ranges[i].begin == ranges[i].end) continue;
        if (prev >= 0 && ranges[i].begin < ranges[prev].end) {
            const kr_st_tensor *a = &st->tensors[ranges[prev].index];
            const kr_st_tensor *b = &st->tensors[ranges[i].index];
            rc = kr_error_set(err, KR_ERR_FORMAT,
                              "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' "
                              "[%llu, %llu]",
                              label, b->name, (unsigned long long)ranges[i].begin,
                              (unsigned long long)ranges[i].end, a->name,
                              (unsigned long long)ranges[prev].begin,
                              (unsigned long long)ranges[prev].end);
            free(ranges);
            goto done;
        }
        prev = i;
    }
    free(ranges);

done:
    cJSON_Delete(root);
    return rc;
}

static kr_safetensors *st_alloc(const char *label) {
    kr_safetensors *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->label = strdup(label ? label : "<memory>");
    if (!st->label) {
        free(st);
        return NULL;
    }
    return st;
}

void kr_st_close(kr_safetensors *st) {
    if (!st) return;
    if (st->map) munmap(st->map, st->map_len);
    free(st->copy);
    free(st->tensors);
    free(st->by_name);
    free(st->names);
    free(st->label);
    free(st);
}

kr_status kr_st_open_memory(const void *data, size_t len, const char *label, kr_safetensors **out,
                            kr_error *err) {
    if (!out || (!data && len))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_open_memory: NULL argument");
    *out = NULL;
    kr_safetensors *st = st_alloc(label);
    if (!st) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label ? label : "");
    kr_status rc = parse_image(st, data, len, err);
    if (rc != KR_OK) {
        kr_st_close(st);
        return rc;
    }
    *out = st;
    return KR_OK;
}

kr_status kr_st_open(const char *path, kr_safetensors **out, kr_error *err) {
    if (!path || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_open: NULL argument");
    *out = NULL;
    /* A FIFO, device or directory is refused without blocking (a FIFO without a writer
     * would hold the open for ever). */
    size_t len = 0;
    int fd = kr_open_regular(path, &len, err);
    if (fd < 0) return err ? err->status : KR_ERR_IO;
    kr_safetensors *st = st_alloc(path);
    if (!st) {
        close(fd);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    }
    if (len > 0) {
        /* Read-only private mapping: tensors are used in place, pages come from the page
         * cache and are shared between processes serving the same model. */
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            kr_st_close(st);
            return kr_error_set(err, KR_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
        st->map = m;
        st->map_len = len;
    }
    close(fd);
    kr_status rc = parse_image(st, st->map, len, err);
    if (rc != KR_OK) {
        kr_st_close(st);
        return rc;
    }
    *out = st;
    return KR_OK;
}

/* The whole of fd (len bytes) into a page-aligned buffer, as a mapping would place it. */
static kr_status read_whole(int fd, size_t len, const char *path, void **out, kr_error *err) {
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, len ? len : 1) != 0)
        return kr_error_set(err, KR_ERR_NOMEM, "%s: cannot hold %zu bytes in memory", path, len);
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            free(buf);
            if (r == 0) /* truncated by someone else between the size check and the read */
                return kr_error_set(err, KR_ERR_IO,
                                    "%s: the file shrank while being read (%zu of %zu bytes)", path,
                                    got, len);
            return kr_error_set(err, KR_ERR_IO, "%s: cannot read: %s", path, strerror(e));
        }
        got += (size_t)r;
    }
    *out = buf;
    return KR_OK;
}

kr_status kr_st_read(const char *path, kr_safetensors **out, kr_error *err) {
    if (!path || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_read: NULL argument");
    *out = NULL;
    size_t len = 0;
    int fd = kr_open_regular(path, &len, err);
    if (fd < 0) return err ? err->status : KR_ERR_IO;
    kr_safetensors *st = st_alloc(path);
    kr_status rc = st ? read_whole(fd, len, path, &st->copy, err)
                      : kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    close(fd);
    if (rc == KR_OK) rc = parse_image(st, st->copy, len, err);
    if (rc != KR_OK) {
        kr_st_close(st);
        return rc;
    }
    *out = st;
    return KR_OK;
}

const char *kr_st_label(const kr_safetensors *st) { return st ? st->label : ""; }

int kr_st_count(const kr_safetensors *st) { return st ? st->n : 0; }

const kr_st_tensor *kr_st_at(const kr_safetensors *st, int i) {
    if (!st || i < 0 || i >= st->n) return NULL;
    return &st->tensors[i];
}

const kr_st_tensor *kr_st_find(const kr_safetensors *st, const char *name) {
    if (!st || !name) return NULL;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const kr_st_tensor *t = st->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---------------------------------------------------------------- conversion */

/* IEEE binary16 → binary32, exact (every half is representable as a float). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        /* inf, or nan with its payload kept (mant != 0 stays != 0 after the shift) */
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* Subnormal half: value mant·2^-24; shift until the implicit bit appears, which makes
         * it a normal float. */
        uint32_t e = 127 - 15 + 1;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* bfloat16 is the top half of a binary32, so widening is a shift (nan/inf/subnormals
 * included). */
static float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

kr_status kr_st_to_f32(const kr_st_tensor *t, float *dst, kr_error *err) {
    if (!t || (!dst && t->numel > 0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_to_f32: NULL argument");
    const uint8_t *src = t->data;
    size_t n = (size_t)t->numel;
    /* Element reads go through memcpy: tensor data may sit at any byte offset. */
    switch (t->dtype) {
    case KR_DT_F32:
        if (n) memcpy(dst, src, n * 4);
        break;
    case KR_DT_F16:
    case KR_DT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = t->dtype == KR_DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        break;
    case KR_DT_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            dst[i] = (float)d;
        }
        break;
    case KR_DT_I64:
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            dst[i] = (float)v;
        }
        break;
    case KR_DT_I32:
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, src + 4 * i, 4);
            dst[i] = (float)v;
        }
        break;
    default:
        return kr_error_set(err, KR_ERR_MODEL, "tensor '%s': cannot convert dtype %s to F32",
                            t->name ? t->name : "", kr_dtype_name(t->dtype));
    }
    return KR_OK;
}

kr_status kr_st_to_i64(const kr_st_tensor *t, int64_t *dst, kr_error *err) {
    if (!t || (!dst && t->numel > 0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_to_i64: NULL argument");
    const uint8_t *src = t->data;
    size_t n = (size_t)t->numel;
    switch (t->dtype) {
    case KR_DT_I64:
        if (n) memcpy(dst, src, n * 8);
        break;
    case KR_DT_I32:
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, src + 4 * i, 4);
            dst[i] = v;
        }
        break;
    default:
        return kr_error_set(err, KR_ERR_MODEL, "tensor '%s': cannot convert dtype %s to I64",
                            t->name ? t->name : "", kr_dtype_name(t->dtype));
    }
    return KR_OK;
}

/* ---------------------------------------------------------------- writer */

typedef struct wr_tensor {
    char *name;
    kr_dtype dtype;
    int ndim;
    int64_t shape[KR_ST_MAX_DIMS];
    void *data;
    size_t nbytes;
} wr_tensor;

typedef struct wr_meta {
    char *key, *value;
} wr_meta;

struct kr_st_writer {
    wr_tensor *t;
    int n, cap;
    wr_meta *meta;
    int n_meta, cap_meta;
};

kr_status kr_st_writer_create(kr_st_writer **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_writer_create: NULL argument");
    *out = NULL;
    kr_st_writer *w = calloc(1, sizeof *w);
    if (!w) return kr_error_set(err, KR_ERR_NOMEM, "safetensors writer: out of memory");
    /* save_pretrained writes {"format": "pt"}; some loaders (transformers) insist on it. */
    kr_status rc = kr_st_writer_meta(w, "format", "pt", err);
    if (rc != KR_OK) {
        kr_st_writer_free(w);
        return rc;
    }
    *out = w;
    return KR_OK;
}

void kr_st_writer_free(kr_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->t);
    free(w->meta);
    free(w);
}

kr_status kr_st_writer_meta(kr_st_writer *w, const char *key, const char *value, kr_error *err) {
    if (!w || !key || !value)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_writer_meta: NULL argument");
    char *v = strdup(value);
    if (!v) return kr_error_set(err, KR_ERR_NOMEM, "safetensors writer: out of memory");
    for (int i = 0; i < w->n_meta; i++) {
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = v;
            return KR_OK;
        }
    }
    if (w->n_meta == w->cap_meta) {
        int cap = w->cap_meta ? 2 * w->cap_meta : 4;
        wr_meta *m = realloc(w->meta, (size_t)cap * sizeof *m);
        if (!m) {
            free(v);
            return kr_error_set(err, KR_ERR_NOMEM, "safetensors writer: out of memory");
        }
        w->meta = m;
        w->cap_meta = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return kr_error_set(err, KR_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->meta[w->n_meta].key = k;
    w->meta[w->n_meta].value = v;
    w->n_meta++;
    return KR_OK;
}

kr_status kr_st_writer_add(kr_st_writer *w, const char *name, kr_dtype dtype, int ndim,
                           const int64_t *shape, const void *data, kr_error *err) {
    if (!w || !name || (ndim > 0 && !shape))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_writer_add: NULL argument");
    if (!name[0] || strcmp(name, "__metadata__") == 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "safetensors writer: invalid name '%s'", name);
    if ((unsigned)dtype >= KR_DT_COUNT)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "safetensors writer: tensor '%s': bad dtype",
                            name);
    if (ndim < 0 || ndim > KR_ST_MAX_DIMS)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "safetensors writer: tensor '%s': %d dimensions", name, ndim);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(numel, shape[i], &numel))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "safetensors writer: tensor '%s': invalid shape", name);
    }
    size_t nbytes;
    if (__builtin_mul_overflow((size_t)numel, k_dtypes[dtype].size, &nbytes))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "safetensors writer: tensor '%s': too large",
                            name);
    if (nbytes && !data)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "safetensors writer: tensor '%s': NULL data",
                            name);
    for (int i = 0; i < w->n; i++) {
        if (strcmp(w->t[i].name, name) == 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "safetensors writer: tensor '%s': duplicate name", name);
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        wr_tensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return kr_error_set(err, KR_ERR_NOMEM, "safetensors writer: out of memory");
        w->t = t;
        w->cap = cap;
    }
    wr_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return kr_error_set(err, KR_ERR_NOMEM, "safetensors writer: tensor '%s': out of memory",
                            name);
    }
    if (nbytes) memcpy(t->data, data, nbytes);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->nbytes = nbytes;
    w->n++;
    return KR_OK;
}

/* Growable string for the header JSON. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, unsigned long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    sb_put(b, tmp, (size_t)n);
}

/* JSON string literal with the escapes RFC 8259 requires. */
static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = { '\\', (char)*p };
            sb_put(b, esc, 2);
        } else if (*p < 0x20) {
            sb_fmt(b, "\\u%04llx", *p);
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static int cmp_wr(const void *a, const void *b) {
    const wr_tensor *x = *(const wr_tensor *const *)a, *y = *(const wr_tensor *const *)b;
    size_t sx = k_dtypes[x->dtype].size, sy = k_dtypes[y->dtype].size;
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

kr_status kr_st_writer_save(kr_st_writer *w, const char *path, kr_error *err) {
    if (!w || !path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_st_writer_save: NULL argument");
    /* Larger elements first (then by name): each tensor then starts at a multiple of its own
     * element size, and the data section starts 8-aligned, so every tensor is aligned in the
     * file and in an mmap of it. */
    const wr_tensor **order = malloc((size_t)(w->n ? w->n : 1) * sizeof *order);
    if (!order) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < w->n; i++) order[i] = &w->t[i];
    qsort(order, (size_t)w->n, sizeof *order, cmp_wr);

    sbuf h = { 0 };
    sb_str(&h, "{");
    int first = 1;
    if (w->n_meta) {
        sb_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < w->n_meta; i++) {
            if (i) sb_str(&h, ",");
            sb_json_string(&h, w->meta[i].key);
            sb_str(&h, ":");
            sb_json_string(&h, w->meta[i].value);
        }
        sb_str(&h, "}");
        first = 0;
    }
    unsigned long long off = 0;
    for (int i = 0; i < w->n; i++) {
        const wr_tensor *t = order[i];
        if (!first) sb_str(&h, ",");
        first = 0;
        sb_json_string(&h, t->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, k_dtypes[t->dtype].name);
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++)
            sb_fmt(&h, d ? ",%llu" : "%llu", (unsigned long long)t->shape[d]);
        sb_str(&h, "],\"data_offsets\":[");
        sb_fmt(&h, "%llu", off);
        off += t->nbytes;
        sb_fmt(&h, ",%llu]}", off);
    }
    sb_str(&h, "}");
    while (!h.oom && h.len % 8 != 0) sb_str(&h, " ");
    if (h.oom) {
        free(h.p);
        free(order);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for the header", path);
    }

    /* Write next to the target and rename, so a reader never sees a half-written model. */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 8);
    if (!tmp) {
        free(h.p);
        free(order);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 8, "%s.tmp", path);
    kr_status rc = KR_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = kr_error_set(err, KR_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    uint8_t le[8];
    uint64_t hl = h.len;
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(hl >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(h.p, 1, h.len, f) == h.len;
    for (int i = 0; ok && i < w->n; i++)
        ok = order[i]->nbytes == 0 ||
             fwrite(order[i]->data, 1, order[i]->nbytes, f) == order[i]->nbytes;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        remove(tmp);
        rc = kr_error_set(err, KR_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
        goto out;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        rc = kr_error_set(err, KR_ERR_IO, "%s: cannot rename from %s: %s", path, tmp, strerror(e));
    }
out:
    free(tmp);
    free(h.p);
    free(order);
    return rc;
}
