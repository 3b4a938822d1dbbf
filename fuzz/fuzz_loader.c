/*
 * fuzz_loader — libFuzzer target for the model-file parsers: the input is tried as a
 * safetensors image (kr_st_open_memory, then every tensor converted) and as the text of
 * both config.json kinds. A crash, sanitizer report or broken invariant (a tensor the
 * reader accepted whose data lies outside the image) is a bug in the reader.
 *
 *   CC=clang cmake -S . -B build-fuzz -DKRONOS_FUZZ=ON && cmake --build build-fuzz -t fuzz_loader
 *   build-fuzz/fuzz/fuzz_loader fuzz/corpus/fuzz_loader -max_total_time=60
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/config.h"
#include "model/safetensors.h"

/* Bounded conversion buffers: the reader may accept a huge (valid) tensor, but converting
 * more than this per input would only slow the fuzzer down. */
#define MAX_F32 4096
#define MAX_I64 1024

static float g_f32[MAX_F32];
static int64_t g_i64[MAX_I64];

static void check_image(const uint8_t *data, size_t size) {
    kr_safetensors *st = NULL;
    kr_error err;
    if (kr_st_open_memory(data, size, "fuzz.safetensors", &st, &err) != KR_OK) {
        /* A rejected image must come with a message and no object. */
        if (st != NULL || err.message[0] == '\0') __builtin_trap();
        return;
    }
    const uint8_t *end = data + size;
    for (int i = 0; i < kr_st_count(st); i++) {
        const kr_st_tensor *t = kr_st_at(st, i);
        const uint8_t *p = t->data;
        if (p < data || p > end || t->nbytes > (size_t)(end - p)) __builtin_trap();
        if (t->nbytes != (size_t)t->numel * kr_dtype_size(t->dtype)) __builtin_trap();
        if (kr_st_find(st, t->name) != t) __builtin_trap();
        if (t->numel <= MAX_F32) kr_st_to_f32(t, g_f32, &err);
        if (t->numel <= MAX_I64) kr_st_to_i64(t, g_i64, &err);
    }
    kr_st_close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_image(data, size);

    kr_error err;
    kr_predictor_config pc;
    kr_tokenizer_config tc;
    kr_predictor_config_parse((const char *)data, size, "fuzz/config.json", &pc, &err);
    kr_tokenizer_config_parse((const char *)data, size, "fuzz/config.json", &tc, &err);
    /* A safetensors header is JSON too: parse it as a config so header-shaped inputs also
     * reach the config validator. */
    if (size > 8) {
        kr_predictor_config_parse((const char *)data + 8, size - 8, "fuzz/config.json", &pc, &err);
    }
    return 0;
}
