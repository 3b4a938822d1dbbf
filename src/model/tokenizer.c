/* model/tokenizer — see tokenizer.h. */
#include "model/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

kr_status kr_tokenizer_encode(const kr_tokenizer_weights *w, const kr_exec *ex, const float *x,
                              int T, int32_t *s1, int32_t *s2, float *z, kr_error *err) {
    int d = w->cfg.d_model, nb1 = w->cfg.s1_bits, cb = w->cfg.s1_bits + w->cfg.s2_bits;
    if (T <= 0) return kr_error_set(err, KR_ERR_INVALID_ARG, "tokenizer: nothing to encode");
    kr_status st = KR_OK;
    kr_kv_store store = { 0 };
    size_t mark = kr_arena_mark(ex->arena);
    float *h = KR_ARENA_NEW(ex->arena, float, (size_t)T *d);
    float *zz = KR_ARENA_NEW(ex->arena, float, (size_t)T *cb);
    if (!h || !zz) {
        st = kr_error_set(err, KR_ERR_NOMEM, "tokenizer: out of memory for %d rows", T);
        goto done;
    }
    if ((st = kr_linear_run(ex, &w->embed, x, T, w->cfg.d_in, h, d, err)) != KR_OK) goto done;
    if (w->n_enc > 0) {
        if ((st = kr_kv_store_init(&store, w->n_enc, d, T, err)) != KR_OK) goto done;
        kr_chunk ch = { .n = T, .pos0 = 0, .n_past = 0, .out = &store, .out_start = 0 };
        st = kr_transformer_run(w->enc, w->n_enc, 0, d, w->cfg.ff_dim, ex, h, &ch, 1, NULL, err);
        if (st != KR_OK) goto done;
    }
    if ((st = kr_linear_run(ex, &w->quant_embed, h, T, d, zz, cb, err)) != KR_OK) goto done;
    for (int t = 0; t < T; t++) {
        const float *zr = zz + (size_t)t * cb;
        int32_t a = 0, b = 0;
        /* Signs of F.normalize(z) are the signs of z: the L2 norm is positive. */
        for (int i = 0; i < nb1; i++) a |= (zr[i] > 0.0f) << i;
        for (int i = nb1; i < cb; i++) b |= (zr[i] > 0.0f) << (i - nb1);
        s1[t] = a;
        s2[t] = b;
    }
    if (z) memcpy(z, zz, (size_t)T * cb * sizeof(float));
done:
    kr_kv_store_release(&store);
    kr_arena_release(ex->arena, mark);
    return st;
}

kr_status kr_tokenizer_decode(const kr_tokenizer_weights *w, const kr_exec *ex,
                              const kr_chunk *chunks, int n_chunks, const int32_t *s1,
                              const int32_t *s2, float *out, kr_error *err) {
    int d = w->cfg.d_model, nb1 = w->cfg.s1_bits, cb = w->cfg.s1_bits + w->cfg.s2_bits;
    int total = 0;
    kr_status st = kr_chunks_check(chunks, n_chunks, kr_tokenizer_store_layers(w), &total, err);
    if (st != KR_OK) return st;
    int v1 = 1 << w->cfg.s1_bits, v2 = 1 << w->cfg.s2_bits;
    for (int i = 0; i < total; i++)
        if (s1[i] < 0 || s1[i] >= v1 || s2[i] < 0 || s2[i] >= v2)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "tokenizer: token %d (%d, %d) out of vocabulary", i, s1[i], s2[i]);
    size_t mark = kr_arena_mark(ex->arena);
    float *bits = KR_ARENA_NEW(ex->arena, float, (size_t)total *cb);
    float *h = KR_ARENA_NEW(ex->arena, float, (size_t)total *d);
    if (!bits || !h) {
        kr_arena_release(ex->arena, mark);
        return kr_error_set(err, KR_ERR_NOMEM, "tokenizer: out of memory for %d rows", total);
    }
    /* q_scale = 1/√codebook_dim in double, rounded once to float as torch multiplies by it. */
    float q = (float)(1.0 / sqrt((double)cb));
    for (int t = 0; t < total; t++) {
        float *br = bits + (size_t)t * cb;
        for (int i = 0; i < nb1; i++) br[i] = ((s1[t] >> i) & 1) ? q : -q;
        for (int i = nb1; i < cb; i++) br[i] = ((s2[t] >> (i - nb1)) & 1) ? q : -q;
    }
    st = kr_linear_run(ex, &w->post_quant_embed, bits, total, cb, h, d, err);
    if (st == KR_OK && w->n_dec > 0)
        st = kr_transformer_run(w->dec, w->n_dec, 0, d, w->cfg.ff_dim, ex, h, chunks, n_chunks,
                                NULL, err);
    if (st == KR_OK) st = kr_linear_run(ex, &w->head, h, total, d, out, w->cfg.d_in, err);
    kr_arena_release(ex->arena, mark);
    return st;
}
