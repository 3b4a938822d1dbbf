/*
 * Tests of the checkpoint-tensor API (kr_checkpoint_*, model/checkpoint.c): a real-layout
 * checkpoint's tensors by their state_dict names, F32 in place and the other dtypes
 * converted, buffers told from parameters, and the refusals (a kronos quantize checkpoint, a
 * dtype no Kronos checkpoint has, no file, an index out of range), each naming the place.
 */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kronos.h"
#include "model/safetensors.h"

static const kr_tensor_view *find(const kr_checkpoint *ck, const char *name, kr_tensor_view *v) {
    for (int i = 0; i < kr_checkpoint_tensor_count(ck); i++) {
        assert_int_equal(kr_checkpoint_tensor(ck, i, v, NULL), KR_OK);
        if (strcmp(v->name, name) == 0) return v;
    }
    return NULL;
}

/* The golden tiny predictor: every tensor of the file, with its name, shape and values. */
static void test_real_checkpoint_tensors(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", kr_test_fixture("tiny/predictor"));
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    kr_safetensors *st = NULL;
    kr_error err;
    assert_int_equal(kr_st_open(path, &st, &err), KR_OK);
    kr_checkpoint *ck = NULL;
    assert_int_equal(kr_checkpoint_open(dir, &ck, &err), KR_OK);
    assert_int_equal(kr_checkpoint_tensor_count(ck), kr_st_count(st));
    int buffers = 0;
    for (int i = 0; i < kr_checkpoint_tensor_count(ck); i++) {
        kr_tensor_view v;
        assert_int_equal(kr_checkpoint_tensor(ck, i, &v, &err), KR_OK);
        const kr_st_tensor *t = kr_st_find(st, v.name);
        assert_non_null(t);
        assert_int_equal(v.ndim, t->ndim);
        for (int d = 0; d < v.ndim; d++) assert_int_equal(v.shape[d], t->shape[d]);
        assert_int_equal(v.numel, t->numel);
        assert_string_equal(v.stored_dtype, kr_dtype_name(t->dtype));
        buffers += v.is_buffer;
        if (t->dtype != KR_DT_F32) continue;
        assert_string_equal(v.dtype, "F32");
        float *want = malloc((size_t)t->numel * sizeof *want);
        assert_int_equal(kr_st_to_f32(t, want, &err), KR_OK);
        assert_memory_equal(v.data, want, (size_t)t->numel * sizeof *want);
        free(want);
    }
    assert_true(buffers > 0); /* the rotary inv_freq buffers */
    kr_tensor_view v;
    assert_non_null(find(ck, "embedding.emb_s1.weight", &v));
    assert_int_equal(v.ndim, 2);
    assert_int_equal(v.shape[0], 1024);
    assert_false(v.is_buffer);
    assert_false(v.converted); /* aligned f32: the file's bytes, no copy */
    assert_non_null(find(ck, "transformer.0.self_attn.rotary.inv_freq", &v));
    assert_true(v.is_buffer);
    assert_int_equal(kr_checkpoint_tensor(ck, kr_checkpoint_tensor_count(ck), &v, &err),
                     KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "outside 0.."));
    assert_int_equal(kr_checkpoint_tensor(ck, -1, &v, NULL), KR_ERR_INVALID_ARG);
    kr_checkpoint_free(ck);
    kr_st_close(st);
    /* The tokenizer: its BSQ bases are int64 buffers. */
    snprintf(dir, sizeof dir, "%s", kr_test_fixture("tiny/tokenizer"));
    assert_int_equal(kr_checkpoint_open(dir, &ck, &err), KR_OK);
    assert_non_null(find(ck, "tokenizer.bsq.basis", &v));
    assert_string_equal(v.dtype, "I64");
    assert_true(v.is_buffer);
    assert_non_null(find(ck, "embed.weight", &v));
    assert_false(v.is_buffer);
    kr_checkpoint_free(ck);
    kr_checkpoint_free(NULL);
}

static void write_one(const char *dir, kr_st_writer *w) {
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    kr_error err;
    assert_int_equal(kr_st_writer_save(w, path, &err), KR_OK);
    kr_st_writer_free(w);
}

/* BF16, F16, F64 and I32 tensors come converted (f32 / int64), F32 in place. */
static void test_dtypes_converted(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_st_writer *w = NULL;
    kr_error err;
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    const float f32[6] = { 1.5f, -2, 3, 0.25f, 5, -6 };
    const uint16_t bf16[3] = { 0x3fc0, 0xc000, 0x4040 }; /* 1.5, -2, 3 */
    const uint16_t f16[2] = { 0x3c00, 0xc400 }; /* 1, -4 */
    const double f64[2] = { 0.5, 1e3 };
    const int32_t i32[3] = { 1, 2, 1024 };
    const int64_t s23[2] = { 2, 3 }, s3[1] = { 3 }, s2[1] = { 2 };
    assert_int_equal(kr_st_writer_add(w, "a.weight", KR_DT_F32, 2, s23, f32, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "b.weight", KR_DT_BF16, 1, s3, bf16, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "c.bias", KR_DT_F16, 1, s2, f16, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "d.rotary.inv_freq", KR_DT_F64, 1, s2, f64, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "tokenizer.bsq.basis", KR_DT_I32, 1, s3, i32, &err),
                     KR_OK);
    write_one(dir, w);
    kr_checkpoint *ck = NULL;
    assert_int_equal(kr_checkpoint_open(dir, &ck, &err), KR_OK);
    assert_int_equal(kr_checkpoint_tensor_count(ck), 5);
    kr_tensor_view v;
    assert_non_null(find(ck, "a.weight", &v));
    assert_false(v.converted);
    assert_memory_equal(v.data, f32, sizeof f32);
    assert_non_null(find(ck, "b.weight", &v));
    assert_true(v.converted);
    assert_string_equal(v.dtype, "F32");
    assert_string_equal(v.stored_dtype, "BF16");
    const float *b = v.data;
    assert_true(b[0] == 1.5f && b[1] == -2.0f && b[2] == 3.0f);
    assert_false(v.is_buffer);
    assert_non_null(find(ck, "c.bias", &v));
    const float *c = v.data;
    assert_true(c[0] == 1.0f && c[1] == -4.0f);
    assert_non_null(find(ck, "d.rotary.inv_freq", &v));
    assert_true(v.is_buffer);
    assert_true(((const float *)v.data)[1] == 1000.0f);
    assert_non_null(find(ck, "tokenizer.bsq.basis", &v));
    assert_string_equal(v.dtype, "I64");
    assert_string_equal(v.stored_dtype, "I32");
    assert_true(v.is_buffer);
    assert_int_equal(((const int64_t *)v.data)[2], 1024);
    kr_checkpoint_free(ck);
}

/* A kronos quantize checkpoint, a dtype no Kronos checkpoint has, no file: refused, naming it. */
static void test_refusals(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_st_writer *w = NULL;
    kr_error err;
    const int8_t q[4] = { 1, -1, 2, -2 };
    const int64_t s4[1] = { 4 };
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "transformer.0.ffn.w1.qweight", KR_DT_I8, 1, s4, q, &err),
                     KR_OK);
    write_one(dir, w);
    kr_checkpoint *ck = (kr_checkpoint *)&err; /* set to NULL on failure */
    assert_int_equal(kr_checkpoint_open(dir, &ck, &err), KR_ERR_UNSUPPORTED);
    assert_null(ck);
    assert_non_null(strstr(err.message, "transformer.0.ffn.w1.qweight"));
    assert_non_null(strstr(err.message, "a kronos quantize checkpoint"));
    assert_non_null(strstr(err.message, "open the f32 checkpoint it was made from"));

    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    assert_int_equal(kr_st_writer_add(w, "mask", KR_DT_U8, 1, s4, q, &err), KR_OK);
    write_one(dir, w);
    assert_int_equal(kr_checkpoint_open(dir, &ck, &err), KR_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "tensor 'mask': dtype U8"));

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    assert_int_equal(kr_checkpoint_open(missing, &ck, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "nope/model.safetensors"));
    assert_int_equal(kr_checkpoint_open(NULL, &ck, &err), KR_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_checkpoint_tensors),
        cmocka_unit_test(test_dtypes_converted),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
