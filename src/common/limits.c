/*
 * common/limits — the front ends' request limits (see limits.h).
 */
#include "common/limits.h"

kr_api_limits kr_api_default_limits(void) {
    kr_api_limits l;
    l.max_paths = KR_LIMIT_PATHS;
    l.max_pred_len = KR_LIMIT_PRED_LEN;
    l.max_context = KR_LIMIT_CONTEXT;
    l.max_rows = KR_LIMIT_ROWS;
    l.max_paths_key = "max_paths";
    l.max_pred_len_key = "max_pred_len";
    l.max_rows_key = NULL;
    l.max_context_key = NULL;
    l.max_horizon = KR_LIMIT_HORIZON;
    l.max_analyze_paths = KR_LIMIT_ANALYZE_PATHS;
    l.max_lookback = KR_LIMIT_LOOKBACK;
    l.max_calibrate = KR_LIMIT_CALIBRATE;
    l.max_symbols = KR_LIMIT_SYMBOLS;
    l.default_norm = KR_NORM_EXACT;
    l.default_norm_refresh = 0;
    return l;
}

kr_json_limits kr_api_json_limits(const kr_api_limits *lim) {
    kr_json_limits jl;
    /* A candle row is at most 7 cells and its container; the rest (pred_len future stamps,
     * 16 quantiles, 64 column names, the scalars) fits in the slack. */
    jl.max_values = (size_t)lim->max_rows * 8 + (size_t)lim->max_pred_len + 1024;
    /* CSV text in a string: a header, max_rows rows and a few blank lines. */
    jl.max_lines = (size_t)lim->max_rows + KR_CSV_SLACK_LINES;
    jl.values_key = lim->max_rows_key ? lim->max_rows_key : "max_rows";
    return jl;
}
