/*
 * model/safetensors — reading (mmap, validated) and writing the safetensors format:
 * 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}}
 * (+ optional "__metadata__"), then the raw little-endian data; offsets are relative to the
 * first byte after the header.
 *
 * The reader never trusts the file: header length past EOF, bad JSON, unknown dtype, absurd
 * shapes, offsets out of range, data size != shape × element size, overlapping tensors and
 * duplicate names are all errors naming the file and the tensor.
 */
#ifndef KR_MODEL_SAFETENSORS_H
#define KR_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

typedef enum kr_dtype {
    KR_DT_F32,
    KR_DT_F16,
    KR_DT_BF16,
    KR_DT_F64,
    KR_DT_I64,
    KR_DT_I32,
    KR_DT_I16,
    KR_DT_I8,
    KR_DT_U8,
    KR_DT_BOOL,
    KR_DT_F8_E4M3,
    KR_DT_COUNT
} kr_dtype;

#define KR_ST_MAX_DIMS 8

typedef struct kr_st_tensor {
    const char *name; /* borrowed from the file object */
    kr_dtype dtype;
    int ndim;
    int64_t shape[KR_ST_MAX_DIMS];
    int64_t numel;
    const void *data; /* inside the mapping; may be unaligned for its dtype */
    size_t nbytes;
} kr_st_tensor;

typedef struct kr_safetensors kr_safetensors;

/* Maps and validates a file. Caller owns *out; close with kr_st_close. */
KR_PRIVATE kr_status kr_st_open(const char *path, kr_safetensors **out, kr_error *err);
/* Reads the whole file into memory and validates it: the object no longer depends on the
 * file, which may then be replaced or truncated without harm to it (a mapping would fault). */
kr_status kr_st_read(const char *path, kr_safetensors **out, kr_error *err);
/* Validates an in-memory image (borrowed; must outlive the object). `label` names it in
 * errors. Used by the fuzzer and tests. */
kr_status kr_st_open_memory(const void *data, size_t len, const char *label, kr_safetensors **out,
                            kr_error *err);
KR_PRIVATE void kr_st_close(kr_safetensors *st);

const char *kr_st_label(const kr_safetensors *st); /* the path or label */
KR_PRIVATE int kr_st_count(const kr_safetensors *st);
KR_PRIVATE const kr_st_tensor *kr_st_at(const kr_safetensors *st, int i);
/* NULL when absent. */
KR_PRIVATE const kr_st_tensor *kr_st_find(const kr_safetensors *st, const char *name);

size_t kr_dtype_size(kr_dtype dt);
const char *kr_dtype_name(kr_dtype dt); /* "F32", "BF16", ... */

/* Copies/converts a tensor to f32 (F32, F16, BF16, F64, I64, I32 accepted); dst has numel
 * floats. Returns KR_ERR_MODEL for other dtypes. */
kr_status kr_st_to_f32(const kr_st_tensor *t, float *dst, kr_error *err);
/* Copies an integer tensor (I64, I32) to int64. */
kr_status kr_st_to_i64(const kr_st_tensor *t, int64_t *dst, kr_error *err);

/* ---- writer: collects tensors (copies data) and writes a file with 8-byte aligned data. */
typedef struct kr_st_writer kr_st_writer;
KR_PRIVATE kr_status kr_st_writer_create(kr_st_writer **out, kr_error *err);
KR_PRIVATE kr_status kr_st_writer_add(kr_st_writer *w, const char *name, kr_dtype dtype, int ndim,
                                      const int64_t *shape, const void *data, kr_error *err);
/* Optional string metadata ({"format": "pt"} is written by default). */
kr_status kr_st_writer_meta(kr_st_writer *w, const char *key, const char *value, kr_error *err);
KR_PRIVATE kr_status kr_st_writer_save(kr_st_writer *w, const char *path, kr_error *err);
KR_PRIVATE void kr_st_writer_free(kr_st_writer *w);

#endif
