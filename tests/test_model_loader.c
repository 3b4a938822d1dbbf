/*
 * Tests of model/safetensors and model/config: the reader against a table of malformed
 * images (every one must fail with KR_ERR_FORMAT naming the file and, where there is one,
 * the tensor, and never crash), dtype conversion including half/bfloat16 special values,
 * the writer's layout (padding, alignment, metadata) and round trip, and config.json
 * parsing and validation. Checkpoint binding is in test_model_loader_weights.c.
 */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cjson/cJSON.h>

#include "base/fsutil.h"
#include "kronos/util.h"
#include "model/config.h"
#include "model/safetensors.h"

#define assert_contains(hay, needle)                                             \
    do {                                                                         \
        if (!strstr((hay), (needle)))                                            \
            fail_msg("message \"%s\" does not contain \"%s\"", (hay), (needle)); \
    } while (0)

/* ---------------------------------------------------------------- image builders */

/* 8-byte length + header + data_len bytes of data (value i & 0xff). Caller frees. */
static uint8_t *make_image(const char *header, uint64_t declared_len, size_t data_len,
                           size_t *len) {
    size_t hl = strlen(header);
    *len = 8 + hl + data_len;
    uint8_t *b = malloc(*len ? *len : 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(declared_len >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)i;
    return b;
}

typedef struct bad_case {
    const char *what;
    const char *header;
    size_t data_len; /* zero bytes appended after the header */
    int64_t declared; /* header length written in the first 8 bytes; -1: the real one */
    const char *expect; /* substring of the message */
    size_t header_len; /* 0: strlen(header); set for headers with NUL bytes */
} bad_case;

static const bad_case k_bad[] = {
    { "bad JSON", "{\"w\": {\"dtype\": ", 0, -1, "not valid JSON", 0 },
    { "JSON array", "[1, 2, 3]", 0, -1, "not an object", 0 },
    { "JSON string", "\"hello\"", 0, -1, "not an object", 0 },
    { "trailing bytes", "{}  x", 0, -1, "unexpected bytes after", 0 },
    { "NUL inside header", "{}\0\0", 0, -1, "unexpected bytes after", 4 },
    { "entry not object", "{\"w\": 5}", 0, -1, "tensor 'w': entry is not an object", 0 },
    { "missing dtype", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, -1,
      "tensor 'w': missing 'dtype'", 0 },
    { "dtype not string", "{\"w\": {\"dtype\": 7, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      -1, "tensor 'w': 'dtype' is not a string", 0 },
    { "unknown dtype", "{\"w\": {\"dtype\": \"F31\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      -1, "tensor 'w': unknown dtype 'F31'", 0 },
    { "missing shape", "{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, -1,
      "tensor 'w': missing 'shape'", 0 },
    { "shape not array", "{\"w\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4,
      -1, "tensor 'w': 'shape' is not an array", 0 },
    { "negative dim", "{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4,
      -1, "tensor 'w': shape[0] is not a non-negative integer", 0 },
    { "fractional dim", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}",
      4, -1, "tensor 'w': shape[0]", 0 },
    { "string dim", "{\"w\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}",
      8, -1, "tensor 'w': shape[0]", 0 },
    { "dim above 2^53",
      "{\"w\": {\"dtype\": \"U8\", \"shape\": [18446744073709551616], \"data_offsets\": [0, 1]}}",
      1, -1, "tensor 'w': shape[0]", 0 },
    { "9 dims",
      "{\"w\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}", 1,
      -1, "tensor 'w': 9 dimensions", 0 },
    { "absurd shape [2^40, 2^40]",
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776], "
      "\"data_offsets\": [0, 4]}}",
      4, -1, "tensor 'w': element count of the shape overflows", 0 },
    { "byte size overflow [2^52, 2^10] F32",
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [4503599627370496, 1024], \"data_offsets\": [0, "
      "4]}}",
      4, -1, "tensor 'w': byte size overflows", 0 },
    { "huge shape, tiny data",
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1048576, 1048576], \"data_offsets\": [0, 4]}}", 4,
      -1, "tensor 'w': data_offsets span 4 bytes", 0 },
    { "missing offsets", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, -1,
      "tensor 'w': missing 'data_offsets'", 0 },
    { "offsets not pair", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4,
      -1, "tensor 'w': 'data_offsets' is not [begin, end]", 0 },
    { "offsets strings",
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [\"0\", \"4\"]}}", 4, -1,
      "tensor 'w': 'data_offsets' is not [begin, end]", 0 },
    { "negative offset", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}",
      4, -1, "tensor 'w': 'data_offsets' is not [begin, end]", 0 },
    { "begin > end", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8,
      -1, "tensor 'w': data_offsets [8, 4] has begin > end", 0 },
    { "end past data", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4,
      -1, "tensor 'w': data_offsets end 8 is past the data section (4 bytes; file truncated?)", 0 },
    { "offsets far out of range",
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], "
      "\"data_offsets\": [9007199254740988, 9007199254740992]}}",
      4, -1, "tensor 'w': data_offsets end 9007199254740992 is past", 0 },
    { "shape/offset mismatch",
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, -1,
      "tensor 'w': data_offsets span 8 bytes but shape × F32 needs 12", 0 },
    { "overlap",
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
      12, -1, "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]", 0 },
    { "same range twice",
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
      " \"b\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
      8, -1, "overlap tensor", 0 },
    { "duplicate names",
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
      " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
      8, -1, "tensor 'a': duplicate name", 0 },
    { "duplicate names, same range",
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
      " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
      4, -1, "tensor 'a': duplicate name", 0 },
    { "metadata not object", "{\"__metadata__\": [1]}", 0, -1, "'__metadata__' is not an object",
      0 },
    { "metadata value not string", "{\"__metadata__\": {\"format\": 1}}", 0, -1,
      "'__metadata__' entry 'format' is not a string", 0 },
    { "empty name", "{\"\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, -1,
      "empty tensor name", 0 },
    { "header length past EOF", "{}", 0, 64, "runs past the end of the file", 0 },
    { "header length 2^63", "{}", 0, INT64_MAX, "exceeds the", 0 },
    { "header length 0", "{}", 0, 0, "header length is 0", 0 },
};

static void test_malformed_table(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        const bad_case *c = &k_bad[i];
        size_t hl = c->header_len ? c->header_len : strlen(c->header);
        size_t len = 8 + hl + c->data_len;
        uint8_t *img = malloc(len);
        assert_non_null(img);
        uint64_t decl = c->declared >= 0 ? (uint64_t)c->declared : hl;
        for (int k = 0; k < 8; k++) img[k] = (uint8_t)(decl >> (8 * k));
        memcpy(img + 8, c->header, hl);
        memset(img + 8 + hl, 0, c->data_len);
        kr_safetensors *st = (kr_safetensors *)1;
        kr_error err = { 0 };
        kr_status rc = kr_st_open_memory(img, len, "bad.safetensors", &st, &err);
        if (rc != KR_ERR_FORMAT) fail_msg("case '%s': status %d, want FORMAT", c->what, rc);
        assert_null(st);
        assert_int_equal(err.status, KR_ERR_FORMAT);
        if (!strstr(err.message, c->expect) || strncmp(err.message, "bad.safetensors: ", 17))
            fail_msg("case '%s': message \"%s\" lacks \"%s\"", c->what, err.message, c->expect);
        free(img);
    }
}

/* kr_read_file (util.h), which reads config.json: NULL arguments are refused, not
 * dereferenced; a file over the limit is named with both sizes. */
static void test_read_file_arguments(void **state) {
    (void)state;
    kr_error err = { 0 };
    char *buf = (char *)1;
    size_t len = 7;
    assert_int_equal(kr_read_file(NULL, 100, "file", &buf, &len, &err), KR_ERR_INVALID_ARG);
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_int_equal(kr_read_file("/etc/hostname", 100, "file", NULL, &len, &err),
                     KR_ERR_INVALID_ARG);
    const char *dir = kr_test_fresh_dir();
    char path[1100];
    snprintf(path, sizeof path, "%s/big.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"x\": 123456789}", f);
    fclose(f);
    assert_int_equal(kr_read_file(path, 4, "config", &buf, &len, &err), KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "big.json"));
    assert_int_equal(kr_read_file(path, 100, "config", &buf, &len, &err), KR_OK);
    assert_int_equal(len, 16);
    assert_string_equal(buf, "{\"x\": 123456789}");
    free(buf);
}

static void test_short_files(void **state) {
    (void)state;
    static const uint8_t bytes[8] = { 2, 0, 0, 0, 0, 0, 0, 0 };
    for (size_t n = 0; n < 8; n++) {
        kr_safetensors *st = NULL;
        kr_error err = { 0 };
        assert_int_equal(kr_st_open_memory(bytes, n, "short", &st, &err), KR_ERR_FORMAT);
        assert_contains(err.message, "shorter than the 8-byte header length");
        assert_null(st);
    }
    /* A real empty file goes through open/fstat and must not try to mmap 0 bytes. */
    const char *dir = kr_test_fresh_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    assert_int_equal(kr_test_write_file(path, "", 0), 0);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open(path, &st, &err), KR_ERR_FORMAT);
    assert_contains(err.message, path);
    remove(path);
    assert_int_equal(kr_st_open(path, &st, &err), KR_ERR_IO);
    assert_contains(err.message, "cannot open");
    assert_int_equal(kr_st_open(dir, &st, &err), KR_ERR_IO);
    assert_contains(err.message, "not a regular file");
    remove(dir);
}

/* A valid two-tensor image, then every strict prefix of it: each must be rejected. */
static void test_every_truncation(void **state) {
    (void)state;
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]}}";
    size_t len;
    uint8_t *img = make_image(hdr, strlen(hdr), 24, &len);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open_memory(img, len, "full", &st, &err), KR_OK);
    assert_int_equal(kr_st_count(st), 2);
    kr_st_close(st);
    for (size_t n = 0; n < len; n++) {
        /* Copy so ASan sees the exact end of the truncated buffer. */
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, img, n);
        st = NULL;
        kr_status rc = kr_st_open_memory(cut, n, "cut", &st, &err);
        if (rc != KR_ERR_FORMAT) fail_msg("prefix of %zu bytes: status %d", n, rc);
        /* Once the header is whole, the first tensor whose range no longer fits is named. */
        if (n >= 8 + strlen(hdr) + 16)
            assert_contains(err.message, "tensor 'b'");
        else if (n >= 8 + strlen(hdr))
            assert_contains(err.message, "tensor 'a'");
        else
            assert_contains(err.message, "cut: ");
        free(cut);
    }
    free(img);
}

/* ---------------------------------------------------------------- conversion */

static uint8_t *image_with(const char *dtype, const void *data, size_t nbytes, size_t count,
                           size_t pad, size_t *len) {
    char hdr[256];
    /* `pad` extra spaces shift the data section off 4/8-byte alignment. */
    int n = snprintf(hdr, sizeof hdr,
                     "{\"t\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}%*s",
                     dtype, count, nbytes, (int)pad, "");
    uint8_t *img = make_image(hdr, (uint64_t)n, nbytes, len);
    memcpy(img + 8 + n, data, nbytes);
    return img;
}

static void test_f16_special_values(void **state) {
    (void)state;
    static const uint16_t h[] = { 0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0200, 0x0400, 0x3c00,
                                  0xc000, 0x7bff, 0x7c00, 0xfc00, 0x3555, 0x7e00, 0x7c01 };
    const float want[] = {
        0.0f,  -0.0f,    0x1p-24f, -0x1p-24f, 0x3ffp-24f,          0x1p-15f, 0x1p-14f, 1.0f,
        -2.0f, 65504.0f, INFINITY, -INFINITY, 0x155p-12f + 0x1p-2f
    };
    const size_t n = sizeof h / sizeof h[0];
    for (size_t pad = 0; pad < 4; pad++) { /* pad 1 and 3 make every element unaligned */
        size_t len;
        uint8_t *img = image_with("F16", h, sizeof h, n, pad, &len);
        kr_safetensors *st;
        kr_error err = { 0 };
        assert_int_equal(kr_st_open_memory(img, len, "f16", &st, &err), KR_OK);
        const kr_st_tensor *t = kr_st_find(st, "t");
        assert_non_null(t);
        float out[16];
        assert_int_equal(kr_st_to_f32(t, out, &err), KR_OK);
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            if (memcmp(&out[i], &want[i], 4) != 0)
                fail_msg("half 0x%04x -> %a, want %a", h[i], (double)out[i], (double)want[i]);
        }
        assert_true(isnan(out[13]) && isnan(out[14])); /* quiet and signalling nan */
        int64_t i64[16];
        assert_int_equal(kr_st_to_i64(t, i64, &err), KR_ERR_MODEL);
        assert_contains(err.message, "tensor 't'");
        kr_st_close(st);
        free(img);
    }
}

static void test_bf16_and_ints(void **state) {
    (void)state;
    static const uint16_t b[] = { 0x3f80, 0x8000, 0x0001, 0x807f, 0x7f80, 0xff80, 0x7fc0, 0x4049 };
    const float want[] = { 1.0f, -0.0f, 0x1p-133f, -0x7fp-133f, INFINITY, -INFINITY };
    size_t len;
    uint8_t *img = image_with("BF16", b, sizeof b, 8, 1, &len);
    kr_safetensors *st;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open_memory(img, len, "bf16", &st, &err), KR_OK);
    float out[8];
    assert_int_equal(kr_st_to_f32(kr_st_at(st, 0), out, &err), KR_OK);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_memory_equal(&out[i], &want[i], 4);
    assert_true(isnan(out[6]));
    assert_true(out[7] == 3.140625f);
    kr_st_close(st);
    free(img);

    static const int64_t v64[3] = { -5, 0, 1099511627776 };
    img = image_with("I64", v64, sizeof v64, 3, 3, &len);
    assert_int_equal(kr_st_open_memory(img, len, "i64", &st, &err), KR_OK);
    int64_t o64[3];
    assert_int_equal(kr_st_to_i64(kr_st_at(st, 0), o64, &err), KR_OK);
    assert_memory_equal(o64, v64, sizeof v64);
    assert_int_equal(kr_st_to_f32(kr_st_at(st, 0), out, &err), KR_OK);
    assert_true(out[0] == -5.0f && out[2] == 1099511627776.0f);
    kr_st_close(st);
    free(img);

    static const int32_t v32[2] = { -7, 123456 };
    img = image_with("I32", v32, sizeof v32, 2, 2, &len);
    assert_int_equal(kr_st_open_memory(img, len, "i32", &st, &err), KR_OK);
    assert_int_equal(kr_st_to_i64(kr_st_at(st, 0), o64, &err), KR_OK);
    assert_true(o64[0] == -7 && o64[1] == 123456);
    kr_st_close(st);
    free(img);

    static const double v_f64[2] = { 0.1, -1e300 };
    img = image_with("F64", v_f64, sizeof v_f64, 2, 5, &len);
    assert_int_equal(kr_st_open_memory(img, len, "f64", &st, &err), KR_OK);
    assert_int_equal(kr_st_to_f32(kr_st_at(st, 0), out, &err), KR_OK);
    assert_true(out[0] == 0.1f && isinf(out[1]) && out[1] < 0);
    kr_st_close(st);
    free(img);

    static const uint8_t u8[2] = { 1, 2 };
    img = image_with("U8", u8, 2, 2, 0, &len);
    assert_int_equal(kr_st_open_memory(img, len, "u8", &st, &err), KR_OK);
    assert_int_equal(kr_st_to_f32(kr_st_at(st, 0), out, &err), KR_ERR_MODEL);
    assert_contains(err.message, "cannot convert dtype U8");
    kr_st_close(st);
    free(img);
}

static void test_dtype_names(void **state) {
    (void)state;
    assert_string_equal(kr_dtype_name(KR_DT_BF16), "BF16");
    assert_string_equal(kr_dtype_name(KR_DT_F8_E4M3), "F8_E4M3");
    assert_int_equal(kr_dtype_size(KR_DT_I64), 8);
    assert_int_equal(kr_dtype_size(KR_DT_BOOL), 1);
    assert_int_equal(kr_dtype_size(KR_DT_COUNT), 0);
    assert_string_equal(kr_dtype_name(KR_DT_COUNT), "?");
}

/* ---------------------------------------------------------------- writer */

static void test_writer_round_trip(void **state) {
    (void)state;
    kr_st_writer *w;
    kr_error err = { 0 };
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    const float f3[3] = { 1.5f, -2.25f, 3.0f };
    const uint16_t h5[5] = { 0x3c00, 0x4000, 0x4200, 0x4400, 0x4500 };
    const int64_t i4[4] = { 1, -2, 3, INT64_MIN };
    const int8_t b3[3] = { -1, 0, 1 };
    const double scalar = 2.5;
    const int64_t s3[1] = { 3 }, s5[1] = { 5 }, s22[2] = { 2, 2 }, s0[2] = { 0, 4 };
    assert_int_equal(kr_st_writer_add(w, "z.f32", KR_DT_F32, 1, s3, f3, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "a.f16", KR_DT_F16, 1, s5, h5, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "m.i64", KR_DT_I64, 2, s22, i4, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "q\"uote\\d", KR_DT_I8, 1, s3, b3, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "scalar", KR_DT_F64, 0, NULL, &scalar, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "empty", KR_DT_F32, 2, s0, NULL, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "z.f32", KR_DT_F32, 1, s3, f3, &err), KR_ERR_INVALID_ARG);
    assert_contains(err.message, "duplicate");
    const int64_t neg[1] = { -1 };
    assert_int_equal(kr_st_writer_add(w, "neg", KR_DT_F32, 1, neg, f3, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_st_writer_meta(w, "note", "x\ny", &err), KR_OK);

    const char *dir = kr_test_fresh_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    assert_int_equal(kr_st_writer_save(w, path, &err), KR_OK);
    kr_st_writer_free(w);

    /* Raw layout: header length multiple of 8, metadata present, 8-byte tensors first. */
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t raw[4096];
    size_t n = fread(raw, 1, sizeof raw, f);
    fclose(f);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | raw[i];
    assert_int_equal(hl % 8, 0);
    assert_true(8 + hl <= n);
    cJSON *hdr = cJSON_ParseWithLength((const char *)raw + 8, hl);
    assert_non_null(hdr);
    assert_string_equal(hdr->child->string, "__metadata__");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(hdr, "__metadata__");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "format")->valuestring, "pt");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "note")->valuestring, "x\ny");
    const char *order[] = { "m.i64", "scalar", "empty", "z.f32", "a.f16", "q\"uote\\d" };
    int k = 0;
    for (cJSON *e = hdr->child->next; e; e = e->next, k++) assert_string_equal(e->string, order[k]);
    assert_int_equal(k, 6);
    cJSON_Delete(hdr);

    kr_safetensors *st;
    assert_int_equal(kr_st_open(path, &st, &err), KR_OK);
    assert_string_equal(kr_st_label(st), path);
    assert_int_equal(kr_st_count(st), 6);
    assert_null(kr_st_at(st, 6));
    assert_null(kr_st_find(st, "nope"));
    for (int i = 0; i < kr_st_count(st); i++) {
        const kr_st_tensor *t = kr_st_at(st, i);
        assert_ptr_equal(kr_st_find(st, t->name), t);
        /* Aligned for its element size in the mapping, as the writer promises. */
        assert_int_equal((uintptr_t)t->data % kr_dtype_size(t->dtype), 0);
    }
    const kr_st_tensor *t = kr_st_find(st, "z.f32");
    assert_int_equal(t->dtype, KR_DT_F32);
    assert_int_equal(t->ndim, 1);
    assert_memory_equal(t->data, f3, sizeof f3);
    t = kr_st_find(st, "a.f16");
    float out[5];
    assert_int_equal(kr_st_to_f32(t, out, &err), KR_OK);
    assert_true(out[0] == 1.0f && out[1] == 2.0f && out[2] == 3.0f && out[3] == 4.0f &&
                out[4] == 5.0f);
    t = kr_st_find(st, "m.i64");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_memory_equal(t->data, i4, sizeof i4);
    t = kr_st_find(st, "q\"uote\\d");
    assert_non_null(t);
    assert_memory_equal(t->data, b3, 3);
    t = kr_st_find(st, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    assert_memory_equal(t->data, &scalar, 8);
    t = kr_st_find(st, "empty");
    assert_int_equal(t->numel, 0);
    assert_int_equal(t->nbytes, 0);
    assert_int_equal(kr_st_to_f32(t, NULL, &err), KR_OK);
    kr_st_close(st);
    kr_st_close(NULL);
    kr_st_writer_free(NULL);

    /* An unwritable destination is an I/O error naming the path. */
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", dir);
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    assert_int_equal(kr_st_writer_save(w, path, &err), KR_ERR_IO);
    assert_contains(err.message, "no/such/dir");
    kr_st_writer_free(w);

    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    remove(path);
    remove(dir);
}

/* An empty writer still produces a valid (tensor-less) file. */
static void test_writer_empty(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/e.safetensors", dir);
    kr_st_writer *w;
    kr_error err = { 0 };
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    assert_int_equal(kr_st_writer_save(w, path, &err), KR_OK);
    kr_st_writer_free(w);
    kr_safetensors *st;
    assert_int_equal(kr_st_open(path, &st, &err), KR_OK);
    assert_int_equal(kr_st_count(st), 0);
    kr_st_close(st);
    remove(path);
    remove(dir);
}

/* ---------------------------------------------------------------- config */

static const char *k_pred_ok =
    "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 4, \"d_model\": 128, \"n_heads\": 4,"
    " \"ff_dim\": 256, \"ffn_dropout_p\": 0.1, \"learn_te\": true}";
static const char *k_tok_ok =
    "{\"d_in\": 6, \"d_model\": 64, \"n_heads\": 4, \"ff_dim\": 128, \"n_enc_layers\": 3,"
    " \"n_dec_layers\": 3, \"s1_bits\": 10, \"s2_bits\": 10, \"beta\": 0.05}";

static void test_config_ok(void **state) {
    (void)state;
    kr_predictor_config p;
    kr_error err = { 0 };
    assert_int_equal(kr_predictor_config_parse(k_pred_ok, strlen(k_pred_ok), "p", &p, &err), KR_OK);
    assert_int_equal(p.d_model, 128);
    assert_int_equal(p.n_layers, 4);
    assert_int_equal(p.ff_dim, 256);
    assert_int_equal(p.learn_te, 1);
    const char *no_te = "{\"s1_bits\": 10, \"s2_bits\": 9, \"n_layers\": 1, \"d_model\": 8,"
                        " \"n_heads\": 2, \"ff_dim\": 3}\n  ";
    assert_int_equal(kr_predictor_config_parse(no_te, strlen(no_te), "p", &p, &err), KR_OK);
    assert_int_equal(p.learn_te, 1); /* constructor default */
    assert_int_equal(p.s2_bits, 9);
    kr_tokenizer_config t;
    assert_int_equal(kr_tokenizer_config_parse(k_tok_ok, strlen(k_tok_ok), "t", &t, &err), KR_OK);
    assert_int_equal(t.d_in, 6);
    assert_int_equal(t.n_enc_layers, 3);
    assert_int_equal(t.s2_bits, 10);

    /* save → load gives the same values, in the save_pretrained layout (sorted keys). */
    const char *dir = kr_test_fresh_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    p.learn_te = 0;
    assert_int_equal(kr_predictor_config_save(path, &p, &err), KR_OK);
    kr_predictor_config p2;
    assert_int_equal(kr_predictor_config_load(path, &p2, &err), KR_OK);
    assert_memory_equal(&p, &p2, sizeof p);
    assert_int_equal(kr_tokenizer_config_save(path, &t, &err), KR_OK);
    kr_tokenizer_config t2;
    assert_int_equal(kr_tokenizer_config_load(path, &t2, &err), KR_OK);
    assert_memory_equal(&t, &t2, sizeof t);
    remove(path);
    assert_int_equal(kr_tokenizer_config_load(path, &t2, &err), KR_ERR_IO);
    assert_contains(err.message, path);
    remove(dir);
}

/* "intended_use" / "source": parsed, kept through save -> load, and the bundled demo model
 * declares itself a demo (so every report of it says so). */
static void test_config_intended_use(void **state) {
    (void)state;
    kr_predictor_config p, p2;
    kr_error err = { 0 };
    const char *demo = "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 1, \"d_model\": 8,"
                       " \"n_heads\": 2, \"ff_dim\": 3, \"intended_use\": \"demo\","
                       " \"source\": \"a \\\"quoted\\\" origin\"}";
    assert_int_equal(kr_predictor_config_parse(demo, strlen(demo), "p", &p, &err), KR_OK);
    assert_string_equal(p.intended_use, "demo");
    assert_string_equal(p.source, "a \"quoted\" origin");
    const char *dir = kr_test_fresh_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(kr_predictor_config_save(path, &p, &err), KR_OK);
    assert_int_equal(kr_predictor_config_load(path, &p2, &err), KR_OK);
    assert_memory_equal(&p, &p2, sizeof p);
    remove(path);
    remove(dir);
    /* "forecast" is the same as no key. */
    const char *fc = "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 1, \"d_model\": 8,"
                     " \"n_heads\": 2, \"ff_dim\": 3, \"intended_use\": \"forecast\"}";
    assert_int_equal(kr_predictor_config_parse(fc, strlen(fc), "p", &p, &err), KR_OK);
    assert_string_equal(p.intended_use, "");
    assert_int_equal(kr_predictor_config_load(
                         KR_SOURCE_DIR "/models/kronos-demo/predictor/config.json", &p, &err),
                     KR_OK);
    assert_string_equal(p.intended_use, "demo");
    assert_true(strstr(p.source, "not the official Kronos weights") != NULL);
}

/* The tokenizer config the golden generator wrote must be reproduced byte for byte. */
static void test_config_save_matches_golden(void **state) {
    (void)state;
    kr_tokenizer_config t;
    kr_predictor_config p;
    kr_error err = { 0 };
    char golden_t[4096], golden_p[4096];
    snprintf(golden_t, sizeof golden_t, "%s", kr_test_fixture("tiny/tokenizer/config.json"));
    snprintf(golden_p, sizeof golden_p, "%s", kr_test_fixture("tiny/predictor/config.json"));
    assert_int_equal(kr_tokenizer_config_load(golden_t, &t, &err), KR_OK);
    assert_int_equal(kr_predictor_config_load(golden_p, &p, &err), KR_OK);
    const char *dir = kr_test_fresh_dir();
    char path[4096];
    const char *golden[2] = { golden_t, golden_p };
    for (int which = 0; which < 2; which++) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        if (which == 0)
            assert_int_equal(kr_tokenizer_config_save(path, &t, &err), KR_OK);
        else
            assert_int_equal(kr_predictor_config_save(path, &p, &err), KR_OK);
        char a[2048] = { 0 }, b[2048] = { 0 };
        FILE *f = fopen(path, "rb");
        size_t na = fread(a, 1, sizeof a - 1, f);
        fclose(f);
        f = fopen(golden[which], "rb");
        size_t nb = fread(b, 1, sizeof b - 1, f);
        fclose(f);
        assert_int_equal(na, nb);
        assert_string_equal(a, b);
        remove(path);
    }
    remove(dir);
}

typedef struct cfg_case {
    int tokenizer;
    const char *json;
    const char *expect;
} cfg_case;

static const cfg_case k_cfg_bad[] = {
    { 0, "", "not valid JSON" },
    { 0, "[1]", "top level is not a JSON object" },
    { 0, "{\"d_model\": 8} x", "unexpected text" },
    { 0, "{\"s1_bits\": 10}", "missing key 's2_bits'" },
    { 0, "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"n_heads\": 2, \"ff_dim\": 8}",
      "missing key 'd_model'" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": \"32\", \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "key 'd_model' must be an integer" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2.5, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "key 'n_layers' must be an integer" },
    { 0,
      "{\"s1_bits\": 17, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "key 's1_bits' = 17 is out of range [1, 16]" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 0, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "key 'n_layers' = 0 is out of range" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 1e30, \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "key 'd_model'" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 70000}",
      "key 'ff_dim' = 70000 is out of range" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 3,"
      " \"ff_dim\": 8}",
      "key 'd_model' = 32 is not divisible by n_heads = 3" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 24, \"n_heads\": 8,"
      " \"ff_dim\": 8}",
      "split over n_heads = 8 gives head_dim 3" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 36, \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "4 heads of the s2 cross-attention" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 34, \"n_heads\": 1,"
      " \"ff_dim\": 8}",
      "not divisible by the 4 heads" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8, \"learn_te\": 1}",
      "key 'learn_te' must be true or false" },
    { 0, "{\"s1_bits\": 10, \"s1_bits\": 11}", "key 's1_bits' appears twice" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8, \"intended_use\": \"demonstration\"}",
      "key 'intended_use' must be \"demo\", \"test\" or \"forecast\"" },
    { 0,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8, \"source\": 7}",
      "key 'source' must be a string" },
    { 1, "{\"d_in\": 5}", "key 'd_in' = 5 is out of range [6, 6]" },
    { 1,
      "{\"d_in\": 6, \"d_model\": 64, \"n_heads\": 4, \"ff_dim\": 128, \"n_enc_layers\": 0,"
      " \"n_dec_layers\": 3, \"s1_bits\": 10, \"s2_bits\": 10}",
      "key 'n_enc_layers' = 0" },
    { 1,
      "{\"d_in\": 6, \"d_model\": 64, \"n_heads\": 4, \"ff_dim\": 128, \"n_enc_layers\": 3,"
      " \"s1_bits\": 10, \"s2_bits\": 10}",
      "missing key 'n_dec_layers'" },
    { 1,
      "{\"d_in\": 6, \"d_model\": 64, \"n_heads\": 4, \"ff_dim\": 128, \"n_enc_layers\": 3,"
      " \"n_dec_layers\": 3, \"s1_bits\": 10, \"s2_bits\": 8}",
      "key 's2_bits' = 8 differs" },
    { 1,
      "{\"d_in\": 6, \"d_model\": 64, \"n_heads\": 5, \"ff_dim\": 128, \"n_enc_layers\": 3,"
      " \"n_dec_layers\": 3, \"s1_bits\": 10, \"s2_bits\": 10}",
      "not divisible by n_heads = 5" },
    /* The other class's config says what it is, not just its first missing key. */
    { 1,
      "{\"s1_bits\": 10, \"s2_bits\": 10, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 2,"
      " \"ff_dim\": 8}",
      "this is a predictor config (it has 'n_layers', not 'n_enc_layers'), given where the "
      "tokenizer belongs" },
    { 0,
      "{\"d_in\": 6, \"d_model\": 64, \"n_heads\": 4, \"ff_dim\": 128, \"n_enc_layers\": 3,"
      " \"n_dec_layers\": 3, \"s1_bits\": 10, \"s2_bits\": 10}",
      "this is a tokenizer config (it has 'n_enc_layers', not 'n_layers'), given where the "
      "predictor belongs" },
};

static void test_config_bad(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_cfg_bad / sizeof k_cfg_bad[0]; i++) {
        const cfg_case *c = &k_cfg_bad[i];
        kr_error err = { 0 };
        kr_status rc;
        if (c->tokenizer) {
            kr_tokenizer_config t;
            rc = kr_tokenizer_config_parse(c->json, strlen(c->json), "dir/config.json", &t, &err);
        } else {
            kr_predictor_config p;
            rc = kr_predictor_config_parse(c->json, strlen(c->json), "dir/config.json", &p, &err);
        }
        if (rc != KR_ERR_FORMAT) fail_msg("config case %zu: status %d", i, rc);
        if (!strstr(err.message, c->expect) || strncmp(err.message, "dir/config.json: ", 17))
            fail_msg("config case %zu: \"%s\" lacks \"%s\"", i, err.message, c->expect);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_table),
        cmocka_unit_test(test_read_file_arguments),
        cmocka_unit_test(test_short_files),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_f16_special_values),
        cmocka_unit_test(test_bf16_and_ints),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_writer_round_trip),
        cmocka_unit_test(test_writer_empty),
        cmocka_unit_test(test_config_ok),
        cmocka_unit_test(test_config_save_matches_golden),
        cmocka_unit_test(test_config_intended_use),
        cmocka_unit_test(test_config_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
