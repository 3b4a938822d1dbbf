/*
 * model/config — the constructor arguments of the two Kronos classes, read from config.json.
 * Unknown keys are ignored (dropouts, BSQ training constants); missing or out-of-range
 * required keys are errors naming the file and the key.
 */
#ifndef KR_MODEL_CONFIG_H
#define KR_MODEL_CONFIG_H

#include <stddef.h>

#include "kronos.h"

/* The "quantization" block a kronos quantize checkpoint carries ({"format": "q4",
 * "group_size": 32, "method": "awq"}); format 0 (KR_WFMT_F32) when absent. */
typedef struct kr_quant_config {
    int format; /* kr_wfmt */
    int group_size; /* Q4 only */
    char method[16]; /* "rtn", "smoothquant", "awq" (informational) */
} kr_quant_config;

typedef struct kr_predictor_config {
    int s1_bits, s2_bits; /* vocabularies 2^s1_bits, 2^s2_bits */
    int n_layers;
    int d_model;
    int n_heads; /* self-attention heads; head_dim = d_model / n_heads (even) */
    int ff_dim;
    int learn_te; /* 1: time_emb.<f>_embed.weight; 0: time_emb.<f>_embed.emb.weight */
    kr_quant_config quant;
    /* Optional provenance keys (not constructor arguments; from_pretrained ignores them):
     * "intended_use": "demo" or "test" marks a checkpoint that exists to run the software,
     * not to forecast (every report then says so); "" when absent (a forecasting model).
     * "source": where the weights come from, free text. Both survive kronos quantize. */
    char intended_use[16];
    char source[256];
} kr_predictor_config;

typedef struct kr_tokenizer_config {
    int d_in; /* 6 */
    int d_model, n_heads, ff_dim;
    int n_enc_layers, n_dec_layers; /* blocks = layers - 1 (reference quirk) */
    int s1_bits, s2_bits; /* must be equal (indices_to_bits assumes it) */
    kr_quant_config quant;
} kr_tokenizer_config;

kr_status kr_predictor_config_load(const char *path, kr_predictor_config *cfg, kr_error *err);
kr_status kr_predictor_config_parse(const char *json, size_t len, const char *label,
                                    kr_predictor_config *cfg, kr_error *err);
kr_status kr_tokenizer_config_load(const char *path, kr_tokenizer_config *cfg, kr_error *err);
kr_status kr_tokenizer_config_parse(const char *json, size_t len, const char *label,
                                    kr_tokenizer_config *cfg, kr_error *err);
/* Writes config.json the way save_pretrained does (sorted keys, reference defaults for the
 * keys we do not use). */
kr_status kr_predictor_config_save(const char *path, const kr_predictor_config *cfg, kr_error *err);
kr_status kr_tokenizer_config_save(const char *path, const kr_tokenizer_config *cfg, kr_error *err);

#endif
