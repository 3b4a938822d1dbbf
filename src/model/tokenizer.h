/*
 * model/tokenizer — the Kronos BSQ tokenizer: candles (normalised, [T][6]) ↔ (s1, s2) ids.
 *
 *   encode: Linear(6→d) → (n_enc_layers−1) causal blocks → Linear(d→20) = z → sign bits;
 *           s1 = Σ_{i<10} bit_i·2^i over dims 0–9 (LSB first), s2 the same over dims 10–19,
 *           bit_i = z_i > 0.
 *   decode: bits → ±1/√20 → Linear(20→d) → (n_dec_layers−1) causal blocks → Linear(d→6).
 *
 * decode runs over chunks like the predictor, so the context prefix of a decode window can be
 * computed once and shared by every path (stores with n_dec layers).
 */
#ifndef KR_MODEL_TOKENIZER_H
#define KR_MODEL_TOKENIZER_H

#include <stdint.h>

#include "model/transformer.h"

/* x[T][d_in] → s1[T], s2[T]; z (optional, [T][s1_bits+s2_bits]) receives quant_embed's output. */
kr_status kr_tokenizer_encode(const kr_tokenizer_weights *w, const kr_exec *ex, const float *x,
                              int T, int32_t *s1, int32_t *s2, float *z, kr_error *err);

/* Decodes chunks of ids (s1/s2 [total]) into out[total][d_in]. Stores need n_dec layers
 * (a chunk of a tokenizer without decoder blocks still needs a store of >= 1 layer). */
kr_status kr_tokenizer_decode(const kr_tokenizer_weights *w, const kr_exec *ex,
                              const kr_chunk *chunks, int n_chunks, const int32_t *s1,
                              const int32_t *s2, float *out, kr_error *err);

/* Layers a decode store needs (max(1, n_dec)). */
static inline int kr_tokenizer_store_layers(const kr_tokenizer_weights *w) {
    return w->n_dec > 0 ? w->n_dec : 1;
}

#endif
