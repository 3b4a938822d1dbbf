/*
 * fuzz_model_load — libFuzzer target for a whole checkpoint load: config.json checked against
 * the tensors of model.safetensors by the weights binder (kr_predictor_weights_load /
 * kr_tokenizer_weights_load), quantised checkpoints' "quantization" blocks and their
 * .qweight / .qscale / .qrowsum / .qgscale / .qgzero / .qinscale tensors included.
 *
 * Input: byte 0 = flags (bit 0: a tokenizer, else a predictor; bit 1: allow_nonfinite), bytes
 * 1-4 = the config's length L (little-endian, clamped to what is there), then L bytes of
 * config.json, then the rest = model.safetensors. Both are written into a private temporary
 * directory and loaded from there, as a user's checkpoint would be.
 *
 * Any input must end in KR_OK or a clean error (a message, no object): no crash, leak or
 * undefined behaviour. A load that succeeds must also keep the loader's promises, checked by
 * reading every Linear back: shapes as the config says, every weight readable (ASan checks the
 * bounds), and without allow_nonfinite every f32 or dequantised weight finite.
 *
 *   CC=clang cmake -S . -B build/fuzz -DKRONOS_FUZZ=ON && cmake --build build/fuzz -t fuzz_model_load
 *   build/fuzz/fuzz/fuzz_model_load fuzz/corpus/fuzz_model_load -max_total_time=60
 *
 * The seed corpus (fuzz/corpus/fuzz_model_load) is real checkpoints of a micro shape (vocab 4,
 * d_model 8) written by the same code as `kronos gen-random` and `kronos quantize`: f32 (both
 * time-embedding layouts) and bf16 / int8 / fp8 / q4 quantised. Regenerate it with
 *   KRONOS_FUZZ_WRITE_SEEDS=fuzz/corpus/fuzz_model_load build/fuzz/fuzz/fuzz_model_load
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "kernels/quant.h"
#include "model/quantize.h"
#include "model/weights.h"

/* A violated invariant must stop the fuzzer with a reproducer; abort() is fine in a harness. */
#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

enum { FLAG_TOKENIZER = 1, FLAG_ALLOW_NONFINITE = 2 };

/* Dequantised Linears larger than this are only shape-checked (a fuzzer input is small; a
 * valid huge Linear would only slow it down). */
#define MAX_DEQUANT (1 << 16)

static char g_dir[256], g_cfg[300], g_st[300];
static float g_buf[MAX_DEQUANT];

static void cleanup(void) {
    if (!g_dir[0]) return;
    unlink(g_cfg);
    unlink(g_st);
    rmdir(g_dir);
}

static int write_all(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* One Linear read back: shape, readable weights, finite unless allowed otherwise. */
static void check_linear(const kr_linear *l, int allow_nonfinite) {
    CHECK(l->n_out > 0 && l->n_in > 0);
    size_t n = (size_t)l->n_out * (size_t)l->n_in;
    if (l->q) {
        CHECK(l->q->n == l->n_out && l->q->k == l->n_in && l->q->kp >= l->q->k);
        if (n > MAX_DEQUANT) return;
        kr_dequant_rows_scalar(l->q, 0, l->n_out, g_buf, l->n_in);
        for (size_t i = 0; i < n; i++) CHECK(allow_nonfinite || isfinite(g_buf[i]));
    } else {
        CHECK(l->w != NULL);
        for (size_t i = 0; i < n; i++) CHECK(allow_nonfinite || isfinite(l->w[i]));
    }
    if (l->b)
        for (int i = 0; i < l->n_out; i++) CHECK(allow_nonfinite || isfinite(l->b[i]));
}

static void check_linears(kr_named_linear *ls, int n, int allow_nonfinite) {
    for (int i = 0; i < n; i++) check_linear(ls[i].l, allow_nonfinite);
    free(ls);
}

/* ---------------------------------------------------------------- seed corpus */

static const kr_random_shape k_micro = {
    "micro",
    { .d_in = 6,
      .d_model = 8,
      .n_heads = 2,
      .ff_dim = 8,
      .n_enc_layers = 2,
      .n_dec_layers = 2,
      .s1_bits = 2,
      .s2_bits = 2 },
    { .s1_bits = 2,
      .s2_bits = 2,
      .n_layers = 1,
      .d_model = 8,
      .n_heads = 2,
      .ff_dim = 8,
      .learn_te = 1 },
};

static void die(const char *what, const kr_error *err) {
    fprintf(stderr, "fuzz_model_load seeds: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

/* Packs dir/config.json + dir/model.safetensors into one input named out/name. */
static void pack(const char *dir, int flags, const char *out, const char *name) {
    char p[1024];
    char *cfg = NULL, *st = NULL;
    size_t cl = 0, sl = 0;
    kr_error err = { 0 };
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (kr_read_file(p, 1 << 20, "config", &cfg, &cl, &err) != KR_OK) die(p, &err);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (kr_read_file(p, 1 << 24, "checkpoint", &st, &sl, &err) != KR_OK) die(p, &err);
    uint8_t *buf = malloc(5 + cl + sl);
    if (!buf) die("out of memory", NULL);
    buf[0] = (uint8_t)flags;
    for (int i = 0; i < 4; i++) buf[1 + i] = (uint8_t)(cl >> (8 * i));
    memcpy(buf + 5, cfg, cl);
    memcpy(buf + 5 + cl, st, sl);
    snprintf(p, sizeof p, "%s/%s", out, name);
    if (write_all(p, buf, 5 + cl + sl) != 0) die(p, NULL);
    free(buf);
    free(cfg);
    free(st);
}

/* Quantises the f32 checkpoint in src (a predictor or a tokenizer) to fmt into dst. */
static void quantize_to(const char *src, int tokenizer, kr_wfmt fmt, const char *dst) {
    kr_error err = { 0 };
    kr_named_linear *ls = NULL;
    int n = 0;
    size_t qb = 0, fb = 0;
    if (tokenizer) {
        kr_tokenizer_weights *w = NULL;
        if (kr_tokenizer_weights_load(src, NULL, &w, &err) != KR_OK ||
            kr_tokenizer_linears(w, &ls, &n, &err) != KR_OK ||
            kr_quantize_linears(ls, n, fmt, 32, NULL, &w->qowner, &qb, &fb, &err) != KR_OK ||
            kr_tokenizer_save_quantized(w, "rtn", dst, &err) != KR_OK)
            die(src, &err);
        kr_tokenizer_weights_free(w);
    } else {
        kr_predictor_weights *w = NULL;
        if (kr_predictor_weights_load(src, NULL, &w, &err) != KR_OK ||
            kr_predictor_linears(w, &ls, &n, &err) != KR_OK ||
            kr_quantize_linears(ls, n, fmt, 32, NULL, &w->qowner, &qb, &fb, &err) != KR_OK ||
            kr_predictor_save_quantized(w, "rtn", dst, &err) != KR_OK)
            die(src, &err);
        kr_predictor_weights_free(w);
    }
    free(ls);
}

static void write_seeds(const char *out) {
    char tmp[] = "/tmp/kronos-fuzz-seeds-XXXXXX", p[1024], q[1024];
    kr_error err = { 0 };
    if (!mkdtemp(tmp) || kr_mkdir_p(out, &err) != KR_OK) die(out, &err);
    kr_random_shape fixed_te = k_micro;
    fixed_te.pred.learn_te = 0;
    const kr_random_shape *shapes[2] = { &k_micro, &fixed_te };
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/m%d", tmp, s);
        if (kr_model_write_random(shapes[s], 7, p, &err) != KR_OK) die(p, &err);
        snprintf(q, sizeof q, "%s/predictor", p);
        pack(q, 0, out, s ? "predictor_f32_fixed_te" : "predictor_f32");
    }
    snprintf(p, sizeof p, "%s/m0/tokenizer", tmp);
    pack(p, FLAG_TOKENIZER, out, "tokenizer_f32");
    static const kr_wfmt fmts[] = { KR_WFMT_BF16, KR_WFMT_INT8, KR_WFMT_FP8, KR_WFMT_Q4 };
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        for (int tok = 0; tok < 2; tok++) {
            char name[64];
            snprintf(p, sizeof p, "%s/m0/%s", tmp, tok ? "tokenizer" : "predictor");
            snprintf(q, sizeof q, "%s/q%zu%d", tmp, f, tok);
            quantize_to(p, tok, fmts[f], q);
            snprintf(name, sizeof name, "%s_%s", tok ? "tokenizer" : "predictor",
                     kr_wfmt_name(fmts[f]));
            pack(q, tok ? FLAG_TOKENIZER : 0, out, name);
        }
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) die("cannot remove the temporary directory", NULL);
    fprintf(stderr, "fuzz_model_load: seeds written to %s\n", out);
    exit(0);
}

/* ---------------------------------------------------------------- target */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *seeds = getenv("KRONOS_FUZZ_WRITE_SEEDS");
    if (seeds && *seeds) write_seeds(seeds);
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/kronos-fuzz-load-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("fuzz_model_load: mkdtemp");
        exit(1);
    }
    snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_dir);
    snprintf(g_st, sizeof g_st, "%s/model.safetensors", g_dir);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    const int flags = data[0];
    uint32_t cl = 0;
    for (int i = 3; i >= 0; i--) cl = cl << 8 | data[1 + i];
    if (cl > size - 5) cl = (uint32_t)(size - 5);
    if (write_all(g_cfg, data + 5, cl) != 0 || write_all(g_st, data + 5 + cl, size - 5 - cl) != 0)
        abort();
    const kr_weights_opts opts = { .allow_nonfinite = (flags & FLAG_ALLOW_NONFINITE) != 0 };
    kr_error err;
    memset(&err, 0, sizeof err);
    kr_named_linear *ls = NULL;
    int n = 0;
    if (flags & FLAG_TOKENIZER) {
        kr_tokenizer_weights *w = NULL;
        kr_status st = kr_tokenizer_weights_load(g_dir, &opts, &w, &err);
        if (st != KR_OK) {
            CHECK(w == NULL && err.message[0] != '\0');
            return 0;
        }
        CHECK(w->n_params > 0 && w->n_enc == w->cfg.n_enc_layers - 1);
        CHECK(kr_tokenizer_linears(w, &ls, &n, &err) == KR_OK);
        check_linears(ls, n, opts.allow_nonfinite);
        kr_tokenizer_weights_free(w);
    } else {
        kr_predictor_weights *w = NULL;
        kr_status st = kr_predictor_weights_load(g_dir, &opts, &w, &err);
        if (st != KR_OK) {
            CHECK(w == NULL && err.message[0] != '\0');
            return 0;
        }
        CHECK(w->n_params > 0 && w->blocks != NULL);
        const int d = w->cfg.d_model;
        for (int i = 0; i < d; i++) CHECK(opts.allow_nonfinite || isfinite(w->norm[i]));
        CHECK(kr_predictor_linears(w, &ls, &n, &err) == KR_OK);
        check_linears(ls, n, opts.allow_nonfinite);
        kr_predictor_weights_free(w);
    }
    return 0;
}
