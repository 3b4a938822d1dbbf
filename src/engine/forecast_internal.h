/*
 * engine/forecast_internal — the kr_forecast result layout and the extended entry point the
 * tests and the benchmark use (naive recomputation, step observers, teacher forcing).
 */
#ifndef KR_ENGINE_FORECAST_INTERNAL_H
#define KR_ENGINE_FORECAST_INTERNAL_H

#include "engine/generate.h"
#include "kronos.h"

struct kr_forecast {
    int pred_len, paths, lookback;
    int64_t *timestamps;     /* [pred_len] */
    double *mean;            /* [pred_len][6] */
    double *path_values;     /* [paths][pred_len][6] or NULL */
    int32_t *gen_s1, *gen_s2;   /* [paths][pred_len] */
    int32_t *hist_s1, *hist_s2; /* [lookback] */
    float *pred_norm;        /* [paths][pred_len][6] */
    float x_mean[6], x_std[6];
    kr_forecast_stats stats;
};

kr_status kr_forecast_run_ex(kr_model *model, const kr_series *series, int n_series,
                             const kr_forecast_params *params, const kr_gen_options *opt,
                             kr_forecast **out, kr_error *err);

#endif
