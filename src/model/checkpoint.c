/*
 * model/checkpoint — a checkpoint directory's tensors, read-only, by their state_dict names
 * (public API, kronos.h "checkpoint tensors"): what bindings show as a model's parameters.
 *
 * The file stays mapped read-only; F32 tensors aligned for float are given in place, the
 * others converted once at open into one arena (f32 for floating point, int64 for integers),
 * so a view is valid, and constant, for the checkpoint's life.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kronos.h"
#include "model/safetensors.h"

_Static_assert(KR_TENSOR_MAX_DIMS >= KR_ST_MAX_DIMS, "a view holds every shape a file may have");

struct kr_checkpoint {
    kr_safetensors *st;
    kr_tensor_view *views; /* [n] */
    int n;
    unsigned char *arena; /* converted tensors */
};

static int is_float(kr_dtype dt) {
    return dt == KR_DT_F32 || dt == KR_DT_F16 || dt == KR_DT_BF16 || dt == KR_DT_F64;
}

static int is_int(kr_dtype dt) { return dt == KR_DT_I64 || dt == KR_DT_I32; }

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Bytes of the arena a tensor needs (0: given in place), rounded up to 8 for alignment. */
static size_t arena_bytes(const kr_st_tensor *t) {
    size_t elem = is_float(t->dtype) ? sizeof(float) : sizeof(int64_t);
    int in_place = (t->dtype == KR_DT_F32 && (uintptr_t)t->data % sizeof(float) == 0) ||
                   (t->dtype == KR_DT_I64 && (uintptr_t)t->data % sizeof(int64_t) == 0);
    if (in_place || t->numel == 0) return 0;
    return ((size_t)t->numel * elem + 7) & ~(size_t)7;
}

/* A kronos quantize checkpoint names its quantised Linears PREFIX.qweight (with qscale ...):
 * their weights are no f32 tensor of the state_dict. */
static kr_status check_supported(const kr_safetensors *st, const char *path, kr_error *err) {
    for (int i = 0; i < kr_st_count(st); i++) {
        const kr_st_tensor *t = kr_st_at(st, i);
        if (ends_with(t->name, ".qweight"))
            return kr_error_set(err, KR_ERR_UNSUPPORTED,
                                "%s: tensor '%s': a kronos quantize checkpoint (its Linears are "
                                "stored quantised, as %s), whose weights are not exposed as "
                                "tensors; open the f32 checkpoint it was made from",
                                path, t->name, kr_dtype_name(t->dtype));
        if (!is_float(t->dtype) && !is_int(t->dtype))
            return kr_error_set(err, KR_ERR_UNSUPPORTED,
                                "%s: tensor '%s': dtype %s is neither floating point nor an "
                                "integer buffer (not a Kronos checkpoint's)",
                                path, t->name, kr_dtype_name(t->dtype));
    }
    return KR_OK;
}

static kr_status fill_views(kr_checkpoint *ck, const char *path, kr_error *err) {
    size_t total = 0;
    for (int i = 0; i < ck->n; i++) {
        size_t b = arena_bytes(kr_st_at(ck->st, i));
        if (b > SIZE_MAX - total)
            return kr_error_set(err, KR_ERR_NOMEM, "%s: tensors too large to convert", path);
        total += b;
    }
    if (total && !(ck->arena = malloc(total)))
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory converting %zu bytes of tensors",
                            path, total);
    size_t at = 0;
    for (int i = 0; i < ck->n; i++) {
        const kr_st_tensor *t = kr_st_at(ck->st, i);
        kr_tensor_view *v = &ck->views[i];
        v->name = t->name;
        v->stored_dtype = kr_dtype_name(t->dtype);
        v->dtype = is_float(t->dtype) ? "F32" : "I64";
        v->ndim = t->ndim;
        for (int d = 0; d < t->ndim && d < KR_TENSOR_MAX_DIMS; d++) v->shape[d] = t->shape[d];
        v->numel = t->numel;
        v->is_buffer = !is_float(t->dtype) || ends_with(t->name, ".inv_freq");
        size_t b = arena_bytes(t);
        if (t->numel == 0) continue;
        if (b == 0) {
            v->data = t->data;
            continue;
        }
        void *dst = ck->arena + at;
        at += b;
        kr_error e;
        kr_status st = is_float(t->dtype) ? kr_st_to_f32(t, dst, &e) : kr_st_to_i64(t, dst, &e);
        if (st != KR_OK) return kr_error_set(err, st, "%s: %s", path, e.message);
        v->data = dst;
        v->converted = 1;
    }
    return KR_OK;
}

kr_status kr_checkpoint_open(const char *dir, kr_checkpoint **out, kr_error *err) {
    if (!dir || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_checkpoint_open: NULL argument");
    *out = NULL;
    size_t n = strlen(dir) + sizeof "/model.safetensors";
    char *path = malloc(n);
    kr_checkpoint *ck = calloc(1, sizeof *ck);
    if (!path || !ck) {
        free(path);
        free(ck);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
    }
    snprintf(path, n, "%s/model.safetensors", dir);
    kr_status st = kr_st_open(path, &ck->st, err);
    if (st == KR_OK) st = check_supported(ck->st, path, err);
    if (st == KR_OK) {
        ck->n = kr_st_count(ck->st);
        ck->views = calloc((size_t)(ck->n ? ck->n : 1), sizeof *ck->views);
        if (!ck->views) st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == KR_OK) st = fill_views(ck, path, err);
    free(path);
    if (st != KR_OK) {
        kr_checkpoint_free(ck);
        return st;
    }
    *out = ck;
    return KR_OK;
}

void kr_checkpoint_free(kr_checkpoint *ck) {
    if (!ck) return;
    kr_st_close(ck->st);
    free(ck->views);
    free(ck->arena);
    free(ck);
}

int kr_checkpoint_tensor_count(const kr_checkpoint *ck) { return ck ? ck->n : 0; }

kr_status kr_checkpoint_tensor(const kr_checkpoint *ck, int index, kr_tensor_view *out,
                               kr_error *err) {
    if (!ck || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_checkpoint_tensor: NULL argument");
    if (index < 0 || index >= ck->n)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "kr_checkpoint_tensor: index %d is outside 0..%d", index, ck->n - 1);
    *out = ck->views[index];
    return KR_OK;
}
