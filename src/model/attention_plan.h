/*
 * model/attention_plan — runs attention for many query rows at once, grouping the rows whose
 * keys start with the same block of rows (the shared context prefix of all sample paths of a
 * forecast, or the history part of a re-run window) so that block is read once per group
 * through kr_attend_multi_f32 instead of once per row. Each row's result is bit-identical to
 * a lone kr_attend_f32 over its keys (kernels.h), so grouping never changes numbers.
 * Keys may live in stores of any kr_kv_dtype: bf16 / int8 rows are dequantised once per call
 * (see attention_plan.c), so a row sees exactly what kr_kv_store_read returns.
 */
#ifndef KR_MODEL_ATTENTION_PLAN_H
#define KR_MODEL_ATTENTION_PLAN_H

#include "base/workspace.h"
#include "model/transformer.h"

/* The keys of one query row: rows of KV stores, in order. */
typedef struct kr_attn_keys {
    kr_kv_ref ref[KR_MAX_PAST_REFS + 1];
    int n;
} kr_attn_keys;

/* out[r][h·head_dim ..] = attention of q[r][h·head_dim ..] over keys[r] in store layer
 * `layer`, for every row r < n_rows and head h < n_heads; rows have d floats (q, out). */
kr_status kr_attention_rows(const kr_exec *ex, int n_rows, const kr_attn_keys *keys, int layer,
                            int n_heads, int head_dim, int d, const float *q, float *out,
                            kr_error *err);

#endif
