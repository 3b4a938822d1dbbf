/* train/window_encoder — see window_encoder.h. */
#include "train/window_encoder.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/workspace.h"
#include "model/tokenizer.h"
#include "model/weights.h"

struct kr_window_encoder {
    kr_tokenizer_weights *w;
    kr_exec *ex;
};

kr_status kr_window_encoder_create(const char *dir, int n_threads, kr_window_encoder **out,
                                   kr_error *err) {
    kr_window_encoder *e = calloc(1, sizeof *e);
    if (!e) return kr_error_set(err, KR_ERR_NOMEM, "window encoder: out of memory");
    kr_weights_opts opts = { .no_mmap = 1 };
    kr_status st = kr_tokenizer_weights_load(dir, &opts, &e->w, err);
    if (st == KR_OK) st = kr_exec_create(n_threads, 0, &e->ex, err);
    if (st != KR_OK) {
        kr_window_encoder_free(e);
        return st;
    }
    *out = e;
    return KR_OK;
}

void kr_window_encoder_free(kr_window_encoder *e) {
    if (!e) return;
    kr_exec_free(e->ex);
    kr_tokenizer_weights_free(e->w);
    free(e);
}

kr_status kr_window_encoder_run(kr_window_encoder *e, const float *x, int n, int len, int32_t *s1,
                                int32_t *s2, kr_error *err) {
    if (n < 0 || len <= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "window encoder: %d windows of %d rows", n,
                            len);
    const int d_in = e->w->cfg.d_in;
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)i * (size_t)len;
        kr_status st = kr_tokenizer_encode(e->w, e->ex, x + off * (size_t)d_in, len, s1 + off,
                                           s2 + off, NULL, err);
        if (st != KR_OK) {
            kr_error_prefix(err, "window %d", i);
            return st;
        }
    }
    return KR_OK;
}

size_t kr_window_encoder_bytes(const kr_window_encoder *e) { return e->w->bytes; }

size_t kr_window_encoder_scratch_bytes(const kr_window_encoder *e, int len) {
    const kr_tokenizer_config *c = &e->w->cfg;
    size_t rows = (size_t)len;
    /* Activations, K/V of every encoder block and the attention and FFN temporaries, with a
     * factor of two for the arena's settling margin. */
    size_t per_row = (size_t)(8 * c->d_model + 2 * c->ff_dim + c->s1_bits + c->s2_bits) *
                     (size_t)(c->n_enc_layers > 1 ? c->n_enc_layers : 1);
    return 2 * (rows * per_row * sizeof(float) + rows * rows * (size_t)c->n_heads * sizeof(float));
}
